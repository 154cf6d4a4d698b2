package email

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/textproto"

	"conch"
)

// mailData is one mail as fetched: the header always, the whole mail
// unless it is over MaxMessageBytes.
type mailData struct {
	header   []byte
	raw      []byte // nil when too large
	size     int64
	uid      uint32
	validity uint32
}

// commandRE matches a first line that is one of the gateway's commands;
// the rest of such a mail (a signature, quoted history) is not part of it.
var commandRE = regexp.MustCompile(`^/(stop|reset|status|usage|help)(\s.*)?$`)

// maxReferences bounds the References of a reply: the root and the most
// recent ones (RFC 5322 allows trimming the middle).
const maxReferences = 20

// admitter is the part of conch.Handler read asks: whether the gateway's
// admission (its allowlist, the one rule for every channel) lets a sender in.
type admitter interface {
	Admits(ctx context.Context, ch conch.ChannelName, ids ...conch.UserID) bool
}

// read turns a fetched mail into an Inbound. ok = false means the mail is
// not for the gateway (automatic, not admitted or spoofed sender, over the
// rate limit, unreadable): it is logged and acknowledged. An error means it
// must be tried again.
func (c *Channel) read(ctx context.Context, adm admitter, m mailData) (conch.Inbound, bool, error) {
	log := c.log.With("uid", m.uid)
	var p parsed
	var err error
	tooLarge := m.raw == nil
	if tooLarge {
		var h textproto.Header
		h, err = textproto.ReadHeader(bufio.NewReader(bytes.NewReader(m.header)))
		if err == nil {
			p, err = parseHeader(message.Header{Header: h})
		}
	} else {
		p, err = parseMail(m.raw, c.opts.MaxAttachmentBytes)
	}
	if err != nil {
		log.Warn("email: unreadable mail skipped", "err", err)
		return conch.Inbound{}, false, nil
	}
	log = log.With("from", p.From.Address, "message_id", p.MessageID)
	switch v, why := c.decide(ctx, adm, p); v {
	case accept:
	case dropUnknown:
		log.Debug("email: mail from a sender the gateway does not admit dropped")
		return conch.Inbound{}, false, nil
	case dropSpoofed:
		log.Warn("email: mail claiming an allowed sender dropped: not authenticated", "reason", why)
		return conch.Inbound{}, false, nil
	case dropRate:
		log.Warn("email: sender over the hourly limit; mail not answered", "limit", c.opts.MaxPerHour)
		return conch.Inbound{}, false, nil
	default:
		log.Info("email: automatic mail not answered", "reason", why)
		return conch.Inbound{}, false, nil
	}
	key, err := c.conversation(ctx, p)
	if err != nil {
		return conch.Inbound{}, false, err
	}
	in := conch.Inbound{
		Key:        key,
		Sender:     conch.UserID(p.From.Address),
		SenderName: p.From.Name,
		ExternalID: p.MessageID,
		Thread:     conch.Thread{Subject: p.Subject, References: replyReferences(p)},
		ReceivedAt: c.opts.Now(),
	}
	if in.ExternalID == "" {
		// Without a Message-ID, the header's hash is stable across
		// redeliveries of the same mail.
		sum := sha256.Sum256(m.header)
		in.ExternalID = "sha256-" + hex.EncodeToString(sum[:12]) + "@" + c.opts.domain()
	}
	if tooLarge {
		in.Text = fmt.Sprintf("[This mail is %s, over conch's limit of %s for one mail, so its text and files were not read. Subject: %q. Tell the sender, and suggest sending the files another way.]",
			humanBytes(m.size), humanBytes(c.opts.MaxMessageBytes), p.Subject)
		return in, true, nil
	}
	in.Text, in.Attachments = c.compose(p)
	return in, true, nil
}

// decide applies loop protection, the gateway's admission, sender
// authentication (is the From domain's DMARC pass there) and the rate
// limit, in that order: a forged From is dropped before it is stored.
func (c *Channel) decide(ctx context.Context, adm admitter, p parsed) (verdict, string) {
	if why := automatic(p.Header, p.From.Address, c.opts.Address); why != "" {
		return dropLoop, why
	}
	if !adm.Admits(ctx, conch.ChannelEmail, conch.UserID(p.From.Address)) {
		return dropUnknown, ""
	}
	if c.opts.TrustedAuthservID != "" {
		if why := authenticated(p.Header, c.opts.TrustedAuthservID, domainOf(p.From.Address)); why != "" {
			return dropSpoofed, why
		}
	}
	if !c.rate.allow(p.From.Address, c.opts.Now()) {
		return dropRate, ""
	}
	return accept, ""
}

// isApprovalReply reports whether a (trimmed) body is only an answer to
// an approval question: one short line whose first word is a choice
// ("yes", "always", "no"), maybe followed by the question's id.
func isApprovalReply(body string) bool {
	b := strings.TrimSpace(body)
	if b == "" || len(b) > 40 || strings.Contains(b, "\n") {
		return false
	}
	words := strings.Fields(b)
	if len(words) > 2 {
		_, ok := conch.ParseApprovalChoice(strings.Join(words, " "))
		return ok
	}
	_, ok := conch.ParseApprovalChoice(words[0])
	return ok
}

// compose builds what the model reads: the new text of the mail (quoted
// history and signature trimmed), the subject when it starts a thread, and
// notes on what was left out. The full text is kept as message.txt with the
// files when trimming removed anything, and an HTML body as message.html.
func (c *Channel) compose(p parsed) (string, []conch.Attachment) {
	var files []conch.Attachment
	for _, f := range p.Files {
		files = append(files, f.attachment())
	}
	body := trimReply(p.Text)
	if first, _, _ := strings.Cut(body, "\n"); commandRE.MatchString(strings.TrimSpace(first)) {
		return strings.TrimSpace(first), nil
	}
	if isApprovalReply(body) {
		// A reply to a question ("yes" above the quoted question) is the
		// answer alone, for the gateway to take.
		return strings.TrimSpace(body), nil
	}
	var b strings.Builder
	startsThread := len(p.References) == 0 && len(p.InReplyTo) == 0
	if p.Subject != "" && (startsThread || body == "") {
		b.WriteString("Subject: " + p.Subject + "\n\n")
	}
	b.WriteString(body)
	var notes []string
	if body != strings.TrimSpace(p.Text) {
		files = append(files, file{Name: "message.txt", MediaType: "text/plain; charset=utf-8", Data: []byte(p.Text + "\n")}.attachment())
		notes = append(notes, "quoted history and signature were trimmed; the whole mail is in message.txt")
	}
	if p.HTML != "" {
		files = append(files, file{Name: "message.html", MediaType: "text/html; charset=utf-8", Data: []byte(p.HTML)}.attachment())
	}
	notes = append(notes, p.Notes...)
	if len(notes) > 0 {
		b.WriteString("\n\n[" + strings.Join(notes, "; ") + "]")
	}
	text := strings.TrimSpace(b.String())
	if text == "" && len(files) > 0 {
		text = "[A mail with files and no text.]"
	}
	return text, files
}

// replyReferences is what a reply's References header holds: the mail's
// own References (or In-Reply-To) and its Message-ID, trimmed in the middle.
func replyReferences(p parsed) []string {
	refs := append([]string(nil), p.References...)
	if len(refs) == 0 && len(p.InReplyTo) > 0 {
		refs = append(refs, p.InReplyTo[0])
	}
	if p.MessageID != "" {
		refs = append(refs, p.MessageID)
	}
	if len(refs) > maxReferences {
		refs = append(refs[:1], refs[len(refs)-maxReferences+1:]...)
	}
	return refs
}

// conversation finds the mail's conversation: its sender in sender mode;
// in thread mode the conversation of a reply of ours it answers, else the
// root of its thread (the first of References, else In-Reply-To, else the
// mail itself).
func (c *Channel) conversation(ctx context.Context, p parsed) (conch.ConversationKey, error) {
	sender := p.From.Address
	if c.opts.Session == SessionSender {
		return senderKey(sender), nil
	}
	for _, id := range append(append([]string(nil), p.InReplyTo...), p.References...) {
		if !strings.HasSuffix(strings.ToLower(id), "@"+c.opts.domain()) {
			continue
		}
		key, ok, err := c.opts.Sent.SentConversation(ctx, conch.ChannelEmail, sentID(id))
		if err != nil {
			return conch.ConversationKey{}, fmt.Errorf("look up reply %s: %w", id, err)
		}
		if !ok {
			continue
		}
		if to, err := recipientOf(key); err == nil && to == sender {
			return key, nil
		}
	}
	root := p.MessageID
	switch {
	case len(p.References) > 0:
		root = p.References[0]
	case len(p.InReplyTo) > 0:
		root = p.InReplyTo[0]
	}
	if root == "" {
		return senderKey(sender), nil
	}
	return threadKey(sender, root), nil
}
