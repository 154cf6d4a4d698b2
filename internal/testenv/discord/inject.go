package discord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"mime"
	"path"
	"strings"
	"testing"
	"time"
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Person adds a user and returns them.
func (s *Server) Person(id, name string) User {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := User{ID: id, Username: name, GlobalName: strings.ToUpper(name[:1]) + name[1:], Discriminator: "0"}
	s.users[id] = u
	return u
}

// DM is the DM channel between u and the bot.
func (s *Server) DM(u User) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.channels {
		if ch.Type == TypeDM && ch.user == u.ID {
			return ch.ID
		}
	}
	id := s.snowflakeLocked()
	s.channels[id] = &channel{ID: id, Type: TypeDM, user: u.ID}
	return id
}

// TextChannel adds a guild text channel the bot can see.
func (s *Server) TextChannel(guild, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.snowflakeLocked()
	s.channels[id] = &channel{ID: id, Type: TypeGuildText, GuildID: guild, Name: name}
	return id
}

// Thread adds a public thread under a guild text channel.
func (s *Server) Thread(parent, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.channels[parent]
	id := s.snowflakeLocked()
	s.channels[id] = &channel{ID: id, Type: TypePublicThread, GuildID: p.GuildID, Name: name, Parent: parent}
	return id
}

// PostOption changes a message a person posts.
type PostOption func(*Message, *Server)

// WithAttachment attaches a file.
func WithAttachment(name string, data []byte) PostOption {
	return func(m *Message, s *Server) {
		ct, _, _ := strings.Cut(mime.TypeByExtension(path.Ext(name)), ";")
		m.Attachments = append(m.Attachments, s.attachmentLocked(m.ChannelID, name, ct, data))
	}
}

// Mention mentions the bot ("<@id> " before the content).
func Mention() PostOption {
	return func(m *Message, s *Server) {
		m.Content = "<@" + s.Bot.ID + "> " + m.Content
		m.Mentions = append(m.Mentions, s.Bot)
	}
}

// Post is a message from u in channel; it returns the message's id. Every
// Gateway session whose intents cover it gets MESSAGE_CREATE.
func (s *Server) Post(u User, channel, content string, opts ...PostOption) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[channel]
	if !ok {
		panic("discord fake: post to unknown channel " + channel)
	}
	m := &Message{ID: s.snowflakeLocked(), ChannelID: ch.ID, GuildID: ch.GuildID, Author: u, Content: content,
		Timestamp: time.Now().UTC().Format(time.RFC3339Nano), Mentions: []User{}, MentionRoles: []string{},
		Attachments: []Attachment{}, Embeds: []any{}}
	for _, o := range opts {
		o(m, s)
	}
	s.addLocked(ch, m)
	return m.ID
}

func (s *Server) addLocked(ch *channel, m *Message) {
	s.msgs[ch.ID] = append(s.msgs[ch.ID], m)
	s.dispatchLocked("MESSAGE_CREATE", m)
	s.notifyLocked()
}

func (s *Server) findLocked(ch, id string) *Message {
	for _, m := range s.msgs[ch] {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// Messages are the bot's messages in channel, as they are now, in order.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.msgs[channel] {
		if m.Author.ID == s.Bot.ID {
			out = append(out, *m)
		}
	}
	return out
}

// All is every message of channel, in order.
func (s *Server) All(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.msgs[channel] {
		out = append(out, *m)
	}
	return out
}

// Sent is what the bot did in channel ("" = everywhere), in order.
func (s *Server) Sent(channel string) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	for _, x := range s.sent {
		if channel == "" || x.ChannelID == channel {
			out = append(out, x)
		}
	}
	return out
}

// Violations is how many requests broke a rate-limit bucket (a client
// that honours the X-RateLimit headers makes none).
func (s *Server) Violations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.violations
}

// FileData is an attachment's content.
func (s *Server) FileData(id string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.files[id]; ok {
		return a.data
	}
	return nil
}

// Wait blocks until cond holds or ctx ends.
func (s *Server) Wait(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// WaitMessages waits until the bot has at least n messages in channel.
func (s *Server) WaitMessages(tb testing.TB, channel string, n int, timeout time.Duration) []Message {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.Wait(ctx, func() bool { return len(s.Messages(channel)) >= n }); err != nil {
		tb.Fatalf("discord fake: %d message(s) from the bot in %s, want %d: %+v", len(s.Messages(channel)), channel, n, s.Messages(channel))
	}
	return s.Messages(channel)
}

// Click presses the button custom_id on the bot's message msg in channel,
// as u would in a client, and dispatches INTERACTION_CREATE (a message
// component interaction) to every session; interactions need no intent.
// A client can only press a button the message shows: an error says when
// there is none. It returns the interaction's token.
func (s *Server) Click(u User, channel, msg, customID string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[channel]
	if !ok {
		return "", fmt.Errorf("discord fake: no channel %s", channel)
	}
	m := s.findLocked(ch.ID, msg)
	if m == nil {
		return "", fmt.Errorf("discord fake: no message %s in %s", msg, channel)
	}
	found := false
	for _, r := range m.Components {
		for _, b := range r.Components {
			found = found || b.CustomID == customID && !b.Disabled
		}
	}
	if !found {
		return "", fmt.Errorf("discord fake: message %s has no button %q", msg, customID)
	}
	token := "aW50ZXJhY3Rpb24" + randomHex(16)
	s.interactions[token] = &interaction{channel: ch.ID, message: m.ID}
	in := map[string]any{
		"id": s.snowflakeLocked(), "application_id": s.AppID, "type": 3, "token": token, "version": 1,
		"channel_id": ch.ID, "channel": map[string]any{"id": ch.ID, "type": ch.Type},
		"data":    map[string]any{"custom_id": customID, "component_type": 2},
		"message": *m, "locale": "en-US", "app_permissions": "0", "entitlements": []any{}, "authorizing_integration_owners": map[string]any{},
	}
	if ch.GuildID != "" {
		in["guild_id"] = ch.GuildID
		in["member"] = map[string]any{"user": u, "roles": []string{}, "joined_at": time.Now().UTC().Format(time.RFC3339Nano),
			"deaf": false, "mute": false, "permissions": "0"}
	} else {
		in["user"] = u
	}
	for _, sess := range s.sessions {
		s.emitLocked(sess, "INTERACTION_CREATE", in)
	}
	s.notifyLocked()
	return token, nil
}
