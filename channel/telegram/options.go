package telegram

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

// DefaultAPIURL is the public Bot API server.
const DefaultAPIURL = "https://api.telegram.org"

// Group policies: when the bot answers in groups.
const (
	// GroupMention answers messages that mention the bot or reply to it
	// (and the known slash commands). Works with BotFather's privacy mode on.
	GroupMention = "mention"
	// GroupAll answers every message in the group (needs privacy mode off).
	GroupAll = "all"
	// GroupDeny ignores groups.
	GroupDeny = "deny"
)

// Defaults for Options.
const (
	DefaultMaxFileBytes = 20 << 20 // the Bot API's own getFile limit
	DefaultPollTimeout  = 30 * time.Second
	DefaultTypingEvery  = 4 * time.Second // the indicator lasts 5 s
	maxInboundBytes     = 32 * 1024
)

// Options configure a Channel. Token and Cursors are required.
type Options struct {
	Token string
	// APIURL is the Bot API server ("" = DefaultAPIURL).
	APIURL string
	// GroupPolicy is GroupMention (default), GroupAll or GroupDeny.
	GroupPolicy string
	// MaxFileBytes caps one received photo or document (0 = default).
	MaxFileBytes int64
	// Cursors keeps the update offset.
	Cursors conch.CursorStore
	Logger  *slog.Logger
	// HTTPClient talks to the Bot API; nil means a client without a global
	// timeout (each call has its own deadline).
	HTTPClient *http.Client
	// PollTimeout is the long-poll timeout of getUpdates (0 = default).
	PollTimeout time.Duration
	// Backoff paces retries after failed polls and sends (zero = 1 s base,
	// 1 min cap); a server's retry_after is always honoured.
	Backoff backoff.Policy
	// TypingEvery is how often the typing action is renewed (0 = default).
	TypingEvery time.Duration
	// Now is the clock (nil = time.Now).
	Now func() time.Time
}

func (o *Options) setDefaults() {
	if o.APIURL == "" {
		o.APIURL = DefaultAPIURL
	}
	o.APIURL = strings.TrimRight(o.APIURL, "/")
	if o.GroupPolicy == "" {
		o.GroupPolicy = GroupMention
	}
	if o.MaxFileBytes == 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Transport: http.DefaultTransport}
	}
	if o.PollTimeout == 0 {
		o.PollTimeout = DefaultPollTimeout
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
	if !ValidToken(o.Token) {
		errs = append(errs, errors.New("bot token: want the token BotFather gave, <bot id>:<secret>"))
	}
	if u, err := url.Parse(o.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("api url %q: want an http(s) URL such as %s", o.APIURL, DefaultAPIURL))
	}
	switch o.GroupPolicy {
	case GroupMention, GroupAll, GroupDeny:
	default:
		errs = append(errs, fmt.Errorf("group policy %q: want mention, all or deny", o.GroupPolicy))
	}
	if o.MaxFileBytes < 0 {
		errs = append(errs, fmt.Errorf("max file bytes %d: want a positive number", o.MaxFileBytes))
	}
	if o.Cursors == nil {
		errs = append(errs, errors.New("no cursor store (Options.Cursors) for the update offset"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telegram options: %w", err)
	}
	return nil
}

// ValidToken checks the shape of a bot token: a numeric bot id, a colon,
// and a secret of letters, digits, '-' and '_'.
func ValidToken(t string) bool {
	id, secret, ok := strings.Cut(t, ":")
	if !ok || id == "" || len(secret) < 10 {
		return false
	}
	for _, r := range id {
		if r < '0' || r > '9' {
			return false
		}
	}
	for _, r := range secret {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
