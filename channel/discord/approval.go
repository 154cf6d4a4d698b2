package discord

import (
	"context"
	"fmt"
	"strings"

	"github.com/bwmarrin/discordgo"

	"conch"
)

// Approval questions are messages with an action row of buttons (custom_id
// "conch_approval:<id>:<choice>"); a press comes back over the Gateway as
// INTERACTION_CREATE. The gateway decides whether the person may answer; a
// refusal is an ephemeral answer to the press (only the presser sees it);
// the outcome replaces the question's buttons (a message edit), and the
// press is acknowledged without a change of its own.

var _ conch.ApprovalChannel = (*Channel)(nil)

const customPrefix = "conch_approval:"

// SendApproval implements conch.ApprovalChannel.
func (c *Channel) SendApproval(ctx context.Context, p conch.ApprovalPrompt) error {
	ch, err := channelOf(p.Key)
	if err != nil {
		return err
	}
	buttons := make([]discordgo.MessageComponent, 0, len(p.Choices))
	for _, choice := range p.Choices {
		style := discordgo.SecondaryButton
		switch choice {
		case conch.ApproveOnce:
			style = discordgo.SuccessButton
		case conch.ApproveDeny:
			style = discordgo.DangerButton
		}
		buttons = append(buttons, discordgo.Button{Label: choice.Label(), Style: style, CustomID: customPrefix + p.ID + ":" + string(choice)})
	}
	text := p.Text
	if parts := splitMarkdown(text, maxContent); len(parts) > 0 {
		text = parts[0]
	}
	var id string
	ref := c.replyRef(ctx, ch, p.InReplyTo)
	err = c.call(ctx, "send question", sendRetries, func(ctx context.Context) error {
		m, err := c.dg.ChannelMessageSendComplex(ch, &discordgo.MessageSend{
			Content:         text,
			Components:      []discordgo.MessageComponent{discordgo.ActionsRow{Components: buttons}},
			Reference:       ref,
			AllowedMentions: &discordgo.MessageAllowedMentions{},
		}, discordgo.WithContext(ctx))
		if err == nil {
			id = m.ID
		}
		return err
	})
	c.noteSend(err)
	if err != nil {
		return fmt.Errorf("discord: send question: %w", err)
	}
	c.rememberQuestion(p.ID, id)
	return nil
}

func (c *Channel) rememberQuestion(id, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.questions == nil || len(c.questions) > 1000 {
		c.questions = map[string]string{}
	}
	c.questions[id] = msg
}

// ApprovalDecided implements conch.ApprovalChannel: the question's message
// says the outcome, without its buttons; when this run has not seen it,
// the outcome is a message of its own.
func (c *Channel) ApprovalDecided(ctx context.Context, p conch.ApprovalPrompt, outcome string) error {
	ch, err := channelOf(p.Key)
	if err != nil {
		return err
	}
	c.mu.Lock()
	msg, ok := c.questions[p.ID]
	delete(c.questions, p.ID)
	c.mu.Unlock()
	if ok {
		none := []discordgo.MessageComponent{}
		err := c.call(ctx, "edit question", sendRetries, func(ctx context.Context) error {
			_, err := c.dg.ChannelMessageEditComplex(&discordgo.MessageEdit{ID: msg, Channel: ch, Content: &outcome, Components: &none}, discordgo.WithContext(ctx))
			return err
		})
		c.noteSend(err)
		if err == nil {
			return nil
		}
		c.log.Warn("discord: question's message not edited; sending the outcome", "err", err)
	}
	return c.Send(ctx, conch.Outbound{Key: p.Key, Kind: conch.OutboundNotice, Text: outcome})
}

// onInteraction takes a press of a question's button.
func (c *Channel) onInteraction(i *discordgo.InteractionCreate) {
	ctx := c.lifetime
	if ctx == nil || i == nil || i.Interaction == nil || i.Type != discordgo.InteractionMessageComponent {
		return
	}
	data := i.MessageComponentData()
	rest, ok := strings.CutPrefix(data.CustomID, customPrefix)
	id, choiceText, ok2 := strings.Cut(rest, ":")
	choice, ok3 := conch.ParseApprovalChoice(choiceText)
	if !ok || !ok2 || !ok3 {
		return
	}
	user := i.User
	aliases := []conch.UserID(nil)
	if i.Member != nil && i.Member.User != nil {
		user = i.Member.User
		aliases = []conch.UserID{conch.UserID(i.GuildID + ":" + user.ID)}
	}
	answerer, isAnswerer := c.handler.(conch.ApprovalAnswerer)
	if user == nil || !isAnswerer {
		return
	}
	if i.Message != nil {
		c.rememberQuestion(id, i.Message.ID)
	}
	_, err := answerer.AnswerApproval(ctx, conch.ApprovalAnswer{
		Key: keyOf(i.ChannelID), ID: id, Choice: choice, Sender: conch.UserID(user.ID), SenderAliases: aliases,
	})
	resp := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}
	if err != nil {
		c.mu.Lock()
		delete(c.questions, id)
		c.mu.Unlock()
		c.log.Info("discord: answer refused", "approval", id, "user", user.ID, "err", err)
		text := conch.UserMessage(err)
		if k := conch.KindOf(err); k != conch.KindAuth && k != conch.KindInvalid && k != conch.KindNotFound {
			text = "Your answer could not be recorded; press again."
		}
		resp = &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: text, Flags: discordgo.MessageFlagsEphemeral}}
	}
	if err := c.dg.InteractionRespond(i.Interaction, resp, discordgo.WithContext(ctx)); err != nil {
		c.log.Warn("discord: button press not answered", "err", err)
	}
}
