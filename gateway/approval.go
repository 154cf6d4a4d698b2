package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"conch"
)

// Approvals: the one flow by which a tool asks the conversation's people
// before it goes on (approval.go in the root package). A question is stored
// (keyed by its turn's tool call) before it is shown; the call waits for a
// decision in the store; a click (ApprovalAnswerer) or a typed reply decides
// it, only by someone the conversation admits; an unanswered question is
// denied at its deadline. Every decision is audited (conch.AuditApproval)
// and published as an event (the web chat renders from those).

// DefaultApprovalTimeout is how long a question waits for an answer.
const DefaultApprovalTimeout = 10 * time.Minute

// approvalWaiters wake the calls waiting on a question when it is decided.
type approvalWaiters struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func (w *approvalWaiters) get(id string) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]chan struct{}{}
	}
	ch, ok := w.m[id]
	if !ok {
		ch = make(chan struct{})
		w.m[id] = ch
	}
	return ch
}

func (w *approvalWaiters) wake(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.m[id]; ok {
		close(ch)
		delete(w.m, id)
	}
}

// turnApprover is a turn's conch.Approver.
type turnApprover struct {
	g    *Gateway
	turn conch.Turn
}

var (
	_ conch.Approver         = (*turnApprover)(nil)
	_ conch.ApprovalAnswerer = (*Gateway)(nil)
)

// approver returns the turn's Approver, or nil when approvals are not
// kept (no store for them).
func (g *Gateway) approver(t conch.Turn) conch.Approver {
	if g.opts.Approvals == nil {
		return nil
	}
	return &turnApprover{g: g, turn: t}
}

// Approve implements conch.Approver.
func (ta *turnApprover) Approve(ctx context.Context, callID string, req conch.ApprovalRequest) (conch.ApprovalDecision, error) {
	g, key := ta.g, ta.turn.Key
	st := g.opts.Approvals
	log := g.log.With("conversation", key, "turn", ta.turn.ID, "call", callID)
	if req.Scope != "" {
		ok, err := st.Granted(ctx, key, req.Scope)
		if err != nil {
			return conch.ApprovalDecision{}, fmt.Errorf("approval: %w", err)
		}
		if ok {
			d := conch.ApprovalDecision{Choice: conch.ApproveConversation, Reason: conch.ApprovalReasonGrant}
			if err := g.auditApproval(ctx, conch.Approval{Key: key, Turn: ta.turn.ID, CallID: callID, Request: req}, d); err != nil {
				return conch.ApprovalDecision{}, err
			}
			return d, nil
		}
	}
	id, err := approvalID()
	if err != nil {
		return conch.ApprovalDecision{}, err
	}
	if callID == "" {
		// A call without an id cannot be found again after a restart;
		// it must not share a question with another one either.
		callID = "unnamed-" + id
		req.Resumable = false
	}
	now := g.opts.Now()
	a, created, err := st.AddApproval(ctx, conch.Approval{
		ID: id, Key: key, Turn: ta.turn.ID, CallID: callID, Request: req,
		Created: now, Deadline: now.Add(g.opts.ApprovalTimeout),
	})
	if err != nil {
		return conch.ApprovalDecision{}, fmt.Errorf("approval: %w", err)
	}
	switch {
	case created:
		log.Info("asking the conversation's people", "approval", a.ID, "kind", req.Kind, "title", req.Title)
		g.hub.Publish(ctx, key, ta.turn.ID, conch.ApprovalAsked{ID: a.ID, Request: req, Deadline: a.Deadline})
		g.showApproval(ctx, ta.turn, a)
	case a.Status == conch.ApprovalOpen && a.Shown.IsZero():
		// Stored, but a crash came before it reached the channel.
		// (Its event was kept before it was shown, unless the crash came
		// between storing and publishing: then the web chat misses it and
		// it is answered by reply or times out.)
		log.Info("showing a question a crash kept from its channel", "approval", a.ID)
		g.showApproval(ctx, ta.turn, a)
	case a.Status == conch.ApprovalOpen:
		log.Info("waiting again for the answer to a question asked before the restart", "approval", a.ID)
	}
	return g.waitApproval(ctx, a)
}

// waitApproval waits until a is decided, its deadline passes (a denial) or
// ctx ends. A turn whose own deadline comes first is denied then, with
// reason turn_ended; a shutdown leaves the question open (the turn resumes
// and waits again after the restart); a stopped or reset turn denies it.
func (g *Gateway) waitApproval(ctx context.Context, a conch.Approval) (conch.ApprovalDecision, error) {
	st := g.opts.Approvals
	for {
		wake := g.waiters.get(a.ID)
		cur, err := st.Approval(context.WithoutCancel(ctx), a.ID)
		if err != nil {
			return conch.ApprovalDecision{}, fmt.Errorf("approval: %w", err)
		}
		if cur.Status == conch.ApprovalDecided {
			return g.useApproval(ctx, cur)
		}
		deadline, reason := cur.Deadline, conch.ApprovalReasonTimeout
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline, reason = d.Add(-time.Second), conch.ApprovalReasonTurnEnded
		}
		timer := time.NewTimer(max(0, deadline.Sub(g.opts.Now())))
		select {
		case <-wake:
			timer.Stop()
			continue
		case <-timer.C:
			got, err := g.decideApproval(context.WithoutCancel(ctx), cur, conch.ApprovalDecision{Choice: conch.ApproveDeny, Reason: reason})
			if err != nil {
				return conch.ApprovalDecision{}, err
			}
			return g.useApproval(ctx, got)
		case <-ctx.Done():
			timer.Stop()
			if g.shuttingDown() {
				// The question stays open: after the restart the turn
				// resumes at this call, which finds it (answered or not).
				return conch.ApprovalDecision{}, fmt.Errorf("%w: %w", conch.ErrAwaitingAnswer, context.Cause(ctx))
			}
			if _, err := g.decideApproval(context.WithoutCancel(ctx), cur, conch.ApprovalDecision{Choice: conch.ApproveDeny, Reason: conch.ApprovalReasonTurnEnded}); err != nil {
				g.log.Warn("record the end of a question", "approval", cur.ID, "err", err)
			}
			return conch.ApprovalDecision{}, context.Cause(ctx)
		}
	}
}

// useApproval hands a decision to the waiting call, first recording that
// it was taken: from then on a crash leaves the call "interrupted" (it may
// have run), never run again.
func (g *Gateway) useApproval(ctx context.Context, a conch.Approval) (conch.ApprovalDecision, error) {
	if err := g.opts.Approvals.UseApproval(context.WithoutCancel(ctx), a.ID, g.opts.Now()); err != nil {
		return conch.ApprovalDecision{}, fmt.Errorf("approval: %w", err)
	}
	return conch.ApprovalDecision{Choice: a.Choice, Reason: a.Reason, By: a.By}, nil
}

// shuttingDown reports whether Run's context is done.
func (g *Gateway) shuttingDown() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ctx != nil && g.ctx.Err() != nil
}

// AnswerApproval implements conch.ApprovalAnswerer: a click decides the
// question if it comes from its conversation, from someone admitted there,
// and the question is still open.
func (g *Gateway) AnswerApproval(ctx context.Context, ans conch.ApprovalAnswer) (conch.Approval, error) {
	if g.opts.Approvals == nil {
		return conch.Approval{}, conch.Errorf(conch.KindNotFound, "approvals are not kept here")
	}
	if !ans.Choice.Allows() && ans.Choice != conch.ApproveDeny {
		return conch.Approval{}, conch.Errorf(conch.KindInvalid, "unknown choice %q", ans.Choice)
	}
	a, err := g.opts.Approvals.Approval(ctx, ans.ID)
	if err != nil {
		return conch.Approval{}, err
	}
	ids := append([]conch.UserID{ans.Sender}, ans.SenderAliases...)
	if a.Key != ans.Key || !g.admitted(ctx, ans.Key.Channel, ids...) {
		g.log.Warn("refused an answer to a question from someone the conversation does not admit",
			"approval", a.ID, "conversation", a.Key, "from", ans.Key, "sender", ans.Sender)
		_ = conch.RecordAudit(ctx, g.opts.Audit, g.opts.Now(), conch.AuditApproval, a.Key, map[string]any{
			"id": a.ID, "refused": "not admitted to the conversation", "sender": ans.Sender, "from": ans.Key.String(),
		})
		return conch.Approval{}, conch.Errorf(conch.KindAuth, "you may not answer this question")
	}
	if a.Status == conch.ApprovalDecided {
		return a, conch.Errorf(conch.KindInvalid, "this question was already answered: %s", outcomeText(a))
	}
	got, err := g.decideApproval(ctx, a, conch.ApprovalDecision{Choice: ans.Choice, Reason: conch.ApprovalReasonPerson, By: ans.Sender})
	if err != nil {
		return conch.Approval{}, err
	}
	if got.Reason != conch.ApprovalReasonPerson || got.By != ans.Sender {
		return got, conch.Errorf(conch.KindInvalid, "this question was already answered: %s", outcomeText(got))
	}
	return got, nil
}

// decideApproval records a decision once: the first one wins; it is
// audited, published, shown on the channel, and wakes the waiting call.
func (g *Gateway) decideApproval(ctx context.Context, a conch.Approval, d conch.ApprovalDecision) (conch.Approval, error) {
	got, decided, err := g.opts.Approvals.DecideApproval(ctx, a.ID, d, g.opts.Now())
	if err != nil {
		return conch.Approval{}, fmt.Errorf("approval: %w", err)
	}
	if !decided {
		g.waiters.wake(a.ID)
		return got, nil
	}
	if d.Choice == conch.ApproveConversation && got.Request.Scope != "" {
		if err := g.opts.Approvals.Grant(ctx, got.Key, got.Request.Scope, g.opts.Now()); err != nil {
			g.log.Error("remember an approval for the conversation", "approval", got.ID, "err", err)
		}
	}
	g.log.Info("question decided", "approval", got.ID, "conversation", got.Key, "choice", got.Choice, "reason", got.Reason, "by", got.By)
	aerr := g.auditApproval(ctx, got, d)
	g.hub.Publish(ctx, got.Key, got.Turn, conch.ApprovalResolved{ID: got.ID, Choice: got.Choice, Reason: got.Reason, By: got.By})
	g.showDecision(ctx, got)
	g.waiters.wake(a.ID)
	return got, aerr
}

func (g *Gateway) auditApproval(ctx context.Context, a conch.Approval, d conch.ApprovalDecision) error {
	detail := map[string]any{
		"id": a.ID, "turn": a.Turn, "call_id": a.CallID, "kind": a.Request.Kind, "title": a.Request.Title,
		"scope": a.Request.Scope, "choice": d.Choice, "reason": d.Reason,
	}
	if d.By != "" {
		detail["by"] = d.By
	}
	return conch.RecordAudit(ctx, g.opts.Audit, g.opts.Now(), conch.AuditApproval, a.Key, detail)
}

// prompt is a question as channels render it.
func (g *Gateway) prompt(t conch.Turn, a conch.Approval, buttons bool) conch.ApprovalPrompt {
	var b strings.Builder
	switch a.Request.Kind {
	case "coder":
		b.WriteString("**Approval needed**: the coding agent asks permission.\n\n")
	default:
		b.WriteString("**Approval needed** before this runs:\n\n")
	}
	b.WriteString("```\n" + strings.ReplaceAll(a.Request.Title, "```", "ʼʼʼ") + "\n```\n")
	if a.Request.Detail != "" {
		b.WriteString("\n" + a.Request.Detail + "\n")
	}
	wait := a.Deadline.Sub(a.Created).Round(time.Second)
	if buttons {
		fmt.Fprintf(&b, "\nWithout an answer within %s it is denied.", wait)
	} else {
		fmt.Fprintf(&b, "\nReply **yes** (allow once), **always** (allow for this conversation) or **no** (deny). Without an answer within %s it is denied. (question %s)", wait, a.ID)
	}
	return conch.ApprovalPrompt{
		Key: a.Key, ID: a.ID, Text: b.String(), Choices: conch.ApprovalChoices,
		InReplyTo: t.Inbound.ExternalID, Thread: t.Inbound.Thread,
		OutboundID: g.approvalOutboundID(a),
	}
}

func (g *Gateway) approvalOutboundID(a conch.Approval) string {
	return fmt.Sprintf("conch.%s.t%d.approval.%s", g.salt, a.Turn, a.ID)
}

// showApproval shows a new question on its channel: with buttons where the
// channel has them, else as a notice answered by a reply.
func (g *Gateway) showApproval(ctx context.Context, t conch.Turn, a conch.Approval) {
	ch, ok := g.channels[a.Key.Channel]
	if !ok || !g.mayReach(ctx, a.Key, t.ID, "question") {
		return
	}
	var err error
	if ac, ok := ch.(conch.ApprovalChannel); ok {
		err = ac.SendApproval(ctx, g.prompt(t, a, true))
	} else {
		p := g.prompt(t, a, false)
		err = ch.Send(ctx, conch.Outbound{Key: a.Key, Kind: conch.OutboundNotice, Text: p.Text, InReplyTo: p.InReplyTo, Thread: p.Thread, ID: p.OutboundID})
	}
	if err != nil {
		// The question stays open (a reply or the web chat can still
		// answer it); it times out as any other.
		g.log.Error("question not delivered", "approval", a.ID, "conversation", a.Key, "err", err)
		return
	}
	if err := g.opts.Approvals.ApprovalShown(context.WithoutCancel(ctx), a.ID, g.opts.Now()); err != nil {
		g.log.Warn("record a question shown", "approval", a.ID, "err", err)
	}
}

// showDecision tells the conversation how a question was decided.
func (g *Gateway) showDecision(ctx context.Context, a conch.Approval) {
	ch, ok := g.channels[a.Key.Channel]
	if !ok || !g.mayReach(ctx, a.Key, a.Turn, "question's outcome") {
		return
	}
	text := outcomeText(a)
	if ac, ok := ch.(conch.ApprovalChannel); ok {
		p := conch.ApprovalPrompt{Key: a.Key, ID: a.ID, OutboundID: g.approvalOutboundID(a)}
		if err := ac.ApprovalDecided(ctx, p, text); err != nil {
			g.log.Warn("question's outcome not shown", "approval", a.ID, "err", err)
		}
		return
	}
	if err := ch.Send(ctx, conch.Outbound{Key: a.Key, Kind: conch.OutboundNotice, Text: text}); err != nil {
		g.log.Warn("question's outcome not shown", "approval", a.ID, "err", err)
	}
}

// outcomeText says in words how a question was decided.
func outcomeText(a conch.Approval) string {
	what := "`" + clip(a.Request.Title, 80) + "`"
	switch a.Reason {
	case conch.ApprovalReasonTimeout:
		return "Denied " + what + ": nobody answered in time."
	case conch.ApprovalReasonTurnEnded:
		return "Denied " + what + ": the turn ended before an answer."
	}
	by := ""
	if a.By != "" {
		by = " by " + string(a.By)
	}
	switch a.Choice {
	case conch.ApproveOnce:
		return "Allowed once" + by + ": " + what
	case conch.ApproveConversation:
		return "Allowed for this conversation" + by + ": " + what
	}
	return "Denied" + by + ": " + what
}

// replyAnswer takes a typed reply ("yes", "always", "no", optionally with
// the question's id) as the answer to the conversation's open question. It
// reports whether the message was such an answer (and is not a message for
// the model). Redeliveries are ignored by the message's id.
func (g *Gateway) replyAnswer(ctx context.Context, in conch.Inbound) bool {
	if g.opts.Approvals == nil {
		return false
	}
	text := strings.TrimSpace(in.Text)
	if text == "" || len(text) > 64 {
		return false
	}
	words := strings.Fields(text)
	id := ""
	if len(words) > 1 {
		if last := strings.Trim(words[len(words)-1], "()."); len(last) == approvalIDLen && isHex(last) {
			id, words = last, words[:len(words)-1]
		}
	}
	choice, ok := conch.ParseApprovalChoice(strings.Join(words, " "))
	if !ok {
		return false
	}
	open, err := g.opts.Approvals.OpenApprovals(ctx, in.Key)
	if err != nil {
		g.log.Warn("read open questions", "conversation", in.Key, "err", err)
		return false
	}
	if len(open) == 0 {
		return false
	}
	target := open[0]
	if id != "" {
		found := false
		for _, a := range open {
			if a.ID == id {
				target, found = a, true
			}
		}
		if !found {
			return false
		}
	}
	if in.ExternalID != "" {
		first, err := g.opts.Store.Mark(ctx, markerApprovalReply, string(in.Key.Channel)+":"+in.ExternalID)
		if err == nil && !first {
			g.log.Info("ignored redelivered answer", "conversation", in.Key, "external_id", in.ExternalID)
			return true
		}
	}
	if _, err := g.AnswerApproval(ctx, conch.ApprovalAnswer{Key: in.Key, ID: target.ID, Choice: choice, Sender: in.Sender, SenderAliases: in.SenderAliases}); err != nil {
		g.log.Info("answer by reply not taken", "approval", target.ID, "err", err)
		if ch, ok := g.channels[in.Key.Channel]; ok {
			_ = ch.Send(ctx, conch.Outbound{Key: in.Key, Kind: conch.OutboundNotice, Text: conch.UserMessage(err), InReplyTo: in.ExternalID, Thread: in.Thread})
		}
	}
	return true
}

// settleApprovals runs at start, before the turns resume: a question
// whose call will not ask again (not resumable: a coding CLI's prompt,
// whose call gets the "interrupted" result) is denied as its turn ended,
// and one past its deadline is denied as timed out.
func (g *Gateway) settleApprovals(ctx context.Context) {
	if g.opts.Approvals == nil {
		return
	}
	open, err := g.opts.Approvals.OpenApprovals(ctx, conch.ConversationKey{})
	if err != nil {
		g.log.Warn("read open questions", "err", err)
		return
	}
	now := g.opts.Now()
	for _, a := range open {
		d := conch.ApprovalDecision{Choice: conch.ApproveDeny}
		switch {
		case !a.Request.Resumable:
			d.Reason = conch.ApprovalReasonTurnEnded
		case !now.Before(a.Deadline):
			d.Reason = conch.ApprovalReasonTimeout
		default:
			g.log.Info("a question stays open across the restart", "approval", a.ID, "conversation", a.Key, "turn", a.Turn)
			continue
		}
		if _, err := g.decideApproval(ctx, a, d); err != nil {
			g.log.Warn("end question", "approval", a.ID, "err", err)
		}
	}
}

// markerApprovalReply is the marker scope of answers given by reply.
const markerApprovalReply = "approval_reply"

// forgetApprovals ends a reset or closed conversation's questions (denied)
// and its grants.
func (g *Gateway) forgetApprovals(ctx context.Context, key conch.ConversationKey) {
	if g.opts.Approvals == nil {
		return
	}
	open, err := g.opts.Approvals.OpenApprovals(ctx, key)
	if err != nil {
		g.log.Warn("read open questions", "conversation", key, "err", err)
	}
	for _, a := range open {
		if _, err := g.decideApproval(ctx, a, conch.ApprovalDecision{Choice: conch.ApproveDeny, Reason: conch.ApprovalReasonTurnEnded}); err != nil {
			g.log.Warn("end question", "approval", a.ID, "err", err)
		}
	}
	if err := g.opts.Approvals.ClearGrants(ctx, key); err != nil {
		g.log.Warn("forget the conversation's approvals", "conversation", key, "err", err)
	}
}

const approvalIDLen = 8

// approvalID is a short random id (32 bits: buttons carry it; answers are
// checked against the conversation and the sender, so guessing one is
// worth nothing).
func approvalID() (string, error) {
	var b [approvalIDLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("approval id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func isHex(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}
