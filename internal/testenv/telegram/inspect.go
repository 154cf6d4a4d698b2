package telegram

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Calls returns the requests received for method ("" for all).
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if method == "" || strings.EqualFold(c.Method, method) {
			out = append(out, c)
		}
	}
	return out
}

// Offsets returns the offset of every getUpdates call, in order.
func (s *Server) Offsets() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.offsets...)
}

// Pending is the number of updates not confirmed yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.updates)
}

// Commands returns the commands set with setMyCommands.
func (s *Server) Commands() []BotCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]BotCommand(nil), s.commands...)
}

// Sent returns what the bot did, in order; chatID 0 means every chat.
func (s *Server) Sent(chatID int64) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	for _, x := range s.sent {
		if chatID == 0 || x.ChatID == chatID {
			out = append(out, x)
		}
	}
	return out
}

// Messages returns the bot's messages (sendMessage, sendDocument) in a
// chat, in order.
func (s *Server) Messages(chatID int64) []Sent {
	var out []Sent
	for _, x := range s.Sent(chatID) {
		if x.Method == "sendMessage" || x.Method == "sendDocument" {
			out = append(out, x)
		}
	}
	return out
}

// Message returns the current state of a message in a chat.
func (s *Server) Message(chatID, id int64) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgs[chatID][id]
	if m == nil {
		return Message{}, false
	}
	return *m, true
}

// Wait blocks until cond holds (checked after every change) or ctx ends.
func (s *Server) Wait(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitMessages waits until the bot has sent at least n messages in chat
// and returns them.
func (s *Server) WaitMessages(tb testing.TB, chatID int64, n int, timeout time.Duration) []Sent {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.Wait(ctx, func() bool { return len(s.Messages(chatID)) >= n }); err != nil {
		tb.Fatalf("telegram fake: %d message(s) in chat %d after %s, want %d: %+v", len(s.Messages(chatID)), chatID, timeout, n, s.Messages(chatID))
	}
	return s.Messages(chatID)
}
