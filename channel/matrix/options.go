package matrix

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"conch"
)

// DefaultGreeting is sent when the bot joins a room it was invited to.
const DefaultGreeting = "Hello! I'm conch. This room gets its own computer: send a message and I'll get to work."

// Defaults for Options.
const (
	DefaultMaxReconnectAttempts = 5
	DefaultBackoffBase          = time.Second
	DefaultBackoffMax           = time.Minute
	DefaultMaxInboundBytes      = 32 * 1024
)

// Group policies.
const (
	GroupAllow = "allow"
	GroupDeny  = "deny"
)

// Options configure a Channel. Homeserver, UserID, one of AccessToken or
// Password, DB and Cursors are required.
type Options struct {
	Homeserver string
	UserID     string
	// AccessToken logs in as an existing device; Password logs in with the
	// device id kept in Cursors, so a restart reuses the device and its keys.
	AccessToken string
	Password    string
	// DeviceID, when set, must match the device of AccessToken, or is the
	// device a password login asks for the first time.
	DeviceID string
	// DeviceName is the display name of a device created by password login.
	DeviceName string

	// AllowFrom lists the Matrix user ids whose messages are handled; "*"
	// allows everyone. Others are dropped silently.
	AllowFrom []string
	// GroupPolicy is GroupAllow or GroupDeny for rooms with more than one
	// other member. "" means GroupAllow.
	GroupPolicy string
	// MentionOnly makes the bot answer in group rooms only when mentioned.
	MentionOnly bool
	// Greeting is sent after joining on an invite; "" means DefaultGreeting.
	Greeting string

	// DB holds mautrix's crypto and room-state tables and the events waiting
	// for a room key (each set versioned by go.mau.fi/util/dbutil in its own
	// table: crypto_version, mx_version, conch_matrix_version). Pass conch's
	// store, sqlite.DB.SQL(): same file, WAL, busy timeout, BEGIN IMMEDIATE.
	DB *sql.DB
	// Cursors keeps the sync token, the filter id and the device id.
	Cursors conch.CursorStore
	// PickleKey encrypts the Olm/Megolm keys at rest (see LoadOrCreatePickleKey).
	// Required unless the binary is built with -tags noe2ee.
	PickleKey []byte

	Logger *slog.Logger
	// HTTPClient talks to the homeserver; nil means a client with sane timeouts.
	HTTPClient *http.Client

	// MaxReconnectAttempts is how many failed syncs in a row Run tolerates
	// before it returns an error. 0 means DefaultMaxReconnectAttempts.
	MaxReconnectAttempts int
	// BackoffBase and BackoffMax bound the exponential wait between failed
	// syncs. 0 means the defaults.
	BackoffBase, BackoffMax time.Duration
	// MaxInboundBytes drops longer messages with a log line. 0 means the default.
	MaxInboundBytes int

	// keyWaitInitial and keyWaitExtended override how long an undecryptable
	// message waits for its room key before and after requesting it (tests).
	keyWaitInitial, keyWaitExtended time.Duration
}

func (o *Options) setDefaults() {
	if o.GroupPolicy == "" {
		o.GroupPolicy = GroupAllow
	}
	if o.Greeting == "" {
		o.Greeting = DefaultGreeting
	}
	if o.DeviceName == "" {
		o.DeviceName = "conch"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 90 * time.Second}
	}
	if o.MaxReconnectAttempts == 0 {
		o.MaxReconnectAttempts = DefaultMaxReconnectAttempts
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = DefaultBackoffBase
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	if o.MaxInboundBytes == 0 {
		o.MaxInboundBytes = DefaultMaxInboundBytes
	}
}

func (o *Options) validate() error {
	var errs []error
	if u, err := url.Parse(o.Homeserver); o.Homeserver == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("homeserver %q: want an http(s) URL such as https://matrix.example.org", o.Homeserver))
	}
	if !validUserID(o.UserID) {
		errs = append(errs, fmt.Errorf("user id %q: want @localpart:server", o.UserID))
	}
	if o.AccessToken == "" && o.Password == "" {
		errs = append(errs, errors.New("neither an access token nor a password is set"))
	}
	for _, a := range o.AllowFrom {
		if a != "*" && !validUserID(a) {
			errs = append(errs, fmt.Errorf("allow_from entry %q: want @localpart:server or *", a))
		}
	}
	switch o.GroupPolicy {
	case GroupAllow, GroupDeny:
	default:
		errs = append(errs, fmt.Errorf("group policy %q: want allow or deny", o.GroupPolicy))
	}
	if o.DB == nil {
		errs = append(errs, errors.New("no database (Options.DB) for the crypto and state store"))
	}
	if o.Cursors == nil {
		errs = append(errs, errors.New("no cursor store (Options.Cursors) for the sync token"))
	}
	if e2eeAvailable && len(o.PickleKey) == 0 {
		errs = append(errs, errors.New("no pickle key (Options.PickleKey) for the crypto store"))
	}
	if o.MaxReconnectAttempts < 0 {
		errs = append(errs, fmt.Errorf("max reconnect attempts %d: want a positive number", o.MaxReconnectAttempts))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("matrix options: %w", err)
	}
	return nil
}

// validUserID checks the shape @localpart:server.
func validUserID(s string) bool {
	local, server, ok := strings.Cut(strings.TrimPrefix(s, "@"), ":")
	return strings.HasPrefix(s, "@") && ok && local != "" && server != "" && !strings.ContainsAny(s, " \t\n")
}
