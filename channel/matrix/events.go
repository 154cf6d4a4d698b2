package matrix

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch"
)

// onParseError logs events whose content does not parse (malformed JSON
// for a known type) and drops them; unknown types pass through.
func (c *Channel) onParseError(evt *event.Event, err error) bool {
	if errors.Is(err, event.ErrUnsupportedContentType) || errors.Is(err, event.ErrContentAlreadyParsed) {
		return true
	}
	c.log.Warn("matrix event ignored: malformed content", "room", evt.RoomID, "event", evt.ID, "type", evt.Type.Type, "sender", evt.Sender, "err", err)
	return false
}

func prevMembership(evt *event.Event) event.Membership {
	if evt.Unsigned.PrevContent == nil {
		return ""
	}
	_ = evt.Unsigned.PrevContent.ParseRaw(evt.Type)
	if m, ok := evt.Unsigned.PrevContent.Parsed.(*event.MemberEventContent); ok {
		return m.Membership
	}
	return ""
}

// onMember handles invites, the bot's removal and other members leaving.
func (c *Channel) onMember(ctx context.Context, evt *event.Event) {
	r := c.round
	if r == nil || evt.StateKey == nil {
		return
	}
	room := evt.RoomID
	c.forgetMembers(room)
	content := evt.Content.AsMember()
	me := c.cli.UserID
	src := evt.Mautrix.EventSource
	target := id.UserID(*evt.StateKey)

	if target == me {
		switch content.Membership {
		case event.MembershipInvite:
			if src&event.SourceInvite != 0 {
				c.onInvite(ctx, r, evt)
			}
		case event.MembershipLeave, event.MembershipBan:
			if r.historical || evt.Sender == me || src&event.SourceLeave == 0 {
				return
			}
			if prevMembership(evt) == event.MembershipInvite {
				c.log.Debug("matrix invite withdrawn", "room", room, "by", evt.Sender)
				return
			}
			reason := "kicked"
			if content.Membership == event.MembershipBan {
				reason = "banned"
			}
			c.closeConversation(ctx, r, room, reason+" by "+string(evt.Sender))
		}
		return
	}

	// Someone else: a live change in a joined room.
	if r.historical || src&event.SourceJoin == 0 || src&event.SourceTimeline == 0 {
		return
	}
	if content.Membership != event.MembershipLeave && content.Membership != event.MembershipBan {
		return
	}
	if prev := prevMembership(evt); prev != event.MembershipJoin && prev != "" {
		return
	}
	others, err := c.otherMembers(ctx, room)
	if err != nil {
		c.log.Warn("matrix: cannot count room members after a leave", "room", room, "err", err)
		return
	}
	if others > 0 {
		return
	}
	c.closeConversation(ctx, r, room, "the last member left")
	if _, err := c.cli.LeaveRoom(ctx, room); err != nil {
		c.log.Warn("matrix: leave room", "room", room, "err", err)
	}
}

// onInvite joins a room an allowed user invited the bot to, and greets
// unless the invite is being caught up after a restart.
func (c *Channel) onInvite(ctx context.Context, r *syncRound, evt *event.Event) {
	room := evt.RoomID
	if r.joined[room] {
		return
	}
	if !c.allowed(ctx, evt.Sender) {
		c.log.Debug("matrix invite ignored: sender not allowed", "room", room, "sender", evt.Sender)
		return
	}
	r.joined[room] = true
	if _, err := c.cli.JoinRoomByID(ctx, room); err != nil {
		// The invite stays pending on the server; the next start catches it up.
		c.log.Warn("matrix: join room", "room", room, "inviter", evt.Sender, "err", err)
		return
	}
	c.log.Info("matrix joined room", "room", room, "inviter", evt.Sender, "catch_up", r.catchUp)
	if r.catchUp {
		return
	}
	if err := c.Send(ctx, conch.Outbound{Key: keyOf(room), Kind: conch.OutboundNotice, Text: c.opts.Greeting}); err != nil {
		c.log.Warn("matrix: greeting", "room", room, "err", err)
	}
}

// closeConversation tells the gateway a room's conversation ended.
func (c *Channel) closeConversation(ctx context.Context, r *syncRound, room id.RoomID, reason string) {
	if r.closed[room] {
		return
	}
	r.closed[room] = true
	c.mu.Lock()
	delete(c.others, room)
	delete(c.encrypted, room)
	delete(c.undecrypted, room)
	c.mu.Unlock()
	c.log.Info("matrix conversation closed", "room", room, "reason", reason)
	if err := c.handler.ConversationClosed(ctx, keyOf(room)); err != nil {
		c.log.Error("matrix: conversation closed handler failed", "room", room, "err", err)
	}
}

// onEncryption records that a room turned encryption on.
func (c *Channel) onEncryption(_ context.Context, evt *event.Event) {
	c.mu.Lock()
	c.encrypted[evt.RoomID] = true
	c.mu.Unlock()
}

// onMessage handles a plaintext (or, via onDecrypted, decrypted) message
// inside the sync loop.
func (c *Channel) onMessage(ctx context.Context, evt *event.Event) {
	r := c.round
	if r == nil || !c.live(r, evt) {
		return
	}
	if err := c.deliver(ctx, evt); err != nil {
		r.fail(err)
	}
}

// live reports whether a timeline event is a new event of a joined room.
func (c *Channel) live(r *syncRound, evt *event.Event) bool {
	src := evt.Mautrix.EventSource
	return !r.historical && src&event.SourceJoin != 0 && src&event.SourceTimeline != 0 && evt.Sender != c.cli.UserID
}

// wantEncrypted filters encrypted events before decryption: only live
// events from allowed senders are decrypted (or wait for their keys).
func (c *Channel) wantEncrypted(evt *event.Event) bool {
	r := c.round
	if r == nil || !c.live(r, evt) {
		return false
	}
	if !c.allowed(context.Background(), evt.Sender) {
		c.log.Debug("matrix encrypted message dropped: sender not allowed", "room", evt.RoomID, "sender", evt.Sender)
		return false
	}
	return true
}

// onDecrypted receives decrypted events: in the sync loop, or later when the
// room key arrived after a wait. A late event's error keeps it pending.
func (c *Channel) onDecrypted(ctx context.Context, evt *event.Event, late bool) error {
	c.mu.Lock()
	delete(c.undecrypted, evt.RoomID)
	c.mu.Unlock()
	if evt.Type == event.EventReaction && !late {
		c.onReaction(ctx, evt)
		return nil
	}
	if evt.Type != event.EventMessage {
		return nil
	}
	if !late {
		c.onMessage(ctx, evt)
		return nil
	}
	if err := c.deliver(ctx, evt); err != nil {
		c.log.Error("matrix: deliver late-decrypted message", "room", evt.RoomID, "event", evt.ID, "err", err)
		return err
	}
	return nil
}

// failRound makes the sync round in progress fail (from the sync loop only).
func (c *Channel) failRound(err error) {
	if r := c.round; r != nil {
		r.fail(err)
		return
	}
	c.log.Error("matrix: error outside a sync round", "err", err)
}

// onUndecryptable records a message that cannot be decrypted, for Status.
func (c *Channel) onUndecryptable(evt *event.Event, err error) {
	c.mu.Lock()
	p := c.undecrypted[evt.RoomID]
	if p == nil {
		p = &decryptProblem{}
		c.undecrypted[evt.RoomID] = p
	}
	p.count++
	p.last, p.err = time.Now(), err
	c.mu.Unlock()
	c.log.Warn("matrix message cannot be decrypted", "room", evt.RoomID, "event", evt.ID, "sender", evt.Sender, "err", err)
}

// deliver applies the sender, size and room policies and hands the message
// to the gateway. An error means it was not handed over and must be retried.
func (c *Channel) deliver(ctx context.Context, evt *event.Event) error {
	room, sender := evt.RoomID, evt.Sender
	content, ok := evt.Content.Parsed.(*event.MessageEventContent)
	if !ok {
		c.log.Warn("matrix message ignored: malformed content", "room", room, "event", evt.ID, "sender", sender)
		return nil
	}
	if !c.allowed(ctx, sender) {
		c.log.Debug("matrix message dropped: sender not allowed", "room", room, "sender", sender)
		return nil
	}
	if rel := content.RelatesTo; rel != nil && rel.Type == event.RelReplace {
		c.log.Debug("matrix edit ignored", "room", room, "event", evt.ID)
		return nil
	}
	var atts []conch.Attachment
	switch content.MsgType {
	case event.MsgText, event.MsgEmote:
	case event.MsgImage, event.MsgAudio, event.MsgFile, event.MsgVideo:
		att, note := c.mediaAttachment(content)
		if note != "" {
			c.log.Warn("matrix file not received", "room", room, "event", evt.ID, "why", note)
		}
		caption := content.GetCaption()
		content.Body = mediaText(content.MsgType, content.GetFileName(), caption, note)
		if att != nil {
			atts = append(atts, *att)
		}
	default:
		c.log.Debug("matrix message ignored: unsupported type", "room", room, "event", evt.ID, "msgtype", content.MsgType)
		return nil
	}
	content.RemoveReplyFallback()
	text := strings.TrimSpace(content.Body)
	if text == "" {
		c.log.Warn("matrix message ignored: empty body", "room", room, "event", evt.ID, "sender", sender)
		return nil
	}
	if len(text) > c.opts.MaxInboundBytes {
		c.log.Warn("matrix message ignored: too long", "room", room, "event", evt.ID, "sender", sender, "bytes", len(text), "max", c.opts.MaxInboundBytes)
		return nil
	}
	others, err := c.otherMembers(ctx, room)
	if err != nil {
		return fmt.Errorf("count members of %s: %w", room, err)
	}
	if others > 1 {
		if c.opts.GroupPolicy == GroupDeny {
			c.log.Debug("matrix message dropped: group rooms are denied", "room", room, "members", others+1)
			return nil
		}
		if c.opts.MentionOnly {
			stripped, mentioned := c.mention(content, text)
			if !mentioned {
				c.log.Debug("matrix message dropped: bot not mentioned in group room", "room", room, "event", evt.ID)
				return nil
			}
			text = stripped
		}
	}
	if content.MsgType == event.MsgEmote {
		text = "/me " + text
	}
	in := conch.Inbound{
		Key:         keyOf(room),
		Sender:      conch.UserID(sender),
		SenderName:  c.displayName(ctx, room, sender),
		Text:        text,
		ExternalID:  evt.ID.String(),
		ReceivedAt:  time.UnixMilli(evt.Timestamp),
		Attachments: atts,
	}
	if err := c.handler.HandleInbound(ctx, in); err != nil {
		return fmt.Errorf("handle message %s: %w", evt.ID, err)
	}
	return nil
}

// allowed asks the gateway's admission whether u may talk to conch: the one
// allowlist rule for every channel.
func (c *Channel) allowed(ctx context.Context, u id.UserID) bool {
	return c.handler != nil && c.handler.Admits(ctx, conch.ChannelMatrix, conch.UserID(u))
}

// otherMembers counts the joined members other than the bot, asking the
// homeserver once per room and membership change.
func (c *Channel) otherMembers(ctx context.Context, room id.RoomID) (int, error) {
	c.mu.Lock()
	n, ok := c.others[room]
	c.mu.Unlock()
	if ok {
		return n, nil
	}
	resp, err := c.cli.JoinedMembers(ctx, room)
	if err != nil {
		return 0, err
	}
	n = 0
	for u := range resp.Joined {
		if u != c.cli.UserID {
			n++
		}
	}
	c.mu.Lock()
	c.others[room] = n
	c.mu.Unlock()
	return n, nil
}

func (c *Channel) forgetMembers(room id.RoomID) {
	c.mu.Lock()
	delete(c.others, room)
	c.mu.Unlock()
}

func (c *Channel) displayName(ctx context.Context, room id.RoomID, u id.UserID) string {
	m, err := c.cli.StateStore.TryGetMember(ctx, room, u)
	if err != nil || m == nil {
		return ""
	}
	return m.Displayname
}

// mention reports whether a group message addresses the bot (intentional
// mention, a matrix.to pill, or its name or id at the start) and returns the
// text without a leading address.
func (c *Channel) mention(content *event.MessageEventContent, text string) (string, bool) {
	me := c.cli.UserID
	mentioned := content.Mentions != nil && slices.Contains(content.Mentions.UserIDs, me)
	if strings.Contains(content.FormattedBody, "https://matrix.to/#/"+string(me)) ||
		strings.Contains(content.FormattedBody, "https://matrix.to/#/"+url.PathEscape(string(me))) {
		mentioned = true
	}
	names := []string{string(me), "@" + me.Localpart(), me.Localpart()}
	if c.botName != "" {
		names = append([]string{c.botName}, names...)
	}
	for _, n := range names {
		// Compared in place: lowercasing can change a text's length in
		// bytes ("Ⱦ" is 2, "ⱦ" 3), so an index into a lowercased copy
		// could cut the text past its end.
		if len(text) < len(n) || !strings.EqualFold(text[:len(n)], n) {
			continue
		}
		rest := text[len(n):]
		if rest != "" && !strings.ContainsRune(":, \t\n", rune(rest[0])) {
			continue // "conchy" is not "conch"
		}
		return strings.TrimLeftFunc(strings.TrimLeft(rest, ":,"), unicode.IsSpace), true
	}
	if !mentioned {
		mentioned = strings.Contains(strings.ToLower(text), strings.ToLower(string(me)))
	}
	return text, mentioned
}

// isEncrypted tells whether a room is encrypted: from the state store, or
// by asking the homeserver. When in doubt it returns an error, so nothing
// is ever sent in plaintext to a room that may be encrypted.
func (c *Channel) isEncrypted(ctx context.Context, room id.RoomID) (bool, error) {
	if enc, err := c.cli.StateStore.IsEncrypted(ctx, room); err == nil && enc {
		return true, nil
	}
	c.mu.Lock()
	enc, known := c.encrypted[room]
	c.mu.Unlock()
	if known {
		return enc, nil
	}
	var content event.EncryptionEventContent
	err := c.cli.StateEvent(ctx, room, event.StateEncryption, "", &content)
	switch {
	case err == nil:
		enc = content.Algorithm != ""
	case errors.Is(err, mautrix.MNotFound):
		enc = false
	default:
		return false, fmt.Errorf("check whether %s is encrypted: %w", room, err)
	}
	c.mu.Lock()
	if !c.encrypted[room] { // a concurrent m.room.encryption event wins
		c.encrypted[room] = enc
	}
	enc = c.encrypted[room]
	c.mu.Unlock()
	return enc, nil
}
