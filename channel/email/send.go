package email

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"time"

	gomail "github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"conch"
	"conch/channel/internal/markdown"
	"conch/internal/backoff"
)

// sendTimeout bounds the retries of one Send whose ctx has no deadline.
const sendTimeout = 5 * time.Minute

// sentID is how a reply SMTP accepted is recorded in the SentStore, with
// its conversation (threading finds it again by Message-ID): lower case,
// without angle brackets.
func sentID(messageID string) string {
	return strings.ToLower(strings.Trim(messageID, "<>"))
}

// Send implements conch.Channel. A reply goes out once: its Message-ID is
// derived from the mail it answers, and recorded after SMTP accepted it;
// a second Send of it (the gateway re-delivers after a crash) is skipped.
// Progress is not mailed: email gets one reply at the end of a turn.
func (c *Channel) Send(ctx context.Context, out conch.Outbound) error {
	if out.Kind == conch.OutboundProgress {
		return nil
	}
	to, err := recipientOf(out.Key)
	if err != nil {
		return conch.Errorf(conch.KindInvalid, "%v", err)
	}
	id := c.messageID(out)
	log := c.log.With("conversation", out.Key, "kind", out.Kind, "message_id", id)
	if _, done, err := c.opts.Sent.SentConversation(ctx, conch.ChannelEmail, sentID(id)); err != nil {
		return fmt.Errorf("email send: look up %s: %w", id, err)
	} else if done {
		log.Info("email: reply was sent before (re-delivery after a restart); not sending it again")
		return nil
	}
	raw, err := c.composeReply(ctx, out, to, id)
	if err != nil {
		return fmt.Errorf("email send: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, sendTimeout)
		defer cancel()
	}
	err = c.opts.Backoff.Retry(ctx, func(ctx context.Context, attempt int) error {
		err := c.submit(ctx, to, raw)
		var se *smtp.SMTPError
		if errors.As(err, &se) && se.Code >= 500 {
			return backoff.Permanent(err) // refused: retrying cannot help
		}
		return err
	}, func(attempt int, err error, wait time.Duration) {
		log.Warn("email: SMTP submission failed, retrying", "attempt", attempt, "wait", wait.Round(time.Millisecond), "err", err)
	})
	if err != nil {
		return fmt.Errorf("email send to %s: %w", to, err)
	}
	// Accepted: record it even if ctx ends now, or a re-delivery would
	// send it again.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.opts.Sent.RecordSent(rctx, out.Key, sentID(id)); err != nil {
		log.Error("email: reply sent but not recorded; a re-delivery after a crash would send it again", "err", err)
	}
	log.Info("email: reply sent", "to", to, "bytes", len(raw))
	return nil
}

// SendAttachments implements conch.AttachmentChannel: files go out as
// attachments of the same mail.
func (c *Channel) SendAttachments(ctx context.Context, out conch.Outbound) error {
	return c.Send(ctx, out)
}

// messageID is the reply's Message-ID (without angle brackets): derived
// from the conversation, the mail answered and the kind of message, so the
// same reply always gets the same id. Notices (several can answer one
// mail) include their text. Without a mail to answer it is random.
func (c *Channel) messageID(out conch.Outbound) string {
	if out.InReplyTo == "" {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		return "conch." + hex.EncodeToString(b) + "@" + c.opts.domain()
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", out.Key.ID, out.InReplyTo, out.Kind)
	if out.Kind != conch.OutboundReply {
		fmt.Fprintf(h, "\x00%s", out.Text)
	}
	return "conch." + hex.EncodeToString(h.Sum(nil)[:16]) + "@" + c.opts.domain()
}

var replyPrefixRE = regexp.MustCompile(`(?i)^(re|aw|sv|antw|vs|odp)(\[\d+\])?\s*:`)

// replySubject is "Re: " + subject unless it is a reply already.
func replySubject(s string) string {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return "Re: your mail"
	case replyPrefixRE.MatchString(s):
		return s
	}
	return "Re: " + s
}

// composeReply builds the mail: threaded headers, multipart/alternative with
// the Markdown as text and sanitised HTML, files as attachments.
func (c *Channel) composeReply(ctx context.Context, out conch.Outbound, to, id string) ([]byte, error) {
	var h gomail.Header
	h.SetDate(c.opts.Now())
	h.SetAddressList("From", []*gomail.Address{{Name: c.opts.Name, Address: c.opts.Address}})
	h.SetAddressList("To", []*gomail.Address{{Address: to}})
	h.SetSubject(replySubject(out.Thread.Subject))
	h.SetMessageID(id)
	if strings.Contains(out.InReplyTo, "@") {
		h.SetMsgIDList("In-Reply-To", []string{strings.Trim(out.InReplyTo, "<>")})
	}
	if refs := validIDs(out.Thread.References); len(refs) > 0 {
		h.SetMsgIDList("References", refs)
	}
	// RFC 3834: an automatic reply; well-behaved responders do not answer it.
	h.Set("Auto-Submitted", "auto-replied")
	// Exchange: no out-of-office or other automatic answers to this mail.
	h.Set("X-Auto-Response-Suppress", "All")

	html, err := c.rend.HTML(out.Text)
	if err != nil {
		return nil, err
	}
	text := out.Text
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	var buf bytes.Buffer
	writeAlternative := func(w *gomail.InlineWriter) error {
		for _, part := range []struct{ ctype, body string }{
			{"text/plain", text},
			{"text/html", "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head><body>\n" + html + "\n</body></html>\n"},
		} {
			var ph gomail.InlineHeader
			ph.SetContentType(part.ctype, map[string]string{"charset": "utf-8"})
			ph.Set("Content-Transfer-Encoding", "quoted-printable")
			pw, err := w.CreatePart(ph)
			if err != nil {
				return err
			}
			if _, err := io.WriteString(pw, part.body); err != nil {
				return err
			}
			if err := pw.Close(); err != nil {
				return err
			}
		}
		return w.Close()
	}
	if len(out.Attachments) == 0 {
		w, err := gomail.CreateInlineWriter(&buf, h)
		if err != nil {
			return nil, err
		}
		if err := writeAlternative(w); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	return c.composeWithFiles(ctx, h, out, id, text, html)
}

// validIDs keeps the ids that look like msg-ids (id-left@id-right).
func validIDs(ids []string) []string {
	var out []string
	for _, id := range ids {
		id = strings.Trim(strings.TrimSpace(id), "<>")
		if strings.Contains(id, "@") && !strings.ContainsAny(id, " \t\r\n<>") {
			out = append(out, id)
		}
	}
	return out
}

// submit sends one mail over SMTP.
func (c *Channel) submit(ctx context.Context, to string, raw []byte) error {
	cl, done, err := c.smtpConnect(ctx, len(raw))
	if err != nil {
		return err
	}
	defer done()
	if err := cl.SendMail(c.opts.Address, []string{to}, bytes.NewReader(raw)); err != nil {
		return err
	}
	return cl.Quit()
}

// submitCheck connects and authenticates, and sends nothing (doctor).
func (c *Channel) submitCheck(ctx context.Context) error {
	cl, done, err := c.smtpConnect(ctx, 0)
	if err != nil {
		return err
	}
	defer done()
	return cl.Quit()
}

// smtpConnect opens an SMTP session: connected, greeted, authenticated.
// size is the mail to be sent: slow links get time for big mails.
func (c *Channel) smtpConnect(ctx context.Context, size int) (*smtp.Client, func(), error) {
	o := c.opts
	d := net.Dialer{Timeout: o.CommandTimeout}
	conn, err := d.DialContext(ctx, "tcp", o.SMTPAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	// The timeout plus 100 KiB/s for the mail.
	deadline := time.Now().Add(o.CommandTimeout + time.Duration(size/(100<<10))*time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	fail := func(err error) (*smtp.Client, func(), error) {
		stop()
		conn.Close()
		return nil, nil, err
	}
	var cl *smtp.Client
	switch o.SMTPTLS {
	case TLSImplicit:
		tc := tls.Client(conn, tlsConfig(o.TLSConfig, hostOf(o.SMTPAddr)))
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(fmt.Errorf("TLS: %w", err))
		}
		cl = smtp.NewClient(tc)
	case TLSStartTLS:
		cl, err = smtp.NewClientStartTLS(conn, tlsConfig(o.TLSConfig, hostOf(o.SMTPAddr)))
		if err != nil {
			return fail(fmt.Errorf("STARTTLS: %w", err))
		}
	default:
		cl = smtp.NewClient(conn)
	}
	if err := cl.Hello(o.domain()); err != nil {
		cl.Close()
		return fail(fmt.Errorf("hello: %w", err))
	}
	if o.SMTPUsername != "" {
		if err := cl.Auth(sasl.NewPlainClient("", o.SMTPUsername, o.SMTPPassword)); err != nil {
			cl.Close()
			return fail(fmt.Errorf("auth as %s: %w", o.SMTPUsername, err))
		}
	}
	return cl, func() { stop(); cl.Close() }, nil
}

// renderer turns Markdown into HTML safe to put in a mail
// (channel/internal/markdown's EmailHTML).
type renderer struct {
	html *markdown.HTMLFormat
}

func newRenderer() *renderer { return &renderer{html: markdown.EmailHTML()} }

// HTML renders Markdown and sanitises the result.
func (r *renderer) HTML(md string) (string, error) { return r.html.HTML(md) }
