package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"conch"
)

// rescanWindow is how far back a mailbox whose UIDVALIDITY changed is read
// again (the store recognises mail it has seen by Message-ID).
const rescanWindow = 48 * time.Hour

// session is one IMAP connection with the mailbox selected.
type session struct {
	c *Channel
	h conch.Handler
	// conn is the TCP connection (under TLS, if any): closing it ends
	// everything that waits on the server.
	conn    net.Conn
	cli     *imapclient.Client
	newMail chan struct{}

	validity uint32
	last     imap.UID
	// rescanSince is set after a UIDVALIDITY change: the next pass reads
	// mail since then, not only above last.
	rescanSince time.Time
	// settled is the highest UID that existed at SELECT; after a rescan the
	// cursor moves at least there.
	settled imap.UID
}

// cursorName is the store key of the mailbox position.
func (c *Channel) cursorName() string { return "email:" + c.opts.Mailbox + ":uid" }

// cursor is "UIDVALIDITY:UID:unix seconds of the last move".
type cursor struct {
	validity uint32
	uid      imap.UID
	at       time.Time
}

func parseCursor(s string) (cursor, bool) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return cursor{}, false
	}
	v, err1 := strconv.ParseUint(parts[0], 10, 32)
	u, err2 := strconv.ParseUint(parts[1], 10, 32)
	t, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return cursor{}, false
	}
	return cursor{validity: uint32(v), uid: imap.UID(u), at: time.Unix(t, 0)}, true
}

func (cu cursor) String() string {
	return fmt.Sprintf("%d:%d:%d", cu.validity, cu.uid, cu.at.Unix())
}

// session connects, selects the mailbox and handles mail until an error or
// the end of ctx. connected reports whether the mailbox was selected.
func (c *Channel) session(ctx context.Context, h conch.Handler) (connected bool, err error) {
	s := &session{c: c, h: h, newMail: make(chan struct{}, 1)}
	if err := s.dial(ctx); err != nil {
		return false, err
	}
	// Closing the connection unblocks whatever waits on it.
	stop := context.AfterFunc(ctx, func() { s.conn.Close() })
	defer stop()
	defer s.cli.Close()
	if err := s.open(ctx); err != nil {
		return false, err
	}
	idle := !c.opts.NoIDLE && (s.cli.Caps().Has(imap.CapIdle) || s.cli.Caps().Has(imap.CapIMAP4rev2))
	mode := "polling every " + c.opts.PollInterval.String()
	if idle {
		mode = "IDLE, refreshed every " + c.opts.IdleRefresh.String()
	}
	c.noteUp(mode)
	c.log.Info("email: watching mailbox", "mailbox", c.opts.Mailbox, "server", c.opts.IMAPAddr, "mode", mode, "uidvalidity", s.validity, "last_uid", s.last)
	for {
		if err := s.fetchNew(ctx); err != nil {
			return true, err
		}
		if idle {
			err = s.idle(ctx)
		} else {
			err = s.poll(ctx)
		}
		if ctx.Err() != nil {
			return true, nil
		}
		if err != nil {
			return true, err
		}
	}
}

// guard runs one exchange with the server under the watchdog: if it takes
// longer than CommandTimeout, the connection is closed, which fails it.
func (s *session) guard(what string, fn func() error) error {
	var timedOut atomic.Bool
	t := time.AfterFunc(s.c.opts.CommandTimeout, func() {
		timedOut.Store(true)
		s.conn.Close()
	})
	err := fn()
	if !t.Stop() && timedOut.Load() {
		return fmt.Errorf("%s: no answer from the server within %s (connection closed)", what, s.c.opts.CommandTimeout)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func (s *session) dial(ctx context.Context) error {
	o := s.c.opts
	d := net.Dialer{Timeout: o.CommandTimeout, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", o.IMAPAddr)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	tcfg := tlsConfig(o.TLSConfig, hostOf(o.IMAPAddr))
	opts := &imapclient.Options{
		TLSConfig: tcfg,
		UnilateralDataHandler: &imapclient.UnilateralDataHandler{
			Mailbox: func(data *imapclient.UnilateralDataMailbox) {
				if data.NumMessages != nil {
					select {
					case s.newMail <- struct{}{}:
					default:
					}
				}
			},
		},
	}
	s.conn = conn
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	return s.guard("connect", func() error {
		switch o.IMAPTLS {
		case TLSImplicit:
			tc := tls.Client(conn, tcfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				conn.Close()
				return fmt.Errorf("TLS: %w", err)
			}
			s.cli = imapclient.New(tc, opts)
		case TLSStartTLS:
			cli, err := imapclient.NewStartTLS(conn, opts)
			if err != nil {
				conn.Close()
				return fmt.Errorf("STARTTLS: %w", err)
			}
			s.cli = cli
		default:
			s.cli = imapclient.New(conn, opts)
		}
		if err := s.cli.WaitGreeting(); err != nil {
			s.cli.Close()
			return err
		}
		return nil
	})
}

func tlsConfig(base *tls.Config, host string) *tls.Config {
	var c *tls.Config
	if base != nil {
		c = base.Clone()
	} else {
		c = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.ServerName == "" {
		c.ServerName = host
	}
	return c
}

// open logs in, selects the mailbox and settles the cursor.
func (s *session) open(ctx context.Context) error {
	o := s.c.opts
	err := s.guard("login", func() error { return s.cli.Login(o.IMAPUsername, o.IMAPPassword).Wait() })
	if err != nil {
		var ie *imap.Error
		if errors.As(err, &ie) && (ie.Type == imap.StatusResponseTypeNo || ie.Code == imap.ResponseCodeAuthenticationFailed) {
			return loginError{err}
		}
		return err
	}
	var sel *imap.SelectData
	if err := s.guard("select "+o.Mailbox, func() (err error) {
		sel, err = s.cli.Select(o.Mailbox, nil).Wait()
		return err
	}); err != nil {
		return err
	}
	s.validity = sel.UIDValidity
	if sel.UIDNext > 0 {
		s.settled = sel.UIDNext - 1
	} else if err := s.guard("search", func() error {
		data, err := s.cli.UIDSearch(&imap.SearchCriteria{}, nil).Wait()
		if err == nil {
			if uids := data.AllUIDs(); len(uids) > 0 {
				s.settled = slices.Max(uids)
			}
		}
		return err
	}); err != nil {
		return err
	}
	stored, err := o.Cursors.Cursor(ctx, s.c.cursorName())
	if err != nil {
		return fmt.Errorf("load cursor: %w", err)
	}
	cur, ok := parseCursor(stored)
	switch {
	case !ok:
		// First start: what is in the mailbox already is history, as with
		// the Matrix channel's first sync. Only mail from now on is answered.
		s.last = s.settled
		if err := s.save(ctx); err != nil {
			return err
		}
		s.c.log.Info("email: first start; mail already in the mailbox is left alone", "mailbox", o.Mailbox, "up_to_uid", s.last)
	case cur.validity != s.validity:
		s.c.log.Warn("email: the mailbox's UIDVALIDITY changed (it was recreated or restored); reading mail of the last two days again, known mail is recognised by Message-ID",
			"mailbox", o.Mailbox, "old", cur.validity, "new", s.validity)
		s.last = 0
		s.rescanSince = cur.at.Add(-rescanWindow)
	default:
		s.last = cur.uid
	}
	return nil
}

func (s *session) save(ctx context.Context) error {
	cur := cursor{validity: s.validity, uid: s.last, at: s.c.opts.Now()}
	// The mail was handed over: keep the position even if ctx ends now.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.c.opts.Cursors.SetCursor(sctx, s.c.cursorName(), cur.String()); err != nil {
		return fmt.Errorf("save cursor: %w", err)
	}
	return nil
}

// fetchNew handles every mail above the cursor, oldest first.
func (s *session) fetchNew(ctx context.Context) error {
	crit := &imap.SearchCriteria{UID: []imap.UIDSet{{imap.UIDRange{Start: s.last + 1, Stop: 0}}}}
	if !s.rescanSince.IsZero() {
		crit.Since = s.rescanSince
	}
	var uids []imap.UID
	if err := s.guard("search", func() error {
		data, err := s.cli.UIDSearch(crit, nil).Wait()
		if err == nil {
			uids = data.AllUIDs()
		}
		return err
	}); err != nil {
		return err
	}
	slices.Sort(uids)
	for _, uid := range uids {
		if uid <= s.last { // "n:*" always matches the highest UID
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if err := s.handle(ctx, uid); err != nil {
			return err
		}
		s.last = uid
		if err := s.save(ctx); err != nil {
			return err
		}
		s.c.noteMail()
		// A courtesy for people who look at the mailbox: handled mail is
		// read. The cursor, not this flag, is what counts.
		if err := s.guard("flag seen", func() error {
			return s.cli.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagSeen}}, nil).Close()
		}); err != nil {
			return err
		}
	}
	if !s.rescanSince.IsZero() {
		s.rescanSince = time.Time{}
		if s.settled > s.last {
			s.last = s.settled
			if err := s.save(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// handle reads one mail and hands it to the gateway. It returns an error
// only when the mail must be tried again (the connection or the store
// failed); a mail that cannot be read is logged and skipped.
func (s *session) handle(ctx context.Context, uid imap.UID) error {
	o := s.c.opts
	var meta *imapclient.FetchMessageBuffer
	if err := s.guard("fetch header", func() error {
		msgs, err := s.cli.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{
			UID: true, RFC822Size: true, InternalDate: true,
			BodySection: []*imap.FetchItemBodySection{{Specifier: imap.PartSpecifierHeader, Peek: true}},
		}).Collect()
		if err == nil && len(msgs) > 0 {
			meta = msgs[0]
		}
		return err
	}); err != nil {
		return err
	}
	if meta == nil {
		s.c.log.Info("email: mail vanished before it was read (expunged)", "uid", uid)
		return nil
	}
	var header []byte
	if len(meta.BodySection) > 0 {
		header = meta.BodySection[0].Bytes
	}
	var raw []byte
	if meta.RFC822Size <= o.MaxMessageBytes {
		if err := s.guard("fetch mail", func() error {
			msgs, err := s.cli.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{
				UID:         true,
				BodySection: []*imap.FetchItemBodySection{{Peek: true}},
			}).Collect()
			if err == nil && len(msgs) > 0 && len(msgs[0].BodySection) > 0 {
				raw = msgs[0].BodySection[0].Bytes
			}
			return err
		}); err != nil {
			return err
		}
	}
	in, ok, err := s.c.read(ctx, s.h, mailData{header: header, raw: raw, size: meta.RFC822Size, uid: uint32(uid), validity: s.validity})
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	if err := s.h.HandleInbound(ctx, in); err != nil {
		if conch.KindOf(err) == conch.KindInvalid {
			s.c.log.Warn("email: the gateway refused the mail; skipping it", "uid", uid, "message_id", in.ExternalID, "err", err)
			return nil
		}
		return fmt.Errorf("hand over mail %d: %w", uid, err)
	}
	s.c.log.Info("email: mail handed over", "uid", uid, "conversation", in.Key, "message_id", in.ExternalID, "files", len(in.Attachments))
	return nil
}

// idle waits in IDLE until the server reports new mail or IdleRefresh
// passes, then ends IDLE. Ending it is the watchdog: a connection that
// died without a word does not answer DONE, and guard closes it.
func (s *session) idle(ctx context.Context) error {
	var cmd *imapclient.IdleCommand
	if err := s.guard("idle", func() (err error) {
		cmd, err = s.cli.Idle()
		return err
	}); err != nil {
		return err
	}
	t := time.NewTimer(s.c.opts.IdleRefresh)
	defer t.Stop()
	select {
	case <-s.newMail:
	case <-t.C:
	case <-ctx.Done():
	case <-s.cli.Closed():
	}
	return s.guard("end idle", func() error {
		if err := cmd.Close(); err != nil {
			return err
		}
		return cmd.Wait()
	})
}

// poll waits PollInterval (or new mail the server reported on its own) and
// checks that the connection is alive.
func (s *session) poll(ctx context.Context) error {
	t := time.NewTimer(s.c.opts.PollInterval)
	defer t.Stop()
	select {
	case <-s.newMail:
	case <-t.C:
	case <-ctx.Done():
		return nil
	case <-s.cli.Closed():
		return errors.New("connection closed by the server")
	}
	return s.guard("noop", func() error { return s.cli.Noop().Wait() })
}
