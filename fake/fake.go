// Package fake has small fakes of the root interfaces, for unit tests of
// logic. End-to-end tests use the real components from internal/testenv.
package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"conch"
)

// Reply is one scripted model answer.
type Reply struct {
	Resp conch.ModelResponse
	Err  error
}

// Model answers from a script and records every request.
type Model struct {
	mu       sync.Mutex
	script   []Reply
	requests []conch.ModelRequest
	// Func, when set, answers requests after the script is used up. It
	// is called without the lock held, so it may block.
	Func func(context.Context, conch.ModelRequest) (conch.ModelResponse, error)
	// Label is the model's Name ("fake" when empty).
	Label string
}

var _ conch.Model = (*Model)(nil)

// Push appends replies to the script.
func (m *Model) Push(r ...Reply) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.script = append(m.script, r...)
}

// Name implements conch.Model.
func (m *Model) Name() string {
	if m.Label != "" {
		return m.Label
	}
	return "fake"
}

// Generate implements conch.Model.
func (m *Model) Generate(ctx context.Context, req conch.ModelRequest) (conch.ModelResponse, error) {
	if err := ctx.Err(); err != nil {
		return conch.ModelResponse{}, err
	}
	m.mu.Lock()
	req.Messages = slices.Clone(req.Messages)
	m.requests = append(m.requests, req)
	if len(m.script) == 0 {
		fn, n := m.Func, len(m.requests)
		m.mu.Unlock()
		if fn != nil {
			return fn(ctx, req)
		}
		return conch.ModelResponse{}, fmt.Errorf("fake model: script exhausted after %d requests", n)
	}
	r := m.script[0]
	m.script = m.script[1:]
	m.mu.Unlock()
	return r.Resp, r.Err
}

// Requests returns the requests received so far.
func (m *Model) Requests() []conch.ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests)
}

// Text is a reply with only text.
func Text(s string) Reply {
	return Reply{Resp: conch.ModelResponse{Text: s, StopReason: conch.StopEnd}}
}

// Call is a reply with one tool call.
func Call(id, name, args string) Reply {
	return Reply{Resp: conch.ModelResponse{
		ToolCalls:  []conch.ToolCall{{ID: id, Name: name, Arguments: json.RawMessage(args)}},
		StopReason: conch.StopToolUse,
	}}
}

// Fail is a reply that fails.
func Fail(err error) Reply { return Reply{Err: err} }

// Tool is a tool whose behaviour is a function.
type Tool struct {
	Name string
	Fn   func(ctx context.Context, env conch.ToolEnv, args json.RawMessage) (conch.ToolOutput, error)
}

var _ conch.Tool = (*Tool)(nil)

// Spec implements conch.Tool.
func (t *Tool) Spec() conch.ToolSpec {
	return conch.ToolSpec{Name: t.Name, Description: "fake tool " + t.Name, Parameters: json.RawMessage(`{"type":"object"}`)}
}

// Run implements conch.Tool.
func (t *Tool) Run(ctx context.Context, env conch.ToolEnv, args json.RawMessage) (conch.ToolOutput, error) {
	return t.Fn(ctx, env, args)
}

// Recorder is an in-memory agent store of one conversation: the person's
// messages are added with AddTurn, what turns append is kept in Messages
// (and in the history), steps in Steps.
type Recorder struct {
	mu sync.Mutex
	// Messages are the messages turns appended, in order.
	Messages []conch.Message
	Steps    []conch.Step
	history  []recorded
}

type recorded struct {
	turn conch.TurnID
	msg  conch.Message
}

// AddTurn stores msgs as turn's messages: the person's message first, then
// whatever the turn produced before (a turn resumed after a restart).
func (r *Recorder) AddTurn(turn conch.TurnID, msgs ...conch.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.history = append(r.history, recorded{turn, m})
	}
}

// ModelHistory returns the stored messages of turns up to through (0: all),
// turn by turn in the order they were stored, without a summary.
func (r *Recorder) ModelHistory(_ context.Context, _ conch.ConversationKey, through conch.TurnID) (conch.ModelHistory, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	idx := make([]int, 0, len(r.history))
	for i, h := range r.history {
		if through <= 0 || h.turn <= through {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return r.history[idx[a]].turn < r.history[idx[b]].turn })
	var h conch.ModelHistory
	for _, i := range idx {
		h.Messages = append(h.Messages, r.history[i].msg)
		h.Pos = append(h.Pos, conch.HistoryPos{Turn: r.history[i].turn, Message: conch.MessageID(i + 1)})
	}
	return h, nil
}

// AppendMessage records m as a message of turn id.
func (r *Recorder) AppendMessage(_ context.Context, id conch.TurnID, m conch.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Messages = append(r.Messages, m)
	r.history = append(r.history, recorded{id, m})
	return nil
}

// RecordStep records s.
func (r *Recorder) RecordStep(_ context.Context, s conch.Step) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Steps = append(r.Steps, s)
	return nil
}

// StepKinds returns the kinds of the recorded steps in order.
func (r *Recorder) StepKinds() []conch.StepKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	kinds := make([]conch.StepKind, len(r.Steps))
	for i, s := range r.Steps {
		kinds[i] = s.Kind
	}
	return kinds
}

// Channel records what is sent to it and delivers what tests inject.
type Channel struct {
	ChannelName conch.ChannelName
	// Renew is the channel's TypingEvery (0: the indicator stays).
	Renew   time.Duration
	mu      sync.Mutex
	sent    []conch.Outbound
	replies int // how many of sent are OutboundReply
	typing  map[conch.ConversationKey]bool
	shown   map[conch.ConversationKey]int
	notify  chan struct{}
	handler conch.Handler
	ready   chan struct{}
	once    sync.Once
}

var (
	_ conch.Channel       = (*Channel)(nil)
	_ conch.TypingChannel = (*Channel)(nil)
)

// NewChannel returns a fake channel with the given name.
func NewChannel(name conch.ChannelName) *Channel {
	return &Channel{ChannelName: name, typing: map[conch.ConversationKey]bool{}, notify: make(chan struct{}, 1), ready: make(chan struct{})}
}

// Name implements conch.Channel.
func (c *Channel) Name() conch.ChannelName { return c.ChannelName }

// Run implements conch.Channel: it keeps the handler for Deliver.
func (c *Channel) Run(ctx context.Context, h conch.Handler) error {
	c.mu.Lock()
	c.handler = h
	c.mu.Unlock()
	c.once.Do(func() { close(c.ready) })
	<-ctx.Done()
	return nil
}

// Send implements conch.Channel.
func (c *Channel) Send(_ context.Context, out conch.Outbound) error {
	c.mu.Lock()
	c.sent = append(c.sent, out)
	if out.Kind == conch.OutboundReply {
		c.replies++
	}
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
	return nil
}

// SetTyping implements conch.TypingChannel.
func (c *Channel) SetTyping(_ context.Context, key conch.ConversationKey, typing bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.typing[key] = typing
	if typing {
		if c.shown == nil {
			c.shown = map[conch.ConversationKey]int{}
		}
		c.shown[key]++
	}
	return nil
}

// TypingEvery implements conch.TypingChannel.
func (c *Channel) TypingEvery() time.Duration { return c.Renew }

// TypingShown counts the SetTyping(true) calls for key.
func (c *Channel) TypingShown(key conch.ConversationKey) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shown[key]
}

// Typing reports the last typing state of key.
func (c *Channel) Typing(key conch.ConversationKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.typing[key]
}

// Sent returns everything sent so far.
func (c *Channel) Sent() []conch.Outbound {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sent)
}

// WaitSent blocks until pred holds for the sent messages or ctx ends.
func (c *Channel) WaitSent(ctx context.Context, pred func([]conch.Outbound) bool) ([]conch.Outbound, error) {
	for {
		s := c.Sent()
		if pred(s) {
			return s, nil
		}
		select {
		case <-c.notify:
		case <-ctx.Done():
			return s, fmt.Errorf("wait for sent messages: %w (have %d)", ctx.Err(), len(s))
		}
	}
}

// WaitReplies blocks until at least n replies (OutboundReply) were sent or
// ctx ends. Unlike WaitSent it copies nothing: benchmarks wait with it.
func (c *Channel) WaitReplies(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		have := c.replies
		c.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-c.notify:
		case <-ctx.Done():
			return fmt.Errorf("wait for %d replies: %w (have %d)", n, ctx.Err(), have)
		}
	}
}

// Facts is an in-memory conch.FactStore.
type Facts struct {
	mu sync.Mutex
	m  map[conch.UserKey][]conch.Fact
}

var _ conch.FactStore = (*Facts)(nil)

// Remember implements conch.FactStore.
func (f *Facts) Remember(_ context.Context, u conch.UserKey, key, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[conch.UserKey][]conch.Fact{}
	}
	fs := f.m[u]
	for i := range fs {
		if fs[i].Key == key {
			fs[i].Value = value
			return nil
		}
	}
	f.m[u] = append(fs, conch.Fact{Key: key, Value: value})
	return nil
}

// Forget implements conch.FactStore.
func (f *Facts) Forget(_ context.Context, u conch.UserKey, key string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fs := f.m[u]
	for i := range fs {
		if fs[i].Key == key {
			f.m[u] = slices.Delete(fs, i, i+1)
			return true, nil
		}
	}
	return false, nil
}

// Facts implements conch.FactStore.
func (f *Facts) Facts(_ context.Context, u conch.UserKey) ([]conch.Fact, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.m[u]), nil
}
