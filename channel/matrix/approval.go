package matrix

import (
	"context"
	"strings"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch"
)

// Approval questions are messages (Matrix has no buttons) answered by a
// reaction on the question — 👍 allow once, ✅ allow for this conversation,
// 👎 deny — or by a reply ("yes", "always", "no"), which the gateway takes
// like any message. A reaction is handed to the gateway as a click, which
// decides whether its sender may answer; the outcome is a notice.

var _ conch.ApprovalChannel = (*Channel)(nil)

// reactionChoices maps the reactions taken as answers (variation
// selectors stripped).
var reactionChoices = map[string]conch.ApprovalChoice{
	"👍": conch.ApproveOnce, "✅": conch.ApproveConversation, "👎": conch.ApproveDeny,
}

const reactionHelp = "\n\nReact 👍 to allow once, ✅ to allow for this conversation, 👎 to deny — or reply **yes**, **always** or **no**."

// SendApproval implements conch.ApprovalChannel.
func (c *Channel) SendApproval(ctx context.Context, p conch.ApprovalPrompt) error {
	ids, err := c.send(ctx, conch.Outbound{Key: p.Key, Kind: conch.OutboundNotice, Text: p.Text + reactionHelp, ID: p.OutboundID}, true)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.questions == nil || len(c.questions) > 1000 {
		c.questions = map[id.EventID]string{}
	}
	c.questions[ids[0]] = p.ID
	c.mu.Unlock()
	return nil
}

// ApprovalDecided implements conch.ApprovalChannel: the outcome is a notice.
func (c *Channel) ApprovalDecided(ctx context.Context, p conch.ApprovalPrompt, outcome string) error {
	return c.Send(ctx, conch.Outbound{Key: p.Key, Kind: conch.OutboundNotice, Text: outcome})
}

// onReaction takes a live reaction on a question (this run's) as an answer.
func (c *Channel) onReaction(ctx context.Context, evt *event.Event) {
	r := c.round
	if r == nil || !c.live(r, evt) {
		return
	}
	content, ok := evt.Content.Parsed.(*event.ReactionEventContent)
	if !ok || content.RelatesTo.Type != event.RelAnnotation {
		return
	}
	choice, ok := reactionChoices[strings.TrimRight(content.RelatesTo.Key, "\ufe0f")]
	if !ok {
		return
	}
	c.mu.Lock()
	qid, ok := c.questions[content.RelatesTo.EventID]
	c.mu.Unlock()
	answerer, isAnswerer := c.handler.(conch.ApprovalAnswerer)
	if !ok || !isAnswerer {
		return
	}
	_, err := answerer.AnswerApproval(ctx, conch.ApprovalAnswer{Key: keyOf(evt.RoomID), ID: qid, Choice: choice, Sender: conch.UserID(evt.Sender)})
	if err != nil {
		c.log.Info("matrix: answer by reaction refused", "approval", qid, "sender", evt.Sender, "err", err)
	}
}
