package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/agent"
	"conch/fake"
	"conch/sqlite/sqlitetest"
	"conch/usage"
)

// A budget ends the next turn with its message (stopped, reason budget,
// audited); /usage and /status say what was used and which model answered.
func TestBudgetStopsTurnAndUsageCommand(t *testing.T) {
	db := sqlitetest.MustOpenMemory(t)
	meter := usage.NewMeter(usage.Options{Store: db, Audit: db, Limits: usage.Limits{ConversationDailyTokens: 50_000}})
	model := &fake.Model{Label: "openai/gpt-4o"}
	first := fake.Text("the first answer")
	first.Resp.Usage = conch.Usage{InputTokens: 100_000, CachedTokens: 60_000, OutputTokens: 10}
	model.Push(first, fake.Text("never asked"))
	e := newEnvWith(t, db, func(o *Options) {
		ag, err := agent.New(agent.Options{Model: model, Store: db, Meter: meter})
		if err != nil {
			t.Fatal(err)
		}
		o.Agent, o.Usage = ag, meter
	})
	e.start()
	e.send("room", "alice", "hello")
	e.waitFor("first reply", countKind(conch.OutboundReply, 1))
	e.send("room", "alice", "and again")
	out := e.waitFor("budget reply", countKind(conch.OutboundReply, 2))
	got := texts(out, conch.OutboundReply)[1]
	if !strings.Contains(got, "budget.conversation_daily_tokens") || !strings.Contains(got, "00:00 UTC") {
		t.Fatalf("second reply %q: want the budget's message", got)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("model asked %d times, want 1", n)
	}
	e.idle()
	ctx := context.Background()
	key := conch.ConversationKey{Channel: cli, ID: "room"}
	turns, err := db.Turns(ctx, key, 10)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	for _, tr := range turns {
		stopped = stopped || (tr.Status == conch.TurnStopped && tr.StoppedReason == string(agent.StopBudget))
	}
	if !stopped {
		t.Errorf("turns %+v: want one stopped by the budget", turns)
	}
	audits, err := db.AuditEvents(ctx, time.Time{}, 10)
	if err != nil || len(audits) != 1 || audits[0].Kind != conch.AuditBudgetRefused {
		t.Errorf("audit: got %+v %v, want one %s", audits, err, conch.AuditBudgetRefused)
	}

	// A scheduled wake is held to the same budget.
	if _, err := e.gw.Submit(ctx, conch.Inbound{Key: key, Text: "wake up: check the build", ExternalID: "schedule:1:1",
		Origin: conch.Origin{Kind: conch.OriginSchedule, Ref: "1"}}); err != nil {
		t.Fatal(err)
	}
	out = e.waitFor("wake's reply", countKind(conch.OutboundReply, 3))
	if got := texts(out, conch.OutboundReply)[2]; !strings.Contains(got, "budget.conversation_daily_tokens") {
		t.Errorf("wake's reply %q: want the budget's message", got)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("model asked %d times after the wake, want 1", n)
	}

	e.send("room", "alice", "/usage")
	out = e.waitFor("/usage", countKind(conch.OutboundNotice, 1))
	if got := texts(out, conch.OutboundNotice)[0]; !strings.Contains(got, "100.0k in (60.0k cached)") || !strings.Contains(got, "limit 50.0k tokens") {
		t.Errorf("/usage: got %q", got)
	}
	e.send("room", "alice", "/status")
	out = e.waitFor("/status", countKind(conch.OutboundNotice, 2))
	if got := texts(out, conch.OutboundNotice)[1]; !strings.Contains(got, "Last answer by openai/gpt-4o.") {
		t.Errorf("/status: got %q", got)
	}
}
