package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"conch"
	"conch/channel/internal/markdown"
)

// Approval questions are messages with an actions block, one button per
// choice (action_id "conch_approval_<choice>", value "<id>:<choice>"); a
// press comes back as a block_actions interaction: over Socket Mode, or
// with the Events API at InteractionsPath (events.go). The gateway decides
// whether the person may answer; a refusal is shown to the presser alone
// (chat.postEphemeral); the outcome replaces the question's buttons
// (chat.update with no blocks). The app needs interactivity enabled
// (docs/slack-app.yaml).

var _ conch.ApprovalChannel = (*Channel)(nil)

const actionPrefix = "conch_approval_"

// SendApproval implements conch.ApprovalChannel.
func (c *Channel) SendApproval(ctx context.Context, p conch.ApprovalPrompt) error {
	channel, thread, err := placeOf(p.Key)
	if err != nil {
		return err
	}
	body := markdown.SlackSingle(p.Text, 2900) // a section's text is at most 3000 characters
	buttons := make([]slack.BlockElement, 0, len(p.Choices))
	for _, ch := range p.Choices {
		b := slack.NewButtonBlockElement(actionPrefix+string(ch), p.ID+":"+string(ch), slack.NewTextBlockObject(slack.PlainTextType, ch.Label(), false, false))
		switch ch {
		case conch.ApproveOnce:
			b.Style = slack.StylePrimary
		case conch.ApproveDeny:
			b.Style = slack.StyleDanger
		}
		buttons = append(buttons, b)
	}
	blocks := []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, body, false, false), nil, nil),
		slack.NewActionBlock("conch_approval_"+p.ID, buttons...),
	}
	opts := []slack.MsgOption{slack.MsgOptionText(markdown.SlackPlain(body), false), slack.MsgOptionBlocks(blocks...), slack.MsgOptionDisableLinkUnfurl()}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	var ts string
	err = c.call(ctx, "chat.postMessage", sendRetries, func(ctx context.Context) error {
		var err error
		_, ts, err = c.api.PostMessageContext(ctx, channel, opts...)
		return err
	})
	c.noteSend(err)
	if err != nil {
		return fmt.Errorf("slack: send question: %w", err)
	}
	c.rememberQuestion(p.ID, msgRef{channel: channel, ts: ts})
	return nil
}

// rememberQuestion notes the message that shows a question.
func (c *Channel) rememberQuestion(id string, m msgRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.questions == nil || len(c.questions) > 1000 {
		c.questions = map[string]msgRef{}
	}
	c.questions[id] = m
}

// ApprovalDecided implements conch.ApprovalChannel: the question's message
// says the outcome, without its buttons; when this run has not seen it,
// the outcome is a message of its own.
func (c *Channel) ApprovalDecided(ctx context.Context, p conch.ApprovalPrompt, outcome string) error {
	c.mu.Lock()
	m, ok := c.questions[p.ID]
	delete(c.questions, p.ID)
	c.mu.Unlock()
	text := markdown.SlackSingle(outcome, markdown.SlackMaxText)
	if ok {
		err := c.call(ctx, "chat.update", 2, func(ctx context.Context) error {
			_, _, _, err := c.api.UpdateMessageContext(ctx, m.channel, m.ts, slack.MsgOptionText(text, false), slack.MsgOptionBlocks())
			return err
		})
		c.noteSend(err)
		if err == nil {
			return nil
		}
		c.log.Warn("slack: question's message not updated; sending the outcome", "err", err)
	}
	return c.Send(ctx, conch.Outbound{Key: p.Key, Kind: conch.OutboundNotice, Text: outcome})
}

// onInteraction takes a Socket Mode interactive envelope: a press of a
// question's button is handed to the gateway; anything else is ignored.
// It reports an error only when the answer could not be recorded (the
// envelope is then not acknowledged and comes again).
func (c *Channel) onInteraction(ctx context.Context, raw json.RawMessage) error {
	var ic slack.InteractionCallback
	if err := json.Unmarshal(raw, &ic); err != nil {
		c.log.Debug("slack: unreadable interaction", "err", err)
		return nil
	}
	if ic.Type != slack.InteractionTypeBlockActions {
		return nil
	}
	for _, a := range ic.ActionCallback.BlockActions {
		if !strings.HasPrefix(a.ActionID, actionPrefix) {
			continue
		}
		id, choiceText, _ := strings.Cut(a.Value, ":")
		choice, ok := conch.ParseApprovalChoice(choiceText)
		if !ok || id == "" {
			continue
		}
		if err := c.answer(ctx, ic, id, choice); err != nil {
			return err
		}
	}
	return nil
}

func (c *Channel) answer(ctx context.Context, ic slack.InteractionCallback, id string, choice conch.ApprovalChoice) error {
	answerer, ok := c.handler.(conch.ApprovalAnswerer)
	if !ok {
		return nil
	}
	team := ic.Team.ID
	if team == "" {
		team = c.team
	}
	channel := ic.Container.ChannelID
	if channel == "" {
		channel = ic.Channel.ID
	}
	ts := ic.Container.MessageTs
	key := keyOf(team, channel, ic.Message.ThreadTimestamp)
	c.rememberQuestion(id, msgRef{channel: channel, ts: ts})
	_, err := answerer.AnswerApproval(ctx, conch.ApprovalAnswer{
		Key: key, ID: id, Choice: choice,
		Sender: conch.UserID(ic.User.ID), SenderAliases: []conch.UserID{conch.UserID(team + ":" + ic.User.ID)},
	})
	switch kind := conch.KindOf(err); {
	case err == nil:
		return nil
	case kind == conch.KindAuth || kind == conch.KindInvalid || kind == conch.KindNotFound:
		c.mu.Lock()
		delete(c.questions, id)
		c.mu.Unlock()
		c.log.Info("slack: answer refused", "approval", id, "user", ic.User.ID, "err", err)
		opts := []slack.MsgOption{slack.MsgOptionText(conch.UserMessage(err), false)}
		if ic.Message.ThreadTimestamp != "" {
			opts = append(opts, slack.MsgOptionTS(ic.Message.ThreadTimestamp))
		}
		perr := c.call(ctx, "chat.postEphemeral", 1, func(ctx context.Context) error {
			_, err := c.api.PostEphemeralContext(ctx, channel, ic.User.ID, opts...)
			return err
		})
		if perr != nil {
			c.log.Warn("slack: refusal not shown", "err", perr)
		}
		return nil
	default:
		return fmt.Errorf("answer question %s: %w", id, err)
	}
}

// ackInteractive handles an interactive envelope and acknowledges it once
// handled.
func (c *Channel) ackInteractive(ctx context.Context, sm *socketmode.Client, req *socketmode.Request) {
	if err := c.onInteraction(ctx, req.Payload); err != nil {
		c.log.Warn("slack: button press not handed over; Slack will deliver it again", "envelope", req.EnvelopeID, "err", err)
		return
	}
	if err := sm.AckCtx(ctx, req.EnvelopeID, nil); err != nil && ctx.Err() == nil {
		c.log.Debug("slack: ack", "envelope", req.EnvelopeID, "err", err)
	}
}
