package gateway

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"

	"conch"
)

// Admission decides what an inbound message from a channel is: dropped (a
// sender who may not talk to conch), a command, or a message. It is the one
// place where allowlists are checked, with one rule for case. Submission
// (Submit) then makes a message durable and queues it; schedules and watches
// submit directly, without admission.

// Admits implements conch.Handler: any one of ids on the channel's allowlist
// or approved by pairing is enough; on a channel whose policy is open or
// pairing everyone may reach admission (an unknown sender then gets a
// pairing code, nothing more). A channel without an allowlist or policy
// admits nobody.
func (g *Gateway) Admits(ctx context.Context, ch conch.ChannelName, ids ...conch.UserID) bool {
	switch g.opts.Policies[ch] {
	case PolicyOpen, PolicyPairing:
		return true
	}
	return g.admitted(ctx, ch, ids...)
}

// admitted is the strict rule: the allowlist, a pairing approval, or an
// open channel.
func (g *Gateway) admitted(ctx context.Context, ch conch.ChannelName, ids ...conch.UserID) bool {
	if g.opts.Policies[ch] == PolicyOpen {
		return true
	}
	if al, ok := g.opts.Allow[ch]; ok {
		for _, id := range ids {
			if id != "" && al.Allows(id) {
				return true
			}
		}
	}
	if g.opts.Policies[ch] != PolicyPairing {
		return false
	}
	ok, err := g.pairings().Approved(ctx, ch, ids...)
	if err != nil {
		g.log.Warn("read pairings", "channel", ch, "err", err)
	}
	return ok
}

func (g *Gateway) pairings() Pairings { return Pairings{Store: g.opts.Store, Now: g.opts.Now} }

// HandleInbound implements conch.Handler: admission, commands, then
// submission. It returns once the message is durable.
func (g *Gateway) HandleInbound(ctx context.Context, in conch.Inbound) error {
	if in.Key.IsZero() || in.Key.ID == "" {
		return conch.Errorf(conch.KindInvalid, "message without a conversation")
	}
	if !in.Origin.IsPerson() {
		return conch.Errorf(conch.KindInvalid, "a channel delivered a message of origin %q; only people write on channels", in.Origin.Kind)
	}
	if !g.admitted(ctx, in.Key.Channel, append([]conch.UserID{in.Sender}, in.SenderAliases...)...) {
		if g.opts.Policies[in.Key.Channel] == PolicyPairing {
			return g.pair(ctx, in)
		}
		// Unknown senders get nothing at all.
		g.log.Debug("dropped message from sender not on the allowlist", "channel", in.Key.Channel, "sender", in.Sender)
		return nil
	}
	if in.ReceivedAt.IsZero() {
		in.ReceivedAt = g.opts.Now()
	}
	if g.replyAnswer(ctx, in) {
		return nil
	}
	if cmd, ok := parseCommand(in.Text); ok {
		if g.seenCommand(ctx, in) {
			g.log.Info("ignored redelivered command", "conversation", in.Key, "external_id", in.ExternalID)
			return nil
		}
		return g.command(ctx, in, cmd)
	}
	if strings.TrimSpace(in.Text) == "" && len(in.Attachments) == 0 {
		g.log.Info("ignored empty message", "conversation", in.Key, "sender", in.Sender)
		return nil
	}
	_, err := g.Submit(ctx, in)
	return err
}

// pair answers an unknown sender on a pairing channel with a code (at most
// once an hour); nothing of the message is kept or reaches the model.
func (g *Gateway) pair(ctx context.Context, in conch.Inbound) error {
	code, send, err := g.pairings().Request(ctx, in)
	if err != nil {
		return fmt.Errorf("pairing: %w", err)
	}
	g.log.Info("pairing requested", "channel", in.Key.Channel, "sender", in.Sender, "name", in.SenderName, "code", code, "told", send)
	if !send {
		return nil
	}
	ch, ok := g.channels[in.Key.Channel]
	if !ok {
		return nil
	}
	if err := ch.Send(ctx, conch.Outbound{Key: in.Key, Kind: conch.OutboundNotice, Text: pairingText(code), InReplyTo: in.ExternalID, Thread: in.Thread}); err != nil {
		g.log.Warn("pairing code not delivered", "channel", in.Key.Channel, "sender", in.Sender, "err", err)
	}
	return nil
}

// Submit implements conch.Submitter: the message (and its files) is stored
// durably and queued behind the conversation's other turns. A redelivered
// message (same channel and ExternalID) returns its existing turn.
func (g *Gateway) Submit(ctx context.Context, in conch.Inbound) (conch.Turn, error) {
	if in.Key.IsZero() || in.Key.ID == "" {
		return conch.Turn{}, conch.Errorf(conch.KindInvalid, "message without a conversation")
	}
	if in.Sender == "" {
		in.Sender = conch.UserID("conch:" + string(in.Origin.Kind))
	}
	if in.ReceivedAt.IsZero() {
		in.ReceivedAt = g.opts.Now()
	}
	in, refused := g.spool(ctx, in)
	turn, pos, err := g.store(ctx, in)
	if err != nil || pos == alreadyQueued {
		return turn, err
	}
	for _, why := range refused {
		g.send(ctx, turn.ID, conch.Outbound{Key: in.Key, Kind: conch.OutboundNotice, Text: why, InReplyTo: in.ExternalID, Thread: in.Thread})
	}
	if pos > 0 {
		g.send(ctx, turn.ID, conch.Outbound{Key: in.Key, Kind: conch.OutboundNotice, Text: fmt.Sprintf("queued (position %d)", pos), InReplyTo: in.ExternalID, Thread: in.Thread})
	}
	return turn, nil
}

// store stores the message, which numbers its turn, and queues the turn,
// both under its conversation's submission lock: however many senders write
// at once, a conversation's queue holds its turns in turn-id (arrival)
// order, the order in which the model sees them. A redelivered message
// returns its existing turn and alreadyQueued. It returns once the message
// is durable; with a StagedStore the turn is queued (and may start) while
// the disk syncs, and sendKept holds its answer until then.
func (g *Gateway) store(ctx context.Context, in conch.Inbound) (conch.Turn, int, error) {
	turn, pos, durable, gated, err := g.storeOrdered(ctx, in)
	if err == nil && durable != nil {
		err = durable(ctx)
	}
	if gated {
		g.submits.done(turn.ID, err)
	}
	if err != nil {
		return conch.Turn{}, 0, fmt.Errorf("store inbound: %w", err)
	}
	return turn, pos, nil
}

// storeOrdered is store's part under the submission lock; durable, when
// not nil, waits for the message to reach the disk. gated: it opened the
// turn's submit gate, which store closes (a redelivery leaves the gate to
// the submission that stored the message).
func (g *Gateway) storeOrdered(ctx context.Context, in conch.Inbound) (turn conch.Turn, pos int, durable func(context.Context) error, gated bool, err error) {
	unlock := g.order.lock(in.Key)
	defer unlock()
	var dup, started bool
	if st, ok := g.opts.Store.(StagedStore); ok {
		start := g.mayStartNow(in.Key)
		turn, dup, durable, err = st.StageInbound(ctx, in, start)
		started = start && err == nil && !dup
	} else {
		turn, dup, err = g.opts.Store.AddInbound(ctx, in)
	}
	if err != nil {
		return conch.Turn{}, 0, nil, false, err
	}
	if dup {
		g.log.Info("ignored redelivered message", "conversation", in.Key, "external_id", in.ExternalID, "turn", turn.ID)
		return turn, alreadyQueued, durable, false, nil
	}
	g.submits.open(turn.ID)
	g.hub.Publish(ctx, in.Key, turn.ID, conch.MessageEvent{
		Role: conch.RoleUser, Text: in.Text, Sender: in.Sender, Origin: in.Origin.Kind, Attachments: turn.Inbound.Attachments,
	})
	pos, err = g.enqueue(ctx, turn, true, started)
	return turn, pos, durable, true, err
}

// mayStartNow reports whether a message of key may be stored with its turn
// started (StagedStore): the gateway runs, has resumed what it found, and
// the conversation has no turn waiting or running but one whose answer is
// out (only its end is being recorded). The caller holds key's order lock,
// so no other message of the conversation is stored meanwhile.
func (g *Gateway) mayStartNow(key conch.ConversationKey) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ctx == nil || g.resuming {
		return false
	}
	c := g.convs[key]
	return c == nil || (len(c.queue) == 0 && c.holding == 0 && c.started == 0 && (c.cur == nil || c.cur.answered))
}

// orderLocks serialise storing and queueing within a conversation. They are
// striped (a fixed set of mutexes picked by the key's hash), so nothing grows
// with the number of conversations; two conversations sharing a stripe only
// take turns at storing a message.
type orderLocks [64]sync.Mutex

func (o *orderLocks) lock(key conch.ConversationKey) (unlock func()) {
	h := fnv.New32a()
	h.Write([]byte(key.Channel))
	h.Write([]byte{0})
	h.Write([]byte(key.ID))
	m := &o[h.Sum32()%uint32(len(o))]
	m.Lock()
	return m.Unlock
}

// inboxDir is where received files land in a workspace.
const inboxDir = "/workspace/inbox/"

// spool stores the message's files durably and decides where each lands in
// the workspace. Files that cannot be kept are left out; refused says why,
// in words for the sender.
func (g *Gateway) spool(ctx context.Context, in conch.Inbound) (_ conch.Inbound, refused []string) {
	if len(in.Attachments) == 0 {
		return in, nil
	}
	kept := make([]conch.Attachment, 0, len(in.Attachments))
	for i, a := range in.Attachments {
		name := conch.SafeName(a.Name, fmt.Sprintf("file-%d", i+1))
		switch {
		case a.Ref != "":
			// Already stored (a redelivery of a spooled message).
		case g.opts.Attachments == nil:
			refused = append(refused, fmt.Sprintf("I cannot receive files here, so “%s” was not received.", name))
			continue
		case a.Open == nil:
			refused = append(refused, fmt.Sprintf("“%s” arrived without its content, so it was not received.", name))
			continue
		default:
			ref, size, err := g.opts.Attachments.Put(ctx, in.Key, a, g.opts.MaxAttachmentBytes)
			if err != nil {
				g.log.Warn("attachment not kept", "conversation", in.Key, "name", name, "err", err)
				if conch.KindOf(err) == conch.KindInvalid {
					refused = append(refused, fmt.Sprintf("“%s” is larger than %d MiB, so it was not received.", name, g.opts.MaxAttachmentBytes>>20))
				} else {
					refused = append(refused, fmt.Sprintf("“%s” could not be received (%s).", name, conch.UserMessage(err)))
				}
				continue
			}
			a.Ref, a.Size = ref, size
		}
		a.Name = name
		a.Open = nil
		if g.opts.Runtime != nil {
			a.Path = inboxDir + shortRef(a.Ref) + "-" + name
		}
		kept = append(kept, a)
	}
	in.Attachments = kept
	return in, refused
}

// shortRef is a short, file-name-safe part of a spool reference.
func shortRef(ref string) string {
	r := []rune(ref)
	out := make([]rune, 0, 8)
	for i := len(r) - 1; i >= 0 && len(out) < 8; i-- {
		if c := r[i]; c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			out = append([]rune{c}, out...)
		}
	}
	return string(out)
}

// ConversationClosed implements conch.Handler: the worker is stopped, queued
// turns are dropped and everything held for the conversation released.
func (g *Gateway) ConversationClosed(ctx context.Context, key conch.ConversationKey) error {
	// Under the conversation's submission lock, as reset.
	unlock := g.order.lock(key)
	g.mu.Lock()
	c := g.convs[key]
	delete(g.convs, key)
	g.mu.Unlock()
	if c != nil {
		c.close(errClosed)
	}
	err := g.opts.Store.ResetConversation(ctx, key)
	unlock()
	if err != nil {
		return fmt.Errorf("close %s: %w", key, err)
	}
	g.forgetApprovals(ctx, key)
	err = g.release(ctx, key)
	g.hub.Forget(key)
	if err != nil {
		return fmt.Errorf("close %s: %w", key, err)
	}
	g.log.Info("conversation closed", "conversation", key)
	return nil
}

// release frees everything held for a conversation: its sandbox (with its
// workspace), whatever the releasers hold, its spooled files.
func (g *Gateway) release(ctx context.Context, key conch.ConversationKey) error {
	var errs []error
	for _, r := range g.opts.Releasers {
		if err := r.Release(ctx, key); err != nil {
			errs = append(errs, err)
		}
	}
	if g.opts.Runtime != nil {
		if err := g.opts.Runtime.Remove(ctx, key); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox: %w", err))
		}
	}
	if g.opts.Attachments != nil {
		if err := g.opts.Attachments.Delete(ctx, key); err != nil {
			errs = append(errs, fmt.Errorf("delete received files: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Stop implements conch.ConversationControl.
func (g *Gateway) Stop(ctx context.Context, key conch.ConversationKey) (bool, error) {
	return g.conv(key).cancelCurrent(ctx, errStopped), nil
}

// Reset implements conch.ConversationControl.
func (g *Gateway) Reset(ctx context.Context, key conch.ConversationKey) error {
	_, err := g.reset(ctx, key)
	return err
}

// Status implements conch.ConversationControl.
func (g *Gateway) Status(ctx context.Context, key conch.ConversationKey) string {
	return g.status(ctx, key)
}
