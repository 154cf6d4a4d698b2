// Package email is conch's email channel: new mail arrives over IMAP (IDLE
// where the server has it, polling otherwise), replies leave over SMTP,
// threaded and with a stable Message-ID.
//
// A mail is acknowledged (the UID cursor in the store moves past it, and it
// is flagged \Seen) only after the gateway stored it durably, so a crash
// loses nothing; the store refuses a second message with the same
// Message-ID, so nothing is handled twice. A reply's Message-ID is derived
// from the mail it answers and recorded once SMTP accepted it, so a reply
// re-sent after a crash is recognised and not sent again.
package email

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"conch"
)

// Channel is the email channel adapter.
type Channel struct {
	opts Options
	log  *slog.Logger
	rate *rateLimiter
	rend *renderer

	mu      sync.Mutex
	started bool
	st      status
}

// status is what /status and doctor say about the IMAP connection.
type status struct {
	connected bool
	mode      string // "IDLE" or "polling every 30s"
	since     time.Time
	failures  int
	lastErr   error
	downSince time.Time
	retryAt   time.Time
	lastMail  time.Time
}

var (
	_ conch.Channel           = (*Channel)(nil)
	_ conch.StatusChannel     = (*Channel)(nil)
	_ conch.AttachmentChannel = (*Channel)(nil)
)

// New checks the options and returns a channel; Run connects it.
func New(opts Options) (*Channel, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Channel{
		opts: opts,
		log:  opts.Logger.With("channel", "email"),
		rate: newRateLimiter(opts.MaxPerHour, time.Hour),
		rend: newRenderer(),
	}, nil
}

// Name implements conch.Channel.
func (c *Channel) Name() conch.ChannelName { return conch.ChannelEmail }

// Run watches the mailbox until ctx is done (then it returns nil). It
// reconnects with backoff after any failure, forever once it was connected;
// before the first connection, StartAttempts failures in a row, or the
// server refusing the login, end Run with an error (a wrong host or
// password should stop conch, not be retried in silence).
func (c *Channel) Run(ctx context.Context, h conch.Handler) error {
	if h == nil {
		return errors.New("email run: nil handler")
	}
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("email run: already running")
	}
	c.started = true
	c.mu.Unlock()
	everConnected := false
	failures := 0
	for {
		connected, err := c.session(ctx, h)
		if ctx.Err() != nil {
			return nil
		}
		if connected {
			everConnected, failures = true, 0
		}
		failures++
		if !everConnected {
			if isAuthError(err) {
				return &conch.Error{Kind: conch.KindAuth, User: "the mail server refused conch's login",
					Err: fmt.Errorf("email: IMAP login as %s at %s: %w (check email.imap_username and email.imap_password)", c.opts.IMAPUsername, c.opts.IMAPAddr, err)}
			}
			if failures >= c.opts.StartAttempts {
				return &conch.Error{Kind: conch.KindUnavailable, User: "the mail server is unreachable",
					Err: fmt.Errorf("email: IMAP %s failed %d times in a row at start, giving up: %w", c.opts.IMAPAddr, failures, err)}
			}
		}
		wait := c.opts.Backoff.Delay(failures)
		c.noteDown(err, failures, wait)
		c.log.Warn("email: IMAP connection failed, reconnecting", "attempt", failures, "wait", wait.Round(time.Millisecond), "err", err)
		if c.opts.Backoff.Sleep(ctx, wait) != nil {
			return nil
		}
	}
}

func (c *Channel) noteUp(mode string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.connected, c.st.mode, c.st.since = true, mode, c.opts.Now()
	c.st.failures, c.st.lastErr = 0, nil
}

func (c *Channel) noteDown(err error, failures int, wait time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Now()
	if c.st.connected || c.st.downSince.IsZero() {
		c.st.downSince = now
	}
	c.st.connected = false
	c.st.failures, c.st.lastErr, c.st.retryAt = failures, err, now.Add(wait)
}

func (c *Channel) noteMail() {
	c.mu.Lock()
	c.st.lastMail = c.opts.Now()
	c.mu.Unlock()
}

// Status implements conch.StatusChannel: one line on the mailbox connection.
func (c *Channel) Status(_ context.Context, _ conch.ConversationKey) []string {
	return []string{c.StatusLine()}
}

// StatusLine describes the IMAP connection in one line.
func (c *Channel) StatusLine() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.st
	where := c.opts.Mailbox + " at " + c.opts.IMAPAddr
	switch {
	case st.connected:
		line := fmt.Sprintf("Email: watching %s (%s) since %s", where, st.mode, st.since.UTC().Format(time.RFC3339))
		if !st.lastMail.IsZero() {
			line += "; last mail handled " + st.lastMail.UTC().Format(time.RFC3339)
		}
		return line
	case st.lastErr != nil:
		return fmt.Sprintf("Email: cannot reach %s since %s (%d failed attempts, next at %s): %v",
			where, st.downSince.UTC().Format(time.RFC3339), st.failures, st.retryAt.UTC().Format(time.RFC3339), st.lastErr)
	}
	return "Email: connecting to " + where
}

// isAuthError reports whether the server refused the login.
func isAuthError(err error) bool {
	var le loginError
	return errors.As(err, &le)
}

type loginError struct{ err error }

func (e loginError) Error() string { return "login refused: " + e.err.Error() }
func (e loginError) Unwrap() error { return e.err }

// Conversation keys: the sender's address in sender mode, the address and
// the thread's root Message-ID ("alice@example.org <root@id>") in thread
// mode. A thread is per sender: someone else replying into it (knowing its
// Message-IDs) gets a conversation of their own, not this one's computer.
func threadKey(sender, root string) conch.ConversationKey {
	return conch.ConversationKey{Channel: conch.ChannelEmail, ID: sender + " <" + root + ">"}
}

func senderKey(sender string) conch.ConversationKey {
	return conch.ConversationKey{Channel: conch.ChannelEmail, ID: sender}
}

// recipientOf returns the address a conversation's replies go to.
func recipientOf(key conch.ConversationKey) (string, error) {
	if key.Channel != conch.ChannelEmail {
		return "", fmt.Errorf("email: conversation %s belongs to another channel", key)
	}
	addr := key.ID
	if i := strings.Index(addr, " <"); i >= 0 {
		addr = addr[:i]
	}
	if !strings.Contains(addr, "@") || strings.ContainsAny(addr, " \r\n<>,") {
		return "", fmt.Errorf("email: conversation id %q holds no address", key.ID)
	}
	return addr, nil
}

// hostOf returns the host of a host:port.
func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
