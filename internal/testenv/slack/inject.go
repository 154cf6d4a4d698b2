package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"path"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Person adds a member of the workspace and returns them.
func (s *Server) Person(id, name string) User {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := User{ID: id, Team: s.TeamID, Name: name, Real: strings.ToUpper(name[:1]) + name[1:]}
	s.users[id] = u
	return u
}

// DM is the direct-message channel between u and the bot ("D…").
func (s *Server) DM(u User) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := "D" + strings.TrimPrefix(u.ID, "U")
	if _, ok := s.channels[id]; !ok {
		s.channels[id] = &channelInfo{ID: id, Name: id, Type: "im", User: u.ID}
	}
	return id
}

// Channel adds a public channel the bot is a member of ("C…").
func (s *Server) Channel(id, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[id] = &channelInfo{ID: id, Name: name, Type: "channel"}
	return id
}

// PostOption changes a message a person posts.
type PostOption func(*Message, *Server)

// InThread posts the message as a reply in the thread of ts.
func InThread(ts string) PostOption {
	return func(m *Message, _ *Server) { m.ThreadTS = ts }
}

// WithFile shares a file with the message (subtype file_share).
func WithFile(name string, data []byte) PostOption {
	return func(m *Message, s *Server) {
		id := s.idLocked("F")
		mt := mime.TypeByExtension(path.Ext(name))
		if mt == "" {
			mt = "application/octet-stream"
		}
		mt, _, _ = strings.Cut(mt, ";")
		f := &File{ID: id, Name: name, Title: name, Mimetype: mt, Filetype: strings.TrimPrefix(path.Ext(name), "."),
			Size: len(data), User: m.User, data: data,
			URLPrivate:         s.URL + "/files-pri/" + id + "/" + name,
			URLPrivateDownload: s.URL + "/files-pri/" + id + "/" + name}
		s.files[id] = f
		m.Files = append(m.Files, *f)
		m.Subtype = "file_share"
	}
}

// Post is a message from u in channel; it returns the message's ts. The
// bot learns of it through an events_api envelope (message, and
// app_mention when the text mentions the bot outside a DM).
func (s *Server) Post(u User, channel, text string, opts ...PostOption) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[channel]
	if !ok {
		panic("slack fake: post to unknown channel " + channel)
	}
	m := &Message{Type: "message", User: u.ID, Team: u.Team, Text: text, TS: s.tsLocked()}
	for _, o := range opts {
		o(m, s)
	}
	s.addLocked(ch, m)
	return m.TS
}

var mentionRE = regexp.MustCompile(`<@([UW][A-Z0-9]+)(\|[^>]*)?>`)

// addLocked stores a message and raises its events.
func (s *Server) addLocked(ch *channelInfo, m *Message) {
	s.msgs[ch.ID] = append(s.msgs[ch.ID], m)
	if m.ThreadTS != "" {
		if root := s.findLocked(ch.ID, m.ThreadTS); root != nil && root != m {
			root.ReplyCount++
			if root.ThreadTS == "" {
				root.ThreadTS = root.TS
			}
		}
	}
	ev := map[string]any{"type": "message", "channel": ch.ID, "user": m.User, "text": m.Text, "ts": m.TS,
		"event_ts": m.TS, "channel_type": ch.Type, "team": m.Team}
	if m.Subtype != "" {
		ev["subtype"] = m.Subtype
	}
	if m.ThreadTS != "" {
		ev["thread_ts"] = m.ThreadTS
	}
	if len(m.Files) > 0 {
		ev["files"] = m.Files
	}
	if m.BotID != "" {
		ev["bot_id"] = m.BotID
		ev["app_id"] = m.AppID
		ev["bot_profile"] = map[string]any{"id": m.BotID, "app_id": s.AppID, "name": s.Bot.Name, "team_id": s.TeamID}
	} else {
		ev["client_msg_id"] = randomHex(4) + "-" + randomHex(2) + "-" + randomHex(2) + "-" + randomHex(2) + "-" + randomHex(6)
	}
	s.eventLocked(ev)
	if ch.Type == "im" || m.BotID != "" {
		return
	}
	for _, g := range mentionRE.FindAllStringSubmatch(m.Text, -1) {
		if g[1] == s.Bot.ID {
			am := map[string]any{"type": "app_mention", "user": m.User, "text": m.Text, "ts": m.TS, "channel": ch.ID,
				"event_ts": m.TS, "team": m.Team}
			if m.ThreadTS != "" {
				am["thread_ts"] = m.ThreadTS
			}
			if len(m.Files) > 0 {
				am["files"] = m.Files
			}
			s.eventLocked(am)
			break
		}
	}
}

// Click presses the button whose action_id is actionID on the bot's
// message ts in channel, as u would in a client, and queues the
// block_actions interaction (Socket Mode envelope type "interactive"). A
// client can only press a button the message shows: an error says when
// there is none. Interactions over the Events API's request URL are not
// modelled.
func (s *Server) Click(u User, channel, ts, actionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[channel]
	if !ok {
		return fmt.Errorf("slack fake: no channel %s", channel)
	}
	m := s.findLocked(ch.ID, ts)
	if m == nil {
		return fmt.Errorf("slack fake: no message %s in %s", ts, channel)
	}
	var blocks []struct {
		BlockID  string `json:"block_id"`
		Elements []struct {
			Type     string          `json:"type"`
			ActionID string          `json:"action_id"`
			Value    string          `json:"value"`
			Text     json.RawMessage `json:"text"`
		} `json:"elements"`
	}
	_ = json.Unmarshal(m.Blocks, &blocks)
	var action map[string]any
	for _, b := range blocks {
		for _, e := range b.Elements {
			if e.Type == "button" && e.ActionID == actionID {
				action = map[string]any{"type": "button", "action_id": e.ActionID, "block_id": b.BlockID, "value": e.Value,
					"text": e.Text, "action_ts": fmt.Sprintf("%d.%06d", time.Now().Unix(), time.Now().Nanosecond()/1000)}
			}
		}
	}
	if action == nil {
		return fmt.Errorf("slack fake: message %s has no button %q", ts, actionID)
	}
	payload := map[string]any{
		"type":       "block_actions",
		"user":       map[string]any{"id": u.ID, "username": u.Name, "name": u.Name, "team_id": u.Team},
		"api_app_id": s.AppID, "token": "fake-verification-token",
		"container":    map[string]any{"type": "message", "message_ts": m.TS, "channel_id": ch.ID, "is_ephemeral": false},
		"trigger_id":   randomHex(6) + "." + randomHex(6),
		"team":         map[string]any{"id": s.TeamID, "domain": "conch-test"},
		"channel":      map[string]any{"id": ch.ID, "name": ch.ID},
		"message":      m,
		"response_url": s.URL + "/actions/" + randomHex(8),
		"actions":      []any{action},
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	if s.eventsURL != "" {
		// The Events API's app gets presses at its Interactivity Request
		// URL: a signed form, payload=<json>, not retried.
		if s.interactionsURL == "" {
			return fmt.Errorf("slack fake: no interactivity request URL (DeliverInteractions)")
		}
		go s.postInteraction(s.interactionsURL, s.signingSecret, b)
		return nil
	}
	s.enqueueTypeLocked(b, "interactive")
	s.notifyLocked()
	return nil
}

// eventLocked wraps an event in an event_callback and queues its envelope.
func (s *Server) eventLocked(ev map[string]any) {
	payload := map[string]any{
		"token": "fake-verification-token", "team_id": s.TeamID, "context_team_id": s.TeamID,
		"api_app_id": s.AppID, "event": ev, "type": "event_callback",
		"event_id": s.idLocked("Ev"), "event_time": time.Now().Unix(),
		"authorizations": []map[string]any{{"enterprise_id": nil, "team_id": s.TeamID, "user_id": s.Bot.ID,
			"is_bot": true, "is_enterprise_install": false}},
		"is_ext_shared_channel": false,
	}
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	s.enqueueLocked(b)
	s.notifyLocked()
}

func (s *Server) findLocked(channel, ts string) *Message {
	for _, m := range s.msgs[channel] {
		if m.TS == ts {
			return m
		}
	}
	return nil
}

// Messages are the bot's messages in channel (as they are now: edits
// applied), in order; thread "" means all, else only that thread's.
func (s *Server) Messages(channel, thread string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.msgs[channel] {
		if m.User == s.Bot.ID && (thread == "" || m.ThreadTS == thread) {
			out = append(out, *m)
		}
	}
	return out
}

// Message is one message of channel by ts.
func (s *Server) Message(channel, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.findLocked(channel, ts)
	if m == nil {
		return Message{}, false
	}
	return *m, true
}

// Sent is everything the bot did in channel ("" = everywhere), in order.
func (s *Server) Sent(channel string) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	for _, x := range s.sent {
		if channel == "" || x.Channel == channel {
			out = append(out, x)
		}
	}
	return out
}

// Calls are the requests of method ("" = all), in order.
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Unacked is how many envelopes wait for their ack.
func (s *Server) Unacked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.envelopes {
		if !e.acked {
			n++
		}
	}
	return n
}

// Redelivered is how many deliveries were repeats.
func (s *Server) Redelivered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.envelopes {
		n += e.Retries
	}
	return n
}

// Connections is how many sockets are open; Opened how many were ever.
func (s *Server) Connections() (open, opened int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns), s.opened
}

// FileData is the content of an uploaded or shared file.
func (s *Server) FileData(id string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.files[id]; ok {
		return f.data
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

// WaitMessages waits until the bot has at least n messages in channel
// (thread as for Messages) and returns them.
func (s *Server) WaitMessages(tb testing.TB, channel, thread string, n int, timeout time.Duration) []Message {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.Wait(ctx, func() bool { return len(s.Messages(channel, thread)) >= n }); err != nil {
		tb.Fatalf("slack fake: %d message(s) from the bot in %s, want %d: %+v", len(s.Messages(channel, thread)), channel, n, s.Messages(channel, thread))
	}
	return s.Messages(channel, thread)
}

// ThreadOf is a thread's messages (the root and its replies) in ts order.
func (s *Server) ThreadOf(channel, root string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.msgs[channel] {
		if m.TS == root || m.ThreadTS == root {
			out = append(out, *m)
		}
	}
	return out
}
