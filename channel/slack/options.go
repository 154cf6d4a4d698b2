package slack

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

// DefaultAPIURL is Slack's Web API.
const DefaultAPIURL = "https://slack.com/api/"

// Modes: how events reach conch.
const (
	// ModeSocket opens a WebSocket to Slack (no public URL). The default.
	ModeSocket = "socket"
	// ModeEvents takes the Events API's HTTPS requests on conch's HTTP host
	// (Register), checked with the signing secret.
	ModeEvents = "events"
)

// Channel policies: when the bot answers in channels (DMs are always
// answered, subject to the gateway's admission).
const (
	// ChannelMention answers a message that mentions the bot, and every
	// message in a thread it was mentioned in (the thread is then its
	// conversation). The default.
	ChannelMention = "mention"
	// ChannelAll answers every message in the channels the bot is in.
	ChannelAll = "all"
	// ChannelDeny ignores channels: DMs only.
	ChannelDeny = "deny"
)

// Defaults for Options.
const (
	DefaultMaxFileBytes = 20 << 20
	// DefaultWorkingReaction is the emoji shown on a message while its turn
	// runs.
	DefaultWorkingReaction = "hourglass_flowing_sand"
	maxInboundBytes        = 32 * 1024
)

// Options configure a Channel. BotToken, AppToken and Cursors are required.
type Options struct {
	// BotToken is the bot user OAuth token (xoxb-…).
	BotToken string
	// AppToken is the app-level token with connections:write (xapp-…), for
	// Socket Mode.
	AppToken string
	// Mode is ModeSocket (default) or ModeEvents.
	Mode string
	// SigningSecret checks the Events API's requests (ModeEvents).
	SigningSecret string
	// APIURL is the Web API's base URL ("" = DefaultAPIURL).
	APIURL string
	// ChannelPolicy is ChannelMention (default), ChannelAll or ChannelDeny.
	ChannelPolicy string
	// MaxFileBytes caps one received file (0 = default).
	MaxFileBytes int64
	// WorkingReaction is the emoji (name without colons) shown on the
	// message being worked on ("" = DefaultWorkingReaction; "-" = none).
	WorkingReaction string
	// Cursors keeps the threads the bot was mentioned in.
	Cursors conch.CursorStore
	Logger  *slog.Logger
	// HTTPClient talks to Slack (nil = a client with a 60 s timeout).
	HTTPClient *http.Client
	// Backoff paces retries of failed calls (zero = 1 s base, 1 min cap);
	// Slack's Retry-After is always honoured.
	Backoff backoff.Policy
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
	if o.ChannelPolicy == "" {
		o.ChannelPolicy = ChannelMention
	}
	if o.Mode == "" {
		o.Mode = ModeSocket
	}
	if o.MaxFileBytes == 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.WorkingReaction == "" {
		o.WorkingReaction = DefaultWorkingReaction
	}
	o.WorkingReaction = strings.Trim(o.WorkingReaction, ":")
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
	if o.Now == nil {
		o.Now = time.Now
	}
}

func (o *Options) validate() error {
	var errs []error
	if !strings.HasPrefix(o.BotToken, "xoxb-") {
		errs = append(errs, errors.New("bot token: want the Bot User OAuth Token (xoxb-…)"))
	}
	switch o.Mode {
	case ModeSocket:
		if !strings.HasPrefix(o.AppToken, "xapp-") {
			errs = append(errs, errors.New("app token: want an app-level token with connections:write (xapp-…)"))
		}
	case ModeEvents:
		if o.SigningSecret == "" {
			errs = append(errs, errors.New("signing secret: the Events API needs the app's signing secret"))
		}
	default:
		errs = append(errs, fmt.Errorf("mode %q: want socket or events", o.Mode))
	}
	if u, err := url.Parse(o.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("api url %q: want an http(s) URL such as %s", o.APIURL, DefaultAPIURL))
	}
	switch o.ChannelPolicy {
	case ChannelMention, ChannelAll, ChannelDeny:
	default:
		errs = append(errs, fmt.Errorf("channel policy %q: want mention, all or deny", o.ChannelPolicy))
	}
	if o.MaxFileBytes < 0 {
		errs = append(errs, fmt.Errorf("max file bytes %d: want a positive number", o.MaxFileBytes))
	}
	if o.Cursors == nil {
		errs = append(errs, errors.New("no cursor store (Options.Cursors) for the threads the bot is in"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("slack options: %w", err)
	}
	return nil
}
