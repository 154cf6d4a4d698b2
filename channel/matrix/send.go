package matrix

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch"
	"conch/channel/internal/markdown"
)

// Typing notifications last typingTimeout unless renewed; the gateway
// renews them every typingRenew while a turn runs.
const (
	typingTimeout = 30 * time.Second
	typingRenew   = 20 * time.Second
)

// maxEditTypes bounds the memory of sent editable messages' types.
const maxEditTypes = 4096

func msgTypeFor(k conch.OutboundKind) event.MessageType {
	if k == conch.OutboundReply {
		return event.MsgText
	}
	return event.MsgNotice
}

// Send implements conch.Channel. A reply is m.text, notices and progress
// are m.notice; long text is split into several messages. In an encrypted
// room the message is encrypted or not sent at all.
func (c *Channel) Send(ctx context.Context, out conch.Outbound) error {
	_, err := c.send(ctx, out, false)
	return err
}

// SendEditable implements conch.EditingChannel: it sends one message (text
// beyond the edit limit is truncated) whose reference Edit accepts.
func (c *Channel) SendEditable(ctx context.Context, out conch.Outbound) (conch.MessageRef, error) {
	ids, err := c.send(ctx, out, true)
	if err != nil {
		return conch.MessageRef{}, err
	}
	c.mu.Lock()
	if len(c.editTypes) >= maxEditTypes {
		clear(c.editTypes)
	}
	c.editTypes[ids[0]] = msgTypeFor(out.Kind)
	c.mu.Unlock()
	return conch.MessageRef{Key: out.Key, ID: ids[0].String()}, nil
}

// Edit implements conch.EditingChannel: it replaces the text of a message
// sent by SendEditable (an m.replace relation).
func (c *Channel) Edit(ctx context.Context, ref conch.MessageRef, text string) error {
	cli, err := c.client(ctx)
	if err != nil {
		return err
	}
	room, err := roomOf(ref.Key)
	if err != nil {
		return err
	}
	if ref.ID == "" || ref.ID[0] != '$' {
		return fmt.Errorf("matrix edit: %q is not an event id", ref.ID)
	}
	if text == "" {
		return errors.New("matrix edit: empty text")
	}
	original := id.EventID(ref.ID)
	c.mu.Lock()
	msgType, ok := c.editTypes[original]
	c.mu.Unlock()
	if !ok {
		msgType = event.MsgNotice
	}
	content, err := c.render.content(markdown.Truncate(text, maxEditBytes), msgType)
	if err != nil {
		return fmt.Errorf("matrix edit: %w", err)
	}
	content.SetEdit(original)
	if _, err := c.sendContent(ctx, cli, room, content, ""); err != nil {
		return fmt.Errorf("matrix edit %s in %s: %w", original, room, err)
	}
	return nil
}

func (c *Channel) send(ctx context.Context, out conch.Outbound, single bool) ([]id.EventID, error) {
	cli, err := c.client(ctx)
	if err != nil {
		return nil, err
	}
	room, err := roomOf(out.Key)
	if err != nil {
		return nil, err
	}
	if out.Text == "" {
		return nil, errors.New("matrix send: empty text")
	}
	msgType := msgTypeFor(out.Kind)
	var contents []*event.MessageEventContent
	if single {
		content, err := c.render.content(markdown.Truncate(out.Text, maxEditBytes), msgType)
		if err != nil {
			return nil, fmt.Errorf("matrix send: %w", err)
		}
		contents = []*event.MessageEventContent{content}
	} else if contents, err = c.render.messages(out.Text, msgType); err != nil {
		return nil, fmt.Errorf("matrix send: %w", err)
	}
	if out.InReplyTo != "" && out.Kind == conch.OutboundReply && out.InReplyTo[0] == '$' {
		contents[0].RelatesTo = (&event.RelatesTo{}).SetReplyTo(id.EventID(out.InReplyTo))
	}
	ids := make([]id.EventID, 0, len(contents))
	for i, content := range contents {
		var evtID id.EventID
		if out.ID == "" {
			evtID, err = c.sendContent(ctx, cli, room, content, "")
		} else {
			evtID, err = c.sendOnce(ctx, cli, room, content, fmt.Sprintf("%s.%d", out.ID, i))
		}
		if err != nil {
			return ids, fmt.Errorf("matrix send to %s (part %d of %d): %w", room, i+1, len(contents), err)
		}
		ids = append(ids, evtID)
	}
	return ids, nil
}

// sendOnce sends one part with a stable transaction id exactly once: it is
// recorded before it is sent and given its event after; a part on record
// with its event is not sent again, and one on record without it is first
// looked for in the room (see sending.go). The content
// carries txn (outboundIDKey) for that search.
func (c *Channel) sendOnce(ctx context.Context, cli *mautrix.Client, room id.RoomID, content *event.MessageEventContent, txn string) (id.EventID, error) {
	if !e2eeAvailable {
		// Nothing can be sent to an encrypted room: fail before recording.
		if enc, err := c.isEncrypted(ctx, room); err != nil {
			return "", err
		} else if enc {
			return "", fmt.Errorf("room is encrypted, message not sent: %w", errNoE2EE)
		}
	}
	at, err := c.sending.begin(ctx, txn, room)
	if err != nil {
		return "", err
	}
	if at.sent != "" {
		c.log.Info("matrix: message was sent before, not sending it again", "room", room, "txn", txn, "event", at.sent)
		return at.sent, nil
	}
	if at.resumed {
		found, err := c.findSent(ctx, cli, room, txn, at)
		if err != nil {
			// Sending blind could make a second event; the caller retries.
			return "", err
		}
		if found != "" {
			c.log.Info("matrix: message found in the room after an unfinished send, not sending it again", "room", room, "txn", txn, "event", found)
			c.sending.done(ctx, txn, found)
			return found, nil
		}
		c.log.Info("matrix: earlier send of a message left no event, sending it again", "room", room, "txn", txn)
	}
	// The homeserver may also answer a repeated transaction id with the
	// event it already has; conch does not rely on it (see sending.go).
	evtID, err := c.sendContent(ctx, cli, room, &event.Content{Parsed: content, Raw: map[string]any{outboundIDKey: txn}}, txn)
	if err != nil {
		return "", err
	}
	c.sending.done(ctx, txn, evtID)
	return evtID, nil
}

// sendContent sends one m.room.message, encrypted when the room is. If the
// room's encryption state is unknown or encryption fails, nothing is sent.
func (c *Channel) sendContent(ctx context.Context, cli *mautrix.Client, room id.RoomID, content any, txn string) (id.EventID, error) {
	enc, err := c.isEncrypted(ctx, room)
	if err != nil {
		return "", err
	}
	noAutoEncrypt := mautrix.ReqSendEvent{DontEncrypt: true, TransactionID: txn}
	if !enc {
		resp, err := cli.SendMessageEvent(ctx, room, event.EventMessage, content, noAutoEncrypt)
		if err != nil {
			return "", err
		}
		return resp.EventID, nil
	}
	encrypted, err := c.crypto.Encrypt(ctx, room, event.EventMessage, content)
	if err != nil {
		return "", fmt.Errorf("room is encrypted, message not sent: %w", err)
	}
	resp, err := cli.SendMessageEvent(ctx, room, event.EventEncrypted, encrypted, noAutoEncrypt)
	if err != nil {
		return "", err
	}
	return resp.EventID, nil
}

// SetTyping implements conch.TypingChannel: one typing notification, which
// lasts typingTimeout (the gateway renews it every typingRenew).
func (c *Channel) SetTyping(ctx context.Context, key conch.ConversationKey, typing bool) error {
	cli, err := c.client(ctx)
	if err != nil {
		return err
	}
	room, err := roomOf(key)
	if err != nil {
		return err
	}
	if _, err := cli.UserTyping(ctx, room, typing, typingTimeout); err != nil {
		return fmt.Errorf("matrix typing in %s: %w", room, err)
	}
	return nil
}

// TypingEvery implements conch.TypingChannel.
func (c *Channel) TypingEvery() time.Duration { return typingRenew }

// Status implements conch.StatusChannel: rooms whose messages could not be
// decrypted, and a failing sync. The zero key reports every room.
func (c *Channel) Status(_ context.Context, key conch.ConversationKey) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lines []string
	describe := func(p *decryptProblem) string {
		return fmt.Sprintf("%d message(s) could not be decrypted (last at %s: %v)", p.count, p.last.UTC().Format(time.RFC3339), p.err)
	}
	if key.IsZero() {
		if c.syncErr != nil {
			lines = append(lines, fmt.Sprintf("matrix: sync failing since %s: %v", c.syncErrAt.UTC().Format(time.RFC3339), c.syncErr))
		}
		if !e2eeAvailable {
			lines = append(lines, "matrix: built with -tags noe2ee, encrypted rooms cannot be served")
		}
		rooms := make([]string, 0, len(c.undecrypted))
		for r := range c.undecrypted {
			rooms = append(rooms, string(r))
		}
		sort.Strings(rooms)
		for _, r := range rooms {
			lines = append(lines, fmt.Sprintf("matrix room %s: %s", r, describe(c.undecrypted[id.RoomID(r)])))
		}
		return lines
	}
	if key.Channel != conch.ChannelMatrix {
		return nil
	}
	if p := c.undecrypted[id.RoomID(key.ID)]; p != nil {
		lines = append(lines, "This room is end-to-end encrypted and "+describe(p)+".")
	}
	if c.syncErr != nil {
		lines = append(lines, fmt.Sprintf("The Matrix homeserver has been failing since %s.", c.syncErrAt.UTC().Format(time.RFC3339)))
	}
	return lines
}
