package telegram

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// TestInlineKeyboardWithOfficialClient validates the fake's inline
// keyboards and callback queries with the official client library: a
// message with buttons, a press delivered as a callback_query update the
// library decodes, answerCallbackQuery (once), and an edit that removes
// the keyboard.
func TestInlineKeyboardWithOfficialClient(t *testing.T) {
	s := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := bot.New(s.Token, bot.WithSkipGetMe(), bot.WithServerURL(s.URL))
	if err != nil {
		t.Fatal(err)
	}
	alice := Person(41, "alice", "Alice")
	chat := PrivateChat(alice)
	s.SendText(alice, chat, "hi") // the chat exists once someone wrote

	m, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: chat.ID, Text: "<b>Run</b> git push?", ParseMode: models.ParseModeHTML,
		ReplyMarkup: models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{
			{{Text: "Allow once", CallbackData: "ap:1:once"}},
			{{Text: "Deny", CallbackData: "ap:1:deny"}},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	if m.ReplyMarkup == nil || len(m.ReplyMarkup.InlineKeyboard) != 2 || m.ReplyMarkup.InlineKeyboard[1][0].CallbackData != "ap:1:deny" {
		t.Fatalf("sent message's keyboard: %+v", m.ReplyMarkup)
	}
	// Callback data over 64 bytes is refused, as by Telegram.
	_, err = b.SendMessage(ctx, &bot.SendMessageParams{ChatID: chat.ID, Text: "x",
		ReplyMarkup: models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{{Text: "x", CallbackData: strings.Repeat("d", 65)}}}}})
	if err == nil || !strings.Contains(err.Error(), "BUTTON_DATA_INVALID") {
		t.Fatalf("65-byte callback data: %v", err)
	}
	// Only a button the message shows can be pressed.
	if _, err := s.Click(alice, chat.ID, int64(m.ID), "ap:1:conversation"); err == nil {
		t.Fatal("pressed a button the message does not have")
	}
	qid, err := s.Click(alice, chat.ID, int64(m.ID), "ap:1:once")
	if err != nil {
		t.Fatal(err)
	}
	// The library decodes the update (MaybeInaccessibleMessage included).
	code, a := call(t, s, "getUpdates", map[string]any{"allowed_updates": []string{"message", "callback_query"}})
	if code != 200 {
		t.Fatalf("getUpdates: %d %+v", code, a)
	}
	var us []*models.Update
	if err := json.Unmarshal(a.Result, &us); err != nil {
		t.Fatal(err)
	}
	var cq *models.CallbackQuery
	for _, u := range us {
		if u.CallbackQuery != nil {
			cq = u.CallbackQuery
		}
	}
	if cq == nil || cq.ID != qid || cq.Data != "ap:1:once" || cq.From.ID != alice.ID || cq.Message.Message == nil ||
		cq.Message.Message.ID != m.ID || cq.Message.Message.Chat.ID != chat.ID {
		t.Fatalf("callback query: %+v (updates %s)", cq, a.Result)
	}
	ok, err := b.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: qid, Text: "Allowed once"})
	if err != nil || !ok {
		t.Fatalf("answerCallbackQuery: %v %v", ok, err)
	}
	if _, err := b.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: qid}); err == nil {
		t.Fatal("a query was answered twice")
	}
	// Edited without reply_markup: the keyboard is gone.
	if _, err := b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: chat.ID, MessageID: m.ID, Text: "Allowed once by alice"}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Message(chat.ID, int64(m.ID))
	if got.ReplyMarkup != nil || got.Text != "Allowed once by alice" {
		t.Fatalf("after the edit: %+v", got)
	}
	// A removed keyboard cannot be pressed.
	if _, err := s.Click(alice, chat.ID, int64(m.ID), "ap:1:once"); err == nil {
		t.Fatal("pressed a button of a keyboard that was removed")
	}
}
