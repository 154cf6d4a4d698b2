package web

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"conch"
)

// fakeHub is a small conch.EventSource: per-conversation Seq, the last keep
// events of each conversation kept, subscribers cut off when they fall
// behind, as the gateway's hub promises.
type fakeHub struct {
	mu     sync.Mutex
	keep   int
	buf    int
	events map[conch.ConversationKey][]conch.Event
	last   map[conch.ConversationKey]int64
	subs   map[*fakeSub]bool
}

type fakeSub struct {
	key conch.ConversationKey
	ch  chan conch.Event
}

var _ conch.EventSource = (*fakeHub)(nil)

func newFakeHub() *fakeHub {
	return &fakeHub{keep: 10000, buf: 4096, events: map[conch.ConversationKey][]conch.Event{}, last: map[conch.ConversationKey]int64{}, subs: map[*fakeSub]bool{}}
}

func (h *fakeHub) Publish(key conch.ConversationKey, turn conch.TurnID, d conch.EventData) conch.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	eph := conch.Ephemeral(d)
	if !eph {
		h.last[key]++
	}
	ev := conch.Event{Key: key, Turn: turn, Seq: h.last[key], At: time.Now(), Data: d}
	if !eph {
		evs := append(h.events[key], ev)
		if len(evs) > h.keep {
			evs = evs[len(evs)-h.keep:]
		}
		h.events[key] = evs
	}
	for s := range h.subs {
		if !s.key.IsZero() && s.key != key {
			continue
		}
		select {
		case s.ch <- ev:
		default: // fell behind: cut off
			delete(h.subs, s)
			close(s.ch)
		}
	}
	return ev
}

func (h *fakeHub) Subscribe(ctx context.Context, key conch.ConversationKey, after int64) (<-chan conch.Event, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var backlog []conch.Event
	if after >= 0 && !key.IsZero() {
		kept := h.events[key]
		if len(kept) > 0 && kept[0].Seq > after+1 {
			return nil, conch.Errorf(conch.KindNotFound, "events after %d are no longer kept", after)
		}
		for _, ev := range kept {
			if ev.Seq > after {
				backlog = append(backlog, ev)
			}
		}
	}
	s := &fakeSub{key: key, ch: make(chan conch.Event, len(backlog)+h.buf)}
	for _, ev := range backlog {
		s.ch <- ev
	}
	h.subs[s] = true
	go func() {
		<-ctx.Done()
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.subs[s] {
			delete(h.subs, s)
			close(s.ch)
		}
	}()
	return s.ch, nil
}

func (h *fakeHub) LastSeq(_ context.Context, key conch.ConversationKey) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last[key], nil
}

func (h *fakeHub) subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// fakeGateway answers like the gateway: it publishes the person's message,
// a running turn with streamed text and a tool call, then the answer.
// Commands get a notice. Duplicate external ids are stored once.
type fakeGateway struct {
	hub *fakeHub

	mu       sync.Mutex
	inbound  []conch.Inbound
	seen     map[string]bool
	turn     conch.TurnID
	stopped  []conch.ConversationKey
	reset    []conch.ConversationKey
	history  map[conch.ConversationKey][]conch.Message
	slowTurn chan struct{} // if set, a turn waits for it before answering
}

var (
	_ conch.Handler             = (*fakeGateway)(nil)
	_ conch.ConversationControl = (*fakeGateway)(nil)
)

func newFakeGateway(h *fakeHub) *fakeGateway {
	return &fakeGateway{hub: h, seen: map[string]bool{}, history: map[conch.ConversationKey][]conch.Message{}}
}

func (g *fakeGateway) HandleInbound(_ context.Context, in conch.Inbound) error {
	g.mu.Lock()
	if g.seen[in.ExternalID] {
		g.mu.Unlock()
		return nil
	}
	g.seen[in.ExternalID] = true
	g.inbound = append(g.inbound, in)
	if strings.HasPrefix(in.Text, "/") {
		g.mu.Unlock()
		g.hub.Publish(in.Key, 0, conch.NoticeEvent{Text: "Command **" + strings.TrimPrefix(in.Text, "/") + "** done."})
		return nil
	}
	g.turn++
	turn := g.turn
	g.history[in.Key] = append(g.history[in.Key], conch.Message{Role: conch.RoleUser, Text: in.Text})
	slow := g.slowTurn
	g.mu.Unlock()
	g.hub.Publish(in.Key, turn, conch.MessageEvent{Role: conch.RoleUser, Text: in.Text, Sender: in.Sender})
	g.hub.Publish(in.Key, turn, conch.TurnState{Status: conch.TurnPending, Queued: 1})
	go func() {
		if slow != nil {
			<-slow
		}
		answer := "You said: **" + in.Text + "**"
		g.hub.Publish(in.Key, turn, conch.TurnState{Status: conch.TurnRunning})
		g.hub.Publish(in.Key, turn, conch.TextDelta{Text: "You said: "})
		g.hub.Publish(in.Key, turn, conch.ToolStarted{CallID: "c1", Name: "bash", Summary: "echo hi"})
		code := 0
		g.hub.Publish(in.Key, turn, conch.ToolFinished{CallID: "c1", Name: "bash", Duration: 20 * time.Millisecond, ExitCode: &code, Summary: "hi"})
		g.hub.Publish(in.Key, turn, conch.TextDelta{Text: in.Text})
		g.mu.Lock()
		g.history[in.Key] = append(g.history[in.Key], conch.Message{Role: conch.RoleAssistant, Text: answer})
		g.mu.Unlock()
		g.hub.Publish(in.Key, turn, conch.MessageEvent{Role: conch.RoleAssistant, Text: answer})
		g.hub.Publish(in.Key, turn, conch.TurnState{Status: conch.TurnDone})
	}()
	return nil
}

func (g *fakeGateway) Admits(_ context.Context, ch conch.ChannelName, ids ...conch.UserID) bool {
	return ch == conch.ChannelWeb && len(ids) > 0 && ids[0] == "owner"
}

func (g *fakeGateway) ConversationClosed(context.Context, conch.ConversationKey) error { return nil }

func (g *fakeGateway) Stop(_ context.Context, key conch.ConversationKey) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = append(g.stopped, key)
	return true, nil
}

func (g *fakeGateway) Reset(_ context.Context, key conch.ConversationKey) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reset = append(g.reset, key)
	delete(g.history, key)
	return nil
}

func (g *fakeGateway) Status(_ context.Context, key conch.ConversationKey) string {
	return "idle: " + key.String()
}

func (g *fakeGateway) History(_ context.Context, key conch.ConversationKey) ([]conch.Message, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]conch.Message(nil), g.history[key]...), nil
}

func (g *fakeGateway) inbounds() []conch.Inbound {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]conch.Inbound(nil), g.inbound...)
}

// fakeRead is a conch.ReadModel.
type fakeRead struct {
	sums  []conch.ConversationSummary
	audit []conch.AuditRecord
}

var _ conch.ReadModel = (*fakeRead)(nil)

func (r *fakeRead) ConversationSummaries(_ context.Context, keys ...conch.ConversationKey) ([]conch.ConversationSummary, error) {
	if len(keys) == 0 {
		return r.sums, nil
	}
	var some []conch.ConversationSummary
	for _, s := range r.sums {
		if slices.Contains(keys, s.Key) {
			some = append(some, s)
		}
	}
	return some, nil
}

func (r *fakeRead) Turns(context.Context, conch.ConversationKey, int) ([]conch.Turn, error) {
	return nil, nil
}

func (r *fakeRead) AuditSince(_ context.Context, after int64, limit int) ([]conch.AuditRecord, error) {
	var out []conch.AuditRecord
	for _, a := range r.audit {
		if a.ID > after && len(out) < limit {
			out = append(out, a)
		}
	}
	return out, nil
}

// fakeSandboxes is a conch.SandboxAdmin.
type fakeSandboxes struct {
	mu      sync.Mutex
	infos   []conch.SandboxInfo
	removed []conch.ConversationKey
}

var _ conch.SandboxAdmin = (*fakeSandboxes)(nil)

func (s *fakeSandboxes) Sandboxes(context.Context) ([]conch.SandboxInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]conch.SandboxInfo(nil), s.infos...), nil
}

func (s *fakeSandboxes) SandboxInfo(_ context.Context, key conch.ConversationKey) (conch.SandboxInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.infos {
		if in.Key == key {
			return in, nil
		}
	}
	return conch.SandboxInfo{}, &conch.NoSandboxError{Key: key}
}

func (s *fakeSandboxes) Inspect(_ context.Context, ref string) (conch.SandboxDetails, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.infos {
		if in.Name == ref || in.Conversation == ref {
			return conch.SandboxDetails{SandboxInfo: in}, nil
		}
	}
	return conch.SandboxDetails{}, &conch.Error{Kind: conch.KindNotFound, Err: &conch.SandboxRefError{Ref: ref}}
}

func (s *fakeSandboxes) SandboxStats(context.Context, conch.ConversationKey) (conch.SandboxStats, error) {
	return conch.SandboxStats{CPUPercent: 12.5, MemoryBytes: 64 << 20, MemoryLimit: 512 << 20, PIDs: 7, PIDsLimit: 128, DiskBytes: -1}, nil
}

func (s *fakeSandboxes) Remove(_ context.Context, key conch.ConversationKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removed = append(s.removed, key)
	return nil
}

// fakeTerminals plays a terminal: a screen, then lines pushed on out.
type fakeTerminals struct {
	lines chan string
}

func (f *fakeTerminals) Terminals(context.Context, conch.ConversationKey) ([]int, error) {
	return []int{0, 1}, nil
}

func (f *fakeTerminals) FollowTerminal(ctx context.Context, _ conch.ConversationKey, n int, size func(cols, rows int), out func([]byte)) error {
	if n > 1 {
		return conch.Errorf(conch.KindNotFound, "no terminal %d", n)
	}
	size(80, 24)
	out([]byte("\x1b[32m$\x1b[0m "))
	for {
		select {
		case <-ctx.Done():
			return nil
		case l, ok := <-f.lines:
			if !ok {
				return nil
			}
			out([]byte(fmt.Sprintf("%s\r\n", l)))
		}
	}
}
