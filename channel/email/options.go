package email

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"strings"
	"time"

	"conch"
	"conch/internal/backoff"
)

// TLSMode is how a connection is secured.
type TLSMode string

// TLS modes.
const (
	TLSImplicit TLSMode = "implicit" // TLS from the first byte (IMAP 993, SMTP 465)
	TLSStartTLS TLSMode = "starttls" // plain, then STARTTLS (IMAP 143, SMTP 587)
	TLSNone     TLSMode = "none"     // plain text: loopback test servers only
)

// Session modes: what a conversation is.
const (
	// SessionThread makes each mail thread (per sender) its own conversation.
	SessionThread = "thread"
	// SessionSender makes all mail of one sender one conversation.
	SessionSender = "sender"
)

// DefaultCommandTimeout bounds IMAP commands and SMTP exchanges when
// Options.CommandTimeout is 0 (it is no configuration key).
const DefaultCommandTimeout = time.Minute

// Options configure a Channel. Address, IMAPAddr, IMAPUsername,
// IMAPPassword, SMTPAddr and Cursors are required, and so are the settings
// config's [email] section has (TLS modes, Mailbox, Session, IdleRefresh,
// PollInterval, the size and rate limits, StartAttempts): their defaults
// live in config/default.toml only.
type Options struct {
	// Address is conch's own address: From of replies, domain of their
	// Message-IDs; mail from it is never answered.
	Address string
	// Name is the display name on replies ("" = "conch").
	Name string

	IMAPAddr     string // host:port
	IMAPUsername string
	IMAPPassword string
	IMAPTLS      TLSMode

	SMTPAddr     string // host:port
	SMTPUsername string // "" = no AUTH
	SMTPPassword string
	SMTPTLS      TLSMode

	// TLSConfig is cloned for both connections (ServerName is set per
	// host); nil means the system roots.
	TLSConfig *tls.Config

	// Mailbox is the IMAP folder to watch (INBOX).
	Mailbox string
	// Session is SessionThread or SessionSender.
	Session string
	// TrustedAuthservID, when set, requires that server's
	// Authentication-Results to show DMARC (or aligned DKIM/SPF) pass.
	TrustedAuthservID string

	// NoIDLE polls even when the server has IDLE.
	NoIDLE bool
	// IdleRefresh ends and re-issues IDLE, checking the mailbox and the
	// connection, this often (the watchdog for an IDLE that stalls).
	IdleRefresh time.Duration
	// PollInterval is the period without IDLE.
	PollInterval time.Duration
	// CommandTimeout bounds every IMAP command and SMTP exchange; a server
	// that does not answer in time gets its connection closed.
	CommandTimeout time.Duration

	// MaxMessageBytes: larger mails are not downloaded; the model is told
	// and answers the sender. MaxAttachmentBytes caps one file.
	MaxMessageBytes    int64
	MaxAttachmentBytes int64
	// MaxPerHour caps the mails per sender handed to the gateway in an hour.
	MaxPerHour int
	// StartAttempts failed connections in a row before the first success
	// make Run return an error; after one success Run retries forever.
	StartAttempts int
	// Backoff paces reconnections (its Max is ignored: Run retries forever).
	Backoff backoff.Policy

	// Cursors keeps the mailbox position (UIDVALIDITY and the last handled
	// UID).
	Cursors conch.CursorStore
	// Sent keeps the Message-IDs of sent replies with their conversations.
	Sent   conch.SentStore
	Logger *slog.Logger
	// Now is the clock (tests).
	Now func() time.Time
}

func (o *Options) setDefaults() {
	if o.Name == "" {
		o.Name = "conch"
	}
	if o.CommandTimeout == 0 {
		o.CommandTimeout = DefaultCommandTimeout
	}
	if o.Backoff.Base == 0 {
		o.Backoff.Base = time.Second
	}
	if o.Backoff.Cap == 0 {
		o.Backoff.Cap = 5 * time.Minute
	}
	o.Backoff.Max = 0
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Address = strings.ToLower(o.Address)
}

func (o *Options) validate() error {
	var errs []error
	if a, err := mail.ParseAddress(o.Address); err != nil || a.Address != o.Address || !strings.Contains(o.Address, "@") {
		errs = append(errs, fmt.Errorf("address %q: want conch's own address, e.g. conch@example.org", o.Address))
	}
	for _, hp := range []struct{ what, addr string }{{"IMAP", o.IMAPAddr}, {"SMTP", o.SMTPAddr}} {
		if _, _, err := net.SplitHostPort(hp.addr); err != nil {
			errs = append(errs, fmt.Errorf("%s address %q: want host:port", hp.what, hp.addr))
		}
	}
	if o.IMAPUsername == "" || o.IMAPPassword == "" {
		errs = append(errs, errors.New("IMAP username and password are required"))
	}
	if o.Mailbox == "" {
		errs = append(errs, errors.New("no mailbox (config email.mailbox)"))
	}
	if o.IdleRefresh <= 0 || o.PollInterval <= 0 || o.MaxMessageBytes <= 0 || o.MaxAttachmentBytes <= 0 || o.MaxPerHour <= 0 || o.StartAttempts <= 0 {
		errs = append(errs, errors.New("IdleRefresh, PollInterval, MaxMessageBytes, MaxAttachmentBytes, MaxPerHour and StartAttempts must be positive (config [email] idle_refresh, poll_interval, max_message_bytes, max_attachment_bytes, max_per_hour, start_attempts)"))
	}
	if o.SMTPUsername != "" && o.SMTPPassword == "" {
		errs = append(errs, errors.New("SMTP username set without a password"))
	}
	for _, m := range []TLSMode{o.IMAPTLS, o.SMTPTLS} {
		switch m {
		case TLSImplicit, TLSStartTLS, TLSNone:
		default:
			errs = append(errs, fmt.Errorf("TLS mode %q: want implicit, starttls or none", m))
		}
	}
	switch o.Session {
	case SessionThread, SessionSender:
	default:
		errs = append(errs, fmt.Errorf("session %q: want thread or sender", o.Session))
	}
	if o.Cursors == nil {
		errs = append(errs, errors.New("no cursor store (Options.Cursors)"))
	}
	if o.Sent == nil {
		errs = append(errs, errors.New("no sent-id store (Options.Sent)"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("email options: %w", err)
	}
	return nil
}

// domain is the part of Address after the @.
func (o *Options) domain() string { return domainOf(o.Address) }
