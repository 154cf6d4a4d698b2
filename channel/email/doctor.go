package email

import (
	"context"
	"fmt"
	"strings"

	"github.com/emersion/go-imap/v2"

	"conch"
)

// CheckIMAP logs in, selects the mailbox and says what it found; for
// `conch doctor`. It changes nothing on the server.
func CheckIMAP(ctx context.Context, opts Options) (string, error) {
	if opts.Cursors == nil {
		opts.Cursors = noCursors{}
	}
	if opts.Sent == nil {
		opts.Sent = noCursors{}
	}
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return "", err
	}
	c := &Channel{opts: opts, log: opts.Logger}
	s := &session{c: c, newMail: make(chan struct{}, 1)}
	if err := s.dial(ctx); err != nil {
		return "", fmt.Errorf("%s: %w", opts.IMAPAddr, err)
	}
	stop := context.AfterFunc(ctx, func() { s.conn.Close() })
	defer stop()
	defer s.cli.Close()
	err := s.guard("login", func() error { return s.cli.Login(opts.IMAPUsername, opts.IMAPPassword).Wait() })
	if err != nil {
		return "", fmt.Errorf("%s as %s: %w (check email.imap_username and email.imap_password; providers with two-factor login want an app password)", opts.IMAPAddr, opts.IMAPUsername, err)
	}
	var sel *imap.SelectData
	if err := s.guard("select", func() (err error) {
		sel, err = s.cli.Select(opts.Mailbox, &imap.SelectOptions{ReadOnly: true}).Wait()
		return err
	}); err != nil {
		return "", fmt.Errorf("mailbox %q: %w (check email.mailbox)", opts.Mailbox, err)
	}
	push := "no IDLE: polling every " + opts.PollInterval.String()
	if s.cli.Caps().Has(imap.CapIdle) || s.cli.Caps().Has(imap.CapIMAP4rev2) {
		push = "IDLE supported"
		if opts.NoIDLE {
			push = "IDLE supported but turned off (email.idle = false): polling every " + opts.PollInterval.String()
		}
	}
	_ = s.guard("logout", func() error { return s.cli.Logout().Wait() })
	return fmt.Sprintf("%s at %s (%s): %s holds %d mail(s), %s", opts.IMAPUsername, opts.IMAPAddr, tlsWords(opts.IMAPTLS), opts.Mailbox, sel.NumMessages, push), nil
}

// CheckSMTP connects, greets and authenticates without sending anything.
func CheckSMTP(ctx context.Context, opts Options) (string, error) {
	if opts.Cursors == nil {
		opts.Cursors = noCursors{}
	}
	if opts.Sent == nil {
		opts.Sent = noCursors{}
	}
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return "", err
	}
	c := &Channel{opts: opts, log: opts.Logger}
	if err := c.submitCheck(ctx); err != nil {
		return "", fmt.Errorf("%s: %w", opts.SMTPAddr, err)
	}
	auth := "no AUTH (email.smtp_username is empty)"
	if opts.SMTPUsername != "" {
		auth = "logged in as " + opts.SMTPUsername
	}
	return fmt.Sprintf("%s (%s), %s", opts.SMTPAddr, tlsWords(opts.SMTPTLS), auth), nil
}

func tlsWords(m TLSMode) string {
	switch m {
	case TLSImplicit:
		return "TLS"
	case TLSStartTLS:
		return "STARTTLS"
	}
	return strings.ToUpper("no TLS")
}

// noCursors stands in for the store in checks that move no cursor and send
// nothing.
type noCursors struct{}

func (noCursors) Cursor(context.Context, string) (string, error)  { return "", nil }
func (noCursors) SetCursor(context.Context, string, string) error { return nil }
func (noCursors) RecordSent(context.Context, conch.ConversationKey, string) error {
	return nil
}
func (noCursors) SentConversation(context.Context, conch.ChannelName, string) (conch.ConversationKey, bool, error) {
	return conch.ConversationKey{}, false, nil
}
