package mail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// Send submits raw RFC 5322 bytes through postfix's SMTP port with the
// given envelope. Plain SMTP on loopback: go-smtp's SendMail would insist
// on STARTTLS.
func (s *Server) Send(ctx context.Context, from string, to []string, raw []byte) error {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", s.SMTPAddr)
	if err != nil {
		return fmt.Errorf("smtp dial: %w", err)
	}
	c := smtp.NewClient(conn)
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if err := c.SendMail(from, to, bytes.NewReader(raw)); err != nil {
		return fmt.Errorf("smtp send: %w", err)
	}
	return c.Quit()
}

// MustSend is Send that fails the test on error.
func (s *Server) MustSend(tb testing.TB, from string, to []string, raw []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Send(ctx, from, to, raw); err != nil {
		tb.Fatal(err)
	}
}

// Message is one mail in a mailbox, read from dovecot's Maildir.
type Message struct {
	Raw    []byte
	Header mail.Header
	// File is the Maildir file name.
	File string
	// Delivered is the file's modification time (delivery time).
	Delivered time.Time
}

// Messages lists the INBOX of u in delivery order. It reads the Maildir
// directly, so it does not disturb IMAP sessions.
func (s *Server) Messages(u User) ([]Message, error) {
	var msgs []Message
	for _, sub := range []string{"new", "cur"} {
		dir := s.path("maildirs", u.Local, sub)
		ents, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			raw, err := os.ReadFile(p)
			if errors.Is(err, os.ErrNotExist) {
				continue // moved from new/ to cur/ meanwhile
			}
			if err != nil {
				return nil, err
			}
			info, err := e.Info()
			if err != nil {
				continue
			}
			m := Message{Raw: raw, File: e.Name(), Delivered: info.ModTime()}
			if pm, err := mail.ReadMessage(bytes.NewReader(raw)); err == nil {
				m.Header = pm.Header
			}
			msgs = append(msgs, m)
		}
	}
	sort.Slice(msgs, func(i, j int) bool { return msgs[i].Delivered.Before(msgs[j].Delivered) })
	return msgs, nil
}

// WaitMessages waits until u's INBOX holds at least n messages and returns them.
func (s *Server) WaitMessages(ctx context.Context, u User, n int) ([]Message, error) {
	for {
		msgs, err := s.Messages(u)
		if err != nil {
			return nil, err
		}
		if len(msgs) >= n {
			return msgs, nil
		}
		select {
		case <-ctx.Done():
			return msgs, fmt.Errorf("mailbox %s: %d message(s), want %d: %w", u.Address, len(msgs), n, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// MustWait is WaitMessages that fails the test on timeout.
func (s *Server) MustWait(tb testing.TB, u User, n int, limit time.Duration) []Message {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	msgs, err := s.WaitMessages(ctx, u, n)
	if err != nil {
		tb.Fatalf("%v\npostfix log tail:\n%s", err, s.LogTail("postfix/postfix.log", 2000))
	}
	return msgs
}

// WaitQueueEmpty waits until postfix has no mail left in its queue: every
// accepted mail was delivered (or bounced). Stopping dovecot before that
// can cut an LMTP delivery after dovecot saved the mail but before postfix
// heard so, and postfix then delivers it a second time.
func (s *Server) WaitQueueEmpty(ctx context.Context) error {
	for {
		n := 0
		for _, q := range []string{"maildrop", "incoming", "active", "deferred"} {
			_ = filepath.WalkDir(s.path("postfix", "spool", q), func(_ string, d os.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					n++
				}
				return nil
			})
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postfix queue: %d mail(s) left: %w", n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
