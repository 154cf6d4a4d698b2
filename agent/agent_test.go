package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/fake"
)

var (
	user = conch.UserKey{Channel: conch.ChannelCLI, ID: "alice"}
	conv = conch.ConversationKey{Channel: conch.ChannelCLI, ID: "alice"}
)

type harness struct {
	model  *fake.Model
	rec    *fake.Recorder
	facts  *fake.Facts
	sleeps []time.Duration
	agent  *Agent
}

func newHarness(t *testing.T, tools []conch.Tool, mod func(*Options)) *harness {
	t.Helper()
	h := &harness{model: &fake.Model{}, rec: &fake.Recorder{}, facts: &fake.Facts{}}
	opts := Options{
		Model: h.model, Tools: tools, Store: h.rec, Facts: h.facts,
		MaxTurns: 10, MaxToolErrors: 3,
		Retry: RetryPolicy{Max: 3, Base: 100 * time.Millisecond, Cap: 10 * time.Second},
		Sleep: func(ctx context.Context, d time.Duration) error { h.sleeps = append(h.sleeps, d); return ctx.Err() },
	}
	if mod != nil {
		mod(&opts)
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	a.rnd = func() float64 { return 1 } // deterministic: the full backoff
	h.agent = a
	return h
}

func (h *harness) run(t *testing.T, text string) (Result, error) {
	t.Helper()
	h.rec.AddTurn(1, conch.Message{Role: conch.RoleUser, Text: text})
	return h.agent.Run(context.Background(), Input{
		Turn: 1,
		Env:  conch.ToolEnv{Conversation: conv, User: user, Facts: h.facts},
	})
}

func echoTool(name string) *fake.Tool {
	return &fake.Tool{Name: name, Fn: func(_ context.Context, _ conch.ToolEnv, args json.RawMessage) (conch.ToolOutput, error) {
		return conch.ToolOK("ran " + string(args)), nil
	}}
}

func failTool(name string) *fake.Tool {
	return &fake.Tool{Name: name, Fn: func(context.Context, conch.ToolEnv, json.RawMessage) (conch.ToolOutput, error) {
		return conch.ToolFail("exit status 2: no such file"), nil
	}}
}

func TestTextAnswer(t *testing.T) {
	h := newHarness(t, nil, nil)
	h.model.Push(fake.Text("hello"))
	res, err := h.run(t, "hi")
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "hello" || res.Stopped != StopNone {
		t.Fatalf("got %+v, want text hello and no stop", res)
	}
	if got := h.rec.Messages; len(got) != 1 || got[0].Role != conch.RoleAssistant {
		t.Fatalf("recorded %+v, want one assistant message", got)
	}
}

func TestToolRoundTrip(t *testing.T) {
	h := newHarness(t, []conch.Tool{echoTool("bash")}, nil)
	h.model.Push(fake.Call("c1", "bash", `{"command":"ls"}`), fake.Text("done"))
	res, err := h.run(t, "list")
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "done" {
		t.Fatalf("got %q, want done", res.Text)
	}
	reqs := h.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("got %d model calls, want 2", len(reqs))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != conch.RoleTool || last.ToolResult.CallID != "c1" || !strings.Contains(last.ToolResult.Content, "ls") {
		t.Fatalf("second request ends with %+v, want the tool result of c1", last)
	}
	if len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Name != "bash" {
		t.Fatalf("tools sent %+v, want bash", reqs[0].Tools)
	}
	want := []conch.StepKind{conch.StepModelCall, conch.StepToolCall, conch.StepToolResult, conch.StepModelCall}
	if got := h.rec.StepKinds(); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
}

func TestBreakers(t *testing.T) {
	tests := []struct {
		name    string
		tools   []conch.Tool
		script  []fake.Reply
		want    StopReason
		wantMsg string
	}{
		{
			name:  "same call twice in a row",
			tools: []conch.Tool{echoTool("bash")},
			script: []fake.Reply{
				fake.Call("c1", "bash", `{"command":"ls","x":1}`),
				fake.Call("c2", "bash", `{"x":1, "command":"ls"}`), // same arguments, other key order
			},
			want: StopRepeatedCall, wantMsg: "repeat the same `bash` call",
		},
		{
			name:  "three consecutive tool errors",
			tools: []conch.Tool{failTool("bash")},
			script: []fake.Reply{
				fake.Call("c1", "bash", `{"command":"a"}`),
				fake.Call("c2", "bash", `{"command":"b"}`),
				fake.Call("c3", "bash", `{"command":"c"}`),
			},
			want: StopToolErrors, wantMsg: "3 tool errors in a row",
		},
		{
			name:  "max turns",
			tools: []conch.Tool{echoTool("bash")},
			script: func() []fake.Reply {
				var r []fake.Reply
				for i := range 10 {
					r = append(r, fake.Call(fmt.Sprint("c", i), "bash", fmt.Sprintf(`{"command":"echo %d"}`, i)))
				}
				return r
			}(),
			want: StopMaxTurns, wantMsg: "after 10 steps",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.tools, nil)
			h.model.Push(tt.script...)
			res, err := h.run(t, "go")
			if err != nil {
				t.Fatal(err)
			}
			if res.Stopped != tt.want {
				t.Fatalf("stopped %q, want %q", res.Stopped, tt.want)
			}
			if !strings.Contains(res.Text, tt.wantMsg) {
				t.Fatalf("message %q, want it to contain %q", res.Text, tt.wantMsg)
			}
			kinds := h.rec.StepKinds()
			if kinds[len(kinds)-1] != conch.StepStopped {
				t.Fatalf("last step %v, want stopped", kinds[len(kinds)-1])
			}
			// Every recorded tool call has a result, so the history is valid.
			if err := checkAnswered(h.rec.Messages); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestToolErrorsResetOnSuccess(t *testing.T) {
	calls := 0
	flaky := &fake.Tool{Name: "bash", Fn: func(context.Context, conch.ToolEnv, json.RawMessage) (conch.ToolOutput, error) {
		calls++
		if calls%3 == 0 {
			return conch.ToolOK("ok"), nil
		}
		return conch.ToolFail("failed"), nil
	}}
	h := newHarness(t, []conch.Tool{flaky}, nil)
	for i := range 6 {
		h.model.Push(fake.Call(fmt.Sprint(i), "bash", fmt.Sprintf(`{"n":%d}`, i)))
	}
	h.model.Push(fake.Text("finished"))
	res, err := h.run(t, "go")
	if err != nil || res.Stopped != StopNone || res.Text != "finished" {
		t.Fatalf("got %+v, %v; want finished without a stop (errors were never 3 in a row)", res, err)
	}
}

func TestModelErrors(t *testing.T) {
	transient := func(status int, after time.Duration) error {
		return &conch.ModelError{Kind: conch.KindTransient, Status: status, RetryAfter: after}
	}
	tests := []struct {
		name       string
		script     []fake.Reply
		wantErr    conch.ErrorKind
		wantText   string
		wantSleeps []time.Duration
		wantCalls  int
	}{
		{
			name:       "429 honours Retry-After",
			script:     []fake.Reply{fake.Fail(transient(429, 3*time.Second)), fake.Text("ok")},
			wantText:   "ok",
			wantSleeps: []time.Duration{3 * time.Second},
			wantCalls:  2,
		},
		{
			name:       "5xx backs off exponentially",
			script:     []fake.Reply{fake.Fail(transient(500, 0)), fake.Fail(transient(503, 0)), fake.Fail(transient(502, 0)), fake.Text("ok")},
			wantText:   "ok",
			wantSleeps: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond},
			wantCalls:  4,
		},
		{
			name:       "connection reset is transient",
			script:     []fake.Reply{fake.Fail(fmt.Errorf("post: %w", io.ErrUnexpectedEOF)), fake.Text("ok")},
			wantText:   "ok",
			wantSleeps: []time.Duration{100 * time.Millisecond},
			wantCalls:  2,
		},
		{
			name:       "retries exhausted",
			script:     []fake.Reply{fake.Fail(transient(500, 0)), fake.Fail(transient(500, 0)), fake.Fail(transient(500, 0)), fake.Fail(transient(500, 0))},
			wantErr:    conch.KindTransient,
			wantSleeps: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond},
			wantCalls:  4,
		},
		{
			name:      "Retry-After beyond the cap ends the turn",
			script:    []fake.Reply{fake.Fail(transient(429, time.Hour))},
			wantErr:   conch.KindTransient,
			wantCalls: 1,
		},
		{
			name:      "auth is fatal",
			script:    []fake.Reply{fake.Fail(&conch.ModelError{Kind: conch.KindAuth, Status: 401})},
			wantErr:   conch.KindAuth,
			wantCalls: 1,
		},
		{
			name:      "bad request is fatal",
			script:    []fake.Reply{fake.Fail(&conch.ModelError{Kind: conch.KindBadRequest, Status: 400})},
			wantErr:   conch.KindBadRequest,
			wantCalls: 1,
		},
		{
			name:      "context too long is fatal",
			script:    []fake.Reply{fake.Fail(&conch.ModelError{Kind: conch.KindContextTooLong, Status: 400})},
			wantErr:   conch.KindContextTooLong,
			wantCalls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, nil)
			h.model.Push(tt.script...)
			res, err := h.run(t, "hi")
			if got := conch.KindOf(err); got != tt.wantErr {
				t.Fatalf("error kind %q (%v), want %q", got, err, tt.wantErr)
			}
			if res.Text != tt.wantText {
				t.Fatalf("text %q, want %q", res.Text, tt.wantText)
			}
			if !slices.Equal(h.sleeps, tt.wantSleeps) {
				t.Fatalf("slept %v, want %v", h.sleeps, tt.wantSleeps)
			}
			if got := len(h.model.Requests()); got != tt.wantCalls {
				t.Fatalf("%d model calls, want %d", got, tt.wantCalls)
			}
			if err != nil && conch.UserMessage(err) == "" {
				t.Fatal("no user message for the error")
			}
		})
	}
}

func TestUserMessagesAreSafe(t *testing.T) {
	err := fmt.Errorf("model call: %w", &conch.ModelError{Kind: conch.KindAuth, Status: 401, Message: "invalid key sk-secret"})
	if msg := conch.UserMessage(err); strings.Contains(msg, "sk-secret") || !strings.Contains(msg, "API key") {
		t.Fatalf("user message %q leaks detail or misses the hint", msg)
	}
}

func TestToolFailuresTheModelSees(t *testing.T) {
	h := newHarness(t, []conch.Tool{echoTool("bash")}, nil)
	h.model.Push(fake.Call("c1", "nosuch", `{}`), fake.Call("c2", "bash", `{not json`), fake.Text("ok"))
	res, err := h.run(t, "go")
	if err != nil || res.Text != "ok" {
		t.Fatalf("got %+v, %v", res, err)
	}
	var results []string
	for _, m := range h.rec.Messages {
		if m.ToolResult != nil {
			if !m.ToolResult.IsError {
				t.Errorf("result %q not marked as error", m.ToolResult.Content)
			}
			results = append(results, m.ToolResult.Content)
		}
	}
	if len(results) != 2 || !strings.Contains(results[0], "unknown tool") || !strings.Contains(results[1], "not valid JSON") {
		t.Fatalf("results %q, want unknown tool and invalid JSON", results)
	}
}

func TestBrokenToolEndsTurn(t *testing.T) {
	broken := &fake.Tool{Name: "bash", Fn: func(context.Context, conch.ToolEnv, json.RawMessage) (conch.ToolOutput, error) {
		return conch.ToolOutput{}, errors.New("engine socket gone")
	}}
	h := newHarness(t, []conch.Tool{broken}, nil)
	h.model.Push(fake.Call("c1", "bash", `{}`))
	_, err := h.run(t, "go")
	if err == nil || !strings.Contains(err.Error(), "engine socket gone") {
		t.Fatalf("got %v, want the tool's error", err)
	}
	if err := checkAnswered(h.rec.Messages); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryInSystemPrompt(t *testing.T) {
	h := newHarness(t, nil, nil)
	if err := h.facts.Remember(context.Background(), user, "name", "Alice"); err != nil {
		t.Fatal(err)
	}
	h.model.Push(fake.Text("hi Alice"))
	if _, err := h.run(t, "hi"); err != nil {
		t.Fatal(err)
	}
	sys := h.model.Requests()[0].System
	if !strings.Contains(sys, "<memory>\n- name: Alice\n</memory>") {
		t.Fatalf("system prompt %q lacks the memory block", sys)
	}
}

func TestResumedTurnWithStoredAnswerDoesNotCallModel(t *testing.T) {
	h := newHarness(t, nil, nil)
	h.rec.AddTurn(1, conch.Message{Role: conch.RoleUser, Text: "hi"}, conch.Message{Role: conch.RoleAssistant, Text: "stored answer"})
	res, err := h.agent.Run(context.Background(), Input{Turn: 1, Env: conch.ToolEnv{Conversation: conv}})
	if err != nil || res.Text != "stored answer" {
		t.Fatalf("got %+v, %v", res, err)
	}
	if n := len(h.model.Requests()); n != 0 {
		t.Fatalf("%d model calls, want 0", n)
	}
}

// unbounded is a store whose view ignores the turn bound, as a store that
// orders by turn id would when a later turn ran first.
type unbounded struct{ *fake.Recorder }

func (u unbounded) ModelHistory(ctx context.Context, key conch.ConversationKey, _ conch.TurnID) (conch.ModelHistory, error) {
	return u.Recorder.ModelHistory(ctx, key, 0)
}

// A view that ends with another turn's answer is not this turn's answer:
// the model is asked (before, turn 5 returned turn 6's reply as its own).
func TestAnotherTurnsAnswerIsNotThisTurns(t *testing.T) {
	h := newHarness(t, nil, func(o *Options) { o.Store = unbounded{o.Store.(*fake.Recorder)} })
	h.rec.AddTurn(5, conch.Message{Role: conch.RoleUser, Text: "first"})
	h.rec.AddTurn(6, conch.Message{Role: conch.RoleUser, Text: "second"}, conch.Message{Role: conch.RoleAssistant, Text: "answer to second"})
	h.model.Push(fake.Text("answer to first"))
	res, err := h.agent.Run(context.Background(), Input{Turn: 5, Env: conch.ToolEnv{Conversation: conv}})
	if err != nil || res.Text != "answer to first" {
		t.Fatalf("got %+v, %v; want the model's answer to the first message", res, err)
	}
	if n := len(h.model.Requests()); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
}

// A turn whose message is not stored is refused, not run on someone
// else's history.
func TestTurnWithoutItsMessageIsRefused(t *testing.T) {
	h := newHarness(t, nil, nil)
	h.rec.AddTurn(1, conch.Message{Role: conch.RoleUser, Text: "hi"}, conch.Message{Role: conch.RoleAssistant, Text: "hello"})
	_, err := h.agent.Run(context.Background(), Input{Turn: 2, Env: conch.ToolEnv{Conversation: conv}})
	if err == nil || !strings.Contains(err.Error(), "not in the history") {
		t.Fatalf("got %v, want a refusal", err)
	}
	if n := len(h.model.Requests()); n != 0 {
		t.Fatalf("%d model calls, want 0", n)
	}
}

func TestRepairHistory(t *testing.T) {
	call := func(id string) conch.ToolCall {
		return conch.ToolCall{ID: id, Name: "bash", Arguments: json.RawMessage(`{}`)}
	}
	result := func(id string) conch.Message {
		return conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: id, Name: "bash", Content: "ok"}}
	}
	in := []conch.Message{
		{Role: conch.RoleUser, Text: "go"},
		{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{call("a"), call("b")}},
		result("a"),
		result("zz"), // orphan result
		// crash: b never answered
		{Role: conch.RoleUser, Text: "again"},
	}
	out := repairHistory(in)
	if err := checkAnswered(out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 5 || out[3].ToolResult.CallID != "b" || !strings.Contains(out[3].ToolResult.Content, "interrupted") {
		t.Fatalf("got %+v", out)
	}
	if len(in) != 5 || in[3].ToolResult.CallID != "zz" {
		t.Fatal("input modified")
	}
}

func TestCancelledTurn(t *testing.T) {
	h := newHarness(t, nil, nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	stopped := errors.New("stopped by /stop")
	cancel(stopped)
	h.rec.AddTurn(1, conch.Message{Role: conch.RoleUser, Text: "hi"})
	_, err := h.agent.Run(ctx, Input{Turn: 1, Env: conch.ToolEnv{Conversation: conv}})
	if !errors.Is(err, stopped) {
		t.Fatalf("got %v, want the cancel cause", err)
	}
	if len(h.sleeps) != 0 {
		t.Fatal("a cancelled call was retried")
	}
}

// checkAnswered verifies every tool call has exactly one result.
func checkAnswered(msgs []conch.Message) error {
	open := map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			open[c.ID] = true
		}
		if m.ToolResult != nil {
			if !open[m.ToolResult.CallID] {
				return fmt.Errorf("result for unknown or answered call %q", m.ToolResult.CallID)
			}
			delete(open, m.ToolResult.CallID)
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("calls without result: %v", open)
	}
	return nil
}
