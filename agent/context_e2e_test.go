package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"conch"
	"conch/agent"
	"conch/internal/testenv/fakellm"
	"conch/llm/anthropic"
	"conch/llm/openai"
	"conch/sqlite"
	"conch/sqlite/sqlitetest"
)

// The context-management tests run the real OpenAI SDK against the
// wire-exact fake and the real SQLite store, with a small window.

const testWindow = 8192

var ctxKey = conch.ConversationKey{Channel: conch.ChannelCLI, ID: "long"}

// echoTool answers with n bytes: big enough that old results must be cut.
type echoTool struct{}

func (echoTool) Spec() conch.ToolSpec {
	return conch.ToolSpec{Name: "echo", Description: "echo bytes", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}
}

func (echoTool) Run(_ context.Context, _ conch.ToolEnv, args json.RawMessage) (conch.ToolOutput, error) {
	var a struct{ N int }
	if err := json.Unmarshal(args, &a); err != nil {
		return conch.ToolFail(err.Error()), nil
	}
	return conch.ToolOK("start " + strings.Repeat("output line\n", a.N/12) + " end"), nil
}

// script answers the fake: summary calls get a summary naming how many
// there were; turn N asks for tools on every third turn (a big result on
// every seventh), and answers otherwise.
type script struct {
	t         *testing.T
	mu        sync.Mutex
	summaries []string
	requests  int
	largest   int // the largest request, in the fake's tokens
	// onSummary, when set, answers a summary call instead.
	onSummary func() fakellm.Reply
}

func isSummaryCall(r fakellm.Request) bool {
	return strings.HasPrefix(r.System, agent.SummaryPrompt[:40])
}

func (s *script) reply(r fakellm.Request) fakellm.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	// Every request fits the window by the fake's own count (bytes/4 of
	// the whole body: schemas, JSON framing and all).
	s.largest = max(s.largest, len(r.Body)/4)
	if got := len(r.Body) / 4; got > testWindow {
		s.t.Errorf("request %d is %d tokens (%d bytes), over the window of %d", s.requests, got, len(r.Body), testWindow)
	}
	if isSummaryCall(r) {
		if s.onSummary != nil {
			return s.onSummary()
		}
		text := fmt.Sprintf("SUMMARY#%d: the person counts turns;", len(s.summaries)+1) + strings.Repeat(" details", 60)
		s.summaries = append(s.summaries, text)
		return fakellm.Text(text)
	}
	checkPairs(s.t, s.requests, r)
	if r.Messages[0].Role != "user" {
		s.t.Errorf("request %d starts with a %s message", s.requests, r.Messages[0].Role)
	}
	if len(s.summaries) > 0 {
		last := s.summaries[len(s.summaries)-1]
		if !strings.Contains(r.System, last) {
			s.t.Errorf("request %d does not carry the newest summary %.20q: system %q, %d messages", s.requests, last, r.System, len(r.Messages))
		}
		for _, m := range r.Messages {
			if m.Text == "turn 0" {
				s.t.Errorf("request %d still holds the first turn after a compaction", s.requests)
			}
		}
	}
	last := r.Messages[len(r.Messages)-1]
	if len(last.ToolResults) > 0 || last.Role == "tool" {
		return fakellm.Text("done with the tools")
	}
	var n int
	fmt.Sscanf(last.Text, "turn %d", &n)
	switch {
	case n%7 == 6:
		return fakellm.ToolCalls(fakellm.Call{Name: "echo", Args: json.RawMessage(`{"n":20000}`)}, fakellm.Call{Name: "echo", Args: json.RawMessage(`{"n":300}`)})
	case n%3 == 2:
		return fakellm.ToolCall("echo", `{"n":1500}`)
	}
	return fakellm.Text(fmt.Sprintf("answer to turn %d: ", n) + strings.Repeat("words ", n%40*10))
}

// checkPairs fails when a request holds a tool call without its result or
// a result without its call.
func checkPairs(t *testing.T, n int, r fakellm.Request) {
	t.Helper()
	calls := map[string]bool{}
	for _, m := range r.Messages {
		for _, c := range m.ToolCalls {
			calls[c.ID] = true
		}
		for _, res := range m.ToolResults {
			if !calls[res.CallID] {
				t.Errorf("request %d: tool result %s without its call", n, res.CallID)
			}
			delete(calls, res.CallID)
		}
	}
	for id := range calls {
		t.Errorf("request %d: tool call %s without its result", n, id)
	}
}

func newContextAgent(t *testing.T, srv *fakellm.Server, db *sqlite.DB) *agent.Agent {
	return newContextAgentFor(t, fakellm.OpenAI, srv, db)
}

func newContextAgentFor(t *testing.T, p fakellm.Provider, srv *fakellm.Server, db *sqlite.DB) *agent.Agent {
	t.Helper()
	var m conch.Model
	var err error
	switch p {
	case fakellm.OpenAI:
		m, err = openai.New(openai.Config{BaseURL: srv.BaseURL(p), APIKey: "k", Model: "gpt-test"})
	case fakellm.Anthropic:
		m, err = anthropic.New(anthropic.Config{BaseURL: srv.BaseURL(p), APIKey: "k", Model: "claude-test"})
	default:
		t.Fatalf("no provider %s", p)
	}
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{
		Model: m, Tools: []conch.Tool{echoTool{}}, Store: db, Context: db, ContextWindow: testWindow,
		MaxTokens: 512, MaxTurns: 10, Retry: agent.RetryPolicy{Max: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// runTurn stores "turn i" and runs it to the end.
func runTurn(ctx context.Context, t *testing.T, a *agent.Agent, db *sqlite.DB, i int) (conch.TurnID, error) {
	t.Helper()
	turn, _, err := db.AddInbound(ctx, conch.Inbound{Key: ctxKey, Sender: "alice", Text: fmt.Sprintf("turn %d", i), ExternalID: fmt.Sprintf("m%d", i)})
	if err != nil {
		t.Fatal(err)
	}
	return turn.ID, resumeTurn(ctx, t, a, db, turn.ID)
}

func resumeTurn(ctx context.Context, t *testing.T, a *agent.Agent, db *sqlite.DB, id conch.TurnID) error {
	t.Helper()
	if _, err := db.StartTurn(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, err := a.Run(ctx, agent.Input{Turn: id, Env: conch.ToolEnv{Conversation: ctxKey, User: conch.UserKey{Channel: conch.ChannelCLI, ID: "alice"}}})
	if err != nil {
		return err
	}
	return db.FinishTurn(ctx, id, conch.TurnDone, "")
}

func TestContextLongConversationStaysInWindow(t *testing.T) {
	turns := 500
	if testing.Short() {
		turns = 120
	}
	longConversation(t, fakellm.OpenAI, turns)
}

// The same through the Anthropic SDK, whose tool results ride in user
// messages and whose conversation must start with a user message.
func TestContextLongConversationAnthropic(t *testing.T) {
	longConversation(t, fakellm.Anthropic, 100)
}

func longConversation(t *testing.T, p fakellm.Provider, turns int) {
	ctx := context.Background()
	srv := fakellm.New(t, fakellm.WithoutRecording())
	sc := &script{t: t}
	srv.Handle(sc.reply)
	db := sqlitetest.MustOpenMemory(t)
	a := newContextAgentFor(t, p, srv, db)
	for i := range turns {
		if _, err := runTurn(ctx, t, a, db, i); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	st, err := db.ContextStatus(ctx, ctxKey)
	if err != nil {
		t.Fatal(err)
	}
	if st.Compactions < 5 || st.Window != testWindow || st.Tokens <= 0 || st.Tokens > testWindow {
		t.Errorf("status after %d turns = %+v (%s), want several compactions and a use within the window", turns, st, st)
	}
	hist, err := db.History(ctx, ctxKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) < 2*turns || hist[0].Text != "turn 0" {
		t.Errorf("History holds %d messages starting %q; want all of them (≥ %d) from turn 0", len(hist), hist[0].Text, 2*turns)
	}
	view, err := db.ModelHistory(ctx, ctxKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(view.Summary.Text, "SUMMARY#") || len(view.Messages) >= len(hist) {
		t.Errorf("model view: summary %.20q, %d of %d messages", view.Summary.Text, len(view.Messages), len(hist))
	}
	t.Logf("%s: %d turns, %d model requests, largest %d tokens of %d, %d compactions, %d messages stored, %d in the model's view, last use %s",
		p, turns, sc.requests, sc.largest, testWindow, st.Compactions, len(hist), len(view.Messages), st)
}

// A crash between the summary call and its storage loses nothing: the turn
// resumes after the restart, compacts again, and the history is whole.
func TestContextRestartMidCompaction(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "conch.db")
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	srv := fakellm.New(t)
	sc := &script{t: t}
	srv.Handle(sc.reply)
	a := newContextAgent(t, srv, db)

	// Run turns until the first compaction; conch "dies" once its summary
	// call was made: the run's context ends while the call is under way.
	runCtx, kill := context.WithCancel(ctx)
	var once sync.Once
	sc.mu.Lock()
	sc.onSummary = func() fakellm.Reply {
		once.Do(kill)
		return fakellm.Hang()
	}
	sc.mu.Unlock()
	var (
		id     conch.TurnID
		before []conch.Message
		i      int
	)
	for ; ; i++ {
		if before, err = db.History(ctx, ctxKey); err != nil {
			t.Fatal(err)
		}
		if id, err = runTurn(runCtx, t, a, db, i); err != nil {
			break
		}
		if i > 200 {
			t.Fatal("no compaction in 200 turns")
		}
	}
	if runCtx.Err() == nil {
		t.Fatalf("turn %d failed before the summary call: %v", i, err)
	}
	if st, _ := db.ContextStatus(ctx, ctxKey); st.Compactions != 0 {
		t.Fatalf("a summary was stored although the run died first: %+v", st)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart: reopen the store, build a new agent, resume the turn.
	db, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sc.mu.Lock()
	sc.onSummary = nil
	sc.mu.Unlock()
	a = newContextAgent(t, srv, db)
	if err := resumeTurn(ctx, t, a, db, id); err != nil {
		t.Fatalf("resume turn %d: %v", id, err)
	}
	after, err := db.History(ctx, ctxKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) <= len(before) {
		t.Fatalf("history after the restart has %d messages, before the crashed turn %d", len(after), len(before))
	}
	for j := range before {
		if after[j].Text != before[j].Text || after[j].Role != before[j].Role {
			t.Fatalf("message %d changed across the restart: %+v → %+v", j, before[j], after[j])
		}
	}
	st, err := db.ContextStatus(ctx, ctxKey)
	if err != nil {
		t.Fatal(err)
	}
	if st.Compactions != 1 {
		t.Errorf("compactions after the resumed turn = %d, want 1", st.Compactions)
	}
	// The turn's last request held the summary (checked by the script) and
	// the view starts after it.
	view, err := db.ModelHistory(ctx, ctxKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	if view.Summary.Text == "" || view.Summary.Messages == 0 || len(view.Messages) >= len(after) {
		t.Errorf("after the restart the view has summary %.20q covering %d messages and %d of %d messages",
			view.Summary.Text, view.Summary.Messages, len(view.Messages), len(after))
	}
	steps, err := db.Steps(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, s := range steps {
		kinds = append(kinds, string(s.Kind))
	}
	if !strings.Contains(strings.Join(kinds, ","), string(conch.StepCompaction)) {
		t.Errorf("steps of the resumed turn %v have no compaction", kinds)
	}
}
