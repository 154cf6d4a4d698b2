package discord

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"conch"
	"conch/internal/backoff"
)

// DefaultAPIURL is Discord's REST API (the version discordgo speaks).
const DefaultAPIURL = "https://discord.com/api/v9/"

// Guild policies: when the bot answers in servers (DMs are always
// answered, subject to the gateway's admission).
const (
	// GuildMention answers a message that mentions the bot or replies to
	// it, and in a thread every message once it was mentioned there. The
	// default.
	GuildMention = "mention"
	// GuildAll answers every message in the channels the bot can read.
	GuildAll = "all"
	// GuildDeny ignores servers: DMs only.
	GuildDeny = "deny"
)

// Defaults for Options.
const (
	DefaultMaxFileBytes = 25 << 20
	DefaultTypingEvery  = 8 * time.Second // the indicator lasts 10 s
	maxInboundBytes     = 32 * 1024
)

// Options configure a Channel. Token and Cursors are required.
type Options struct {
	// Token is the bot token from the Developer Portal (without "Bot ").
	Token string
	// APIURL is the REST base ("" = DefaultAPIURL); another URL sends
	// discordgo's requests there (tests).
	APIURL string
	// GuildPolicy is GuildMention (default), GuildAll or GuildDeny.
	GuildPolicy string
	// MaxFileBytes caps one received attachment (0 = default).
	MaxFileBytes int64
	// Cursors keeps each channel's position and the threads the bot is in.
	Cursors conch.CursorStore
	Logger  *slog.Logger
	// HTTPClient talks to Discord (nil = a client with a 60 s timeout).
	HTTPClient *http.Client
	// Backoff paces retries (zero = 1 s base, 1 min cap); Discord's
	// retry_after is always honoured.
	Backoff backoff.Policy
	// TypingEvery is how often typing is renewed (0 = default).
	TypingEvery time.Duration
	// Now is the clock (nil = time.Now).
	Now func() time.Time
}

func (o *Options) setDefaults() {
	if o.APIURL == "" {
		o.APIURL = DefaultAPIURL
	}
	if !strings.HasSuffix(o.APIURL, "/") {
		o.APIURL += "/"
	}
	o.Token = strings.TrimPrefix(strings.TrimSpace(o.Token), "Bot ")
	if o.GuildPolicy == "" {
		o.GuildPolicy = GuildMention
	}
	if o.MaxFileBytes == 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	if o.Backoff.Base == 0 {
		o.Backoff.Base = time.Second
	}
	if o.Backoff.Cap == 0 {
		o.Backoff.Cap = time.Minute
	}
	if o.TypingEvery == 0 {
		o.TypingEvery = DefaultTypingEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

func (o *Options) validate() error {
	var errs []error
	if o.Token == "" || strings.ContainsAny(o.Token, " \n") {
		errs = append(errs, errors.New("token: want the bot token from the Developer Portal (Bot → Reset Token)"))
	}
	if u, err := url.Parse(o.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("api url %q: want an http(s) URL such as %s", o.APIURL, DefaultAPIURL))
	}
	switch o.GuildPolicy {
	case GuildMention, GuildAll, GuildDeny:
	default:
		errs = append(errs, fmt.Errorf("guild policy %q: want mention, all or deny", o.GuildPolicy))
	}
	if o.MaxFileBytes < 0 {
		errs = append(errs, fmt.Errorf("max file bytes %d: want a positive number", o.MaxFileBytes))
	}
	if o.Cursors == nil {
		errs = append(errs, errors.New("no cursor store (Options.Cursors) for channel positions"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("discord options: %w", err)
	}
	return nil
}
