package agent

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"conch"
	"conch/fake"
)

// meter is a Meter that keeps what it is told and refuses once refuse
// calls were checked.
type meter struct {
	mu      sync.Mutex
	checks  []conch.ModelCall
	records []conch.ModelCall
	refuse  int // refuse the check with this number (1-based); 0 never
}

func (m *meter) Check(_ context.Context, c conch.ModelCall) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checks = append(m.checks, c)
	if len(m.checks) == m.refuse {
		return &conch.BudgetError{Limit: "budget.daily_usd", Text: "budget reached"}
	}
	return nil
}

func (m *meter) Record(_ context.Context, c conch.ModelCall) (conch.ModelCall, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c.CostUSD = float64(c.Usage.Total()) / 1000
	m.records = append(m.records, c)
	return c, nil
}

func withUsage(r fake.Reply, in, cached, out int) fake.Reply {
	r.Resp.Usage = conch.Usage{InputTokens: in, CachedTokens: cached, OutputTokens: out}
	return r
}

func TestUsageRecordedPerCall(t *testing.T) {
	m := &meter{}
	h := newHarness(t, []conch.Tool{echoTool("ls")}, func(o *Options) { o.Meter = m })
	h.model.Push(withUsage(fake.Call("c1", "ls", `{}`), 1000, 800, 20), fake.Text("done"))
	res, err := h.run(t, "list")
	if err != nil {
		t.Fatal(err)
	}
	if res.Model != "fake" || res.Fallback {
		t.Errorf("answered by %q (fallback %v), want fake", res.Model, res.Fallback)
	}
	if len(m.records) != 2 || len(m.checks) != 2 {
		t.Fatalf("records %d checks %d, want 2 each", len(m.records), len(m.checks))
	}
	r := m.records[0]
	if r.Usage != (conch.Usage{InputTokens: 1000, CachedTokens: 800, OutputTokens: 20}) || r.Key != conv || r.Person != user || r.Turn != 1 || r.Model != "fake" {
		t.Errorf("first call: got %+v", r)
	}
	// The second answer reported no usage: an estimate, marked.
	if u := m.records[1].Usage; !u.Estimated || u.InputTokens == 0 || u.OutputTokens == 0 {
		t.Errorf("second call: got %+v, want an estimate", u)
	}
}

func TestBudgetStopsBeforeTheNextCallNotInATool(t *testing.T) {
	m := &meter{refuse: 2}
	h := newHarness(t, []conch.Tool{echoTool("ls")}, func(o *Options) { o.Meter = m })
	h.model.Push(fake.Call("c1", "ls", `{}`), fake.Text("never asked"))
	res, err := h.run(t, "list")
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped != StopBudget || res.Text != "budget reached" {
		t.Fatalf("result: got %+v, want stopped by the budget", res)
	}
	if n := len(h.model.Requests()); n != 1 {
		t.Errorf("model asked %d times, want 1", n)
	}
	// The tool call that ran has its result before the stop.
	msgs := h.rec.Messages
	roles := []conch.Role{}
	for _, mm := range msgs {
		roles = append(roles, mm.Role)
	}
	if want := []conch.Role{conch.RoleAssistant, conch.RoleTool, conch.RoleAssistant}; !slices.Equal(roles, want) {
		t.Errorf("messages: got %v, want %v", roles, want)
	}
	if !slices.Contains(h.rec.StepKinds(), conch.StepStopped) {
		t.Errorf("steps %v: want a stopped step", h.rec.StepKinds())
	}
}

func TestFallbackTakesOverForTheTurn(t *testing.T) {
	backup := &fake.Model{Label: "other/backup"}
	m := &meter{}
	h := newHarness(t, []conch.Tool{echoTool("ls")}, func(o *Options) {
		o.Meter = m
		o.Fallbacks = []Fallback{{Model: backup, ContextWindow: 1000}}
	})
	h.model.Label = "prov/primary"
	limited := &conch.ModelError{Kind: conch.KindTransient, Status: 429, Message: "rate limited"}
	h.model.Push(fake.Call("c1", "ls", `{}`))
	for range 4 { // the first try and three retries
		h.model.Push(fake.Fail(limited))
	}
	backup.Push(fake.Text("answered by the backup"))
	res, err := h.run(t, "list")
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "answered by the backup" || res.Model != "other/backup" || !res.Fallback {
		t.Fatalf("result: got %+v", res)
	}
	// The fallback saw the whole history, the tool call and its result
	// with the same id.
	reqs := backup.Requests()
	if len(reqs) != 1 {
		t.Fatalf("backup asked %d times, want 1", len(reqs))
	}
	ms := reqs[0].Messages
	if len(ms) != 3 || ms[1].ToolCalls[0].ID != "c1" || ms[2].ToolResult.CallID != "c1" {
		t.Errorf("backup's messages: got %+v", ms)
	}
	if !slices.Contains(h.rec.StepKinds(), conch.StepFallback) {
		t.Errorf("steps %v: want a fallback step", h.rec.StepKinds())
	}
	if len(m.records) != 2 || m.records[0].Model != "prov/primary" || m.records[1].Model != "other/backup" || !m.records[1].Fallback {
		t.Errorf("usage: got %+v", m.records)
	}
	// A non-transient failure does not fall back.
	h.model.Push(fake.Fail(&conch.ModelError{Kind: conch.KindAuth, Status: 401, Message: "bad key"}))
	h.rec.AddTurn(2, conch.Message{Role: conch.RoleUser, Text: "again"})
	_, err = h.agent.Run(context.Background(), Input{Turn: 2, Env: conch.ToolEnv{Conversation: conv, User: user, Facts: h.facts}})
	var me *conch.ModelError
	if !errors.As(err, &me) || me.Kind != conch.KindAuth || len(backup.Requests()) != 1 {
		t.Errorf("auth failure: got %v, backup asked %d times", err, len(backup.Requests()))
	}
}
