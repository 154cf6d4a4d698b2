package telegram

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"conch"
)

// Approval questions are messages with an inline keyboard, one button per
// choice; a press comes back as a callback_query whose data names the
// question and the choice ("ap:<id>:<choice>"). The gateway decides whether
// the person may answer; the press is always answered (answerCallbackQuery)
// with the outcome, and the question's message is edited to say it, without
// its buttons.

var _ conch.ApprovalChannel = (*Channel)(nil)

const callbackPrefix = "ap:"

// questionMsgs remembers which message shows which question (this run's;
// after a restart a press carries its message).
type questionMsgs struct {
	mu sync.Mutex
	m  map[string][2]int64 // question id → chat, message
}

func (q *questionMsgs) put(id string, chat, msg int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m == nil {
		q.m = map[string][2]int64{}
	}
	if len(q.m) > 1000 {
		clear(q.m)
	}
	q.m[id] = [2]int64{chat, msg}
}

func (q *questionMsgs) take(id string) ([2]int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	v, ok := q.m[id]
	delete(q.m, id)
	return v, ok
}

// SendApproval implements conch.ApprovalChannel.
func (c *Channel) SendApproval(ctx context.Context, p conch.ApprovalPrompt) error {
	chat, err := chatOf(p.Key)
	if err != nil {
		return err
	}
	rows := make([][]models.InlineKeyboardButton, 0, len(p.Choices))
	for _, ch := range p.Choices {
		rows = append(rows, []models.InlineKeyboardButton{{Text: ch.Label(), CallbackData: callbackPrefix + p.ID + ":" + string(ch)}})
	}
	text := c.render.single(p.Text, maxMessageLen)
	if text == "" {
		text = "Approval needed"
	}
	params := &bot.SendMessageParams{ChatID: chat, MessageThreadID: c.topicFor(chat, p.InReplyTo), Text: text, ParseMode: models.ParseModeHTML,
		ReplyMarkup: models.InlineKeyboardMarkup{InlineKeyboard: rows}, LinkPreviewOptions: &models.LinkPreviewOptions{IsDisabled: bot.True()},
		ReplyParameters: c.replyTo(chat, conch.Outbound{InReplyTo: p.InReplyTo})}
	ids, err := c.sendMessage(ctx, params)
	c.noteSend(err)
	if err != nil {
		return fmt.Errorf("telegram: send question: %w", err)
	}
	c.questions.put(p.ID, chat, int64(ids[0]))
	return nil
}

// ApprovalDecided implements conch.ApprovalChannel: the question's message
// says the outcome and loses its buttons; when this run did not send it
// (or it cannot be edited), the outcome is a message of its own.
func (c *Channel) ApprovalDecided(ctx context.Context, p conch.ApprovalPrompt, outcome string) error {
	chat, err := chatOf(p.Key)
	if err != nil {
		return err
	}
	html := c.render.single(outcome, maxMessageLen)
	if at, ok := c.questions.take(p.ID); ok && at[0] == chat {
		err := c.call(ctx, "editMessageText", sendRetries, func(ctx context.Context) error {
			_, err := c.bot.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: chat, MessageID: int(at[1]), Text: html, ParseMode: models.ParseModeHTML})
			return err
		})
		if err == nil {
			return nil
		}
		c.log.Warn("telegram: question's message not edited; sending the outcome", "chat", chat, "err", err)
	}
	return c.Send(ctx, conch.Outbound{Key: p.Key, Kind: conch.OutboundNotice, Text: outcome})
}

// onCallback takes a button press. A press that is not a question's, or
// that the gateway refuses, is answered with why; the update is confirmed
// either way, except when the gateway could not record the answer (it is
// fetched again).
func (c *Channel) onCallback(ctx context.Context, q *models.CallbackQuery) error {
	rest, ok := strings.CutPrefix(q.Data, callbackPrefix)
	id, choiceText, ok2 := strings.Cut(rest, ":")
	choice, ok3 := conch.ParseApprovalChoice(choiceText)
	msg := q.Message.Message
	if !ok || !ok2 || !ok3 || msg == nil || q.From.IsBot {
		c.log.Info("telegram: button press ignored", "data", q.Data, "from", q.From.ID)
		c.answerQuery(ctx, q.ID, "This button does nothing now.", true)
		return nil
	}
	answerer, ok := c.handler.(conch.ApprovalAnswerer)
	if !ok {
		c.answerQuery(ctx, q.ID, "Questions cannot be answered here.", true)
		return nil
	}
	// A press after a restart: the outcome edits the pressed message.
	c.questions.put(id, msg.Chat.ID, int64(msg.ID))
	a, err := answerer.AnswerApproval(ctx, conch.ApprovalAnswer{
		Key: keyOf(msg.Chat.ID), ID: id, Choice: choice,
		Sender: conch.UserID(strconv.FormatInt(q.From.ID, 10)), SenderAliases: senderAliases(&q.From),
	})
	switch kind := conch.KindOf(err); {
	case err == nil:
		c.answerQuery(ctx, q.ID, a.Choice.Label(), false)
	case kind == conch.KindAuth || kind == conch.KindInvalid || kind == conch.KindNotFound:
		c.questions.take(id)
		c.log.Info("telegram: answer refused", "approval", id, "from", q.From.ID, "err", err)
		c.answerQuery(ctx, q.ID, conch.UserMessage(err), true)
	default:
		c.questions.take(id)
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("answer question %s: %w", id, err)
	}
	return nil
}

// answerQuery answers a press (Telegram shows the text as a toast, or an
// alert); best effort: an old query cannot be answered any more.
func (c *Channel) answerQuery(ctx context.Context, id, text string, alert bool) {
	if r := []rune(text); len(r) > 190 {
		text = string(r[:190]) + "…"
	}
	err := c.call(ctx, "answerCallbackQuery", 1, func(ctx context.Context) error {
		_, err := c.bot.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: id, Text: text, ShowAlert: alert})
		return err
	})
	if err != nil {
		c.log.Warn("telegram: button press not answered", "err", err)
	}
}
