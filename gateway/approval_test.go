package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/agent"
	"conch/fake"
	"conch/sqlite"
	"conch/sqlite/sqlitetest"
)

// guarded is a tool that asks the conversation's people before it "runs".
type guarded struct {
	mu        sync.Mutex
	decisions []conch.ApprovalDecision
	errs      []error
}

func (g *guarded) tool() conch.Tool {
	return &fake.Tool{Name: "guarded", Fn: func(ctx context.Context, env conch.ToolEnv, _ json.RawMessage) (conch.ToolOutput, error) {
		d, err := env.Approvals.Approve(ctx, env.CallID, conch.ApprovalRequest{Kind: "command", Title: "deploy prod", Scope: "command:deploy *", Resumable: true})
		g.mu.Lock()
		g.decisions, g.errs = append(g.decisions, d), append(g.errs, err)
		g.mu.Unlock()
		if err != nil {
			return conch.ToolOutput{}, err
		}
		if !d.Choice.Allows() {
			return conch.ToolFail("denied: " + d.Reason), nil
		}
		return conch.ToolOK("deployed"), nil
	}}
}

func (g *guarded) last(t *testing.T) (conch.ApprovalDecision, error) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.decisions) == 0 {
		t.Fatal("the tool never got a decision")
	}
	return g.decisions[len(g.decisions)-1], g.errs[len(g.errs)-1]
}

func approvalEnv(t *testing.T, db *sqlite.DB, timeout time.Duration) (*env, *guarded) {
	t.Helper()
	if db == nil {
		db = sqlitetest.MustOpenMemory(t)
	}
	g := &guarded{}
	e := newEnvWith(t, db, func(o *Options) {
		o.Approvals, o.ApprovalTimeout, o.Audit = db, timeout, db
	})
	// The env's agent knows only echo: give it the guarded tool too.
	ag, err := agent.New(agent.Options{Model: e.model, Store: db, Facts: db, Approvals: db, Tools: []conch.Tool{g.tool()}})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.opts.Agent = ag
	return e, g
}

func sentText(out []conch.Outbound, sub string) bool {
	for _, o := range out {
		if strings.Contains(o.Text, sub) {
			return true
		}
	}
	return false
}

// TestApprovalTimeoutDenies: nobody answers; at the deadline the question
// is denied, the tool reads the denial, the conversation is told, and the
// decision is audited.
func TestApprovalTimeoutDenies(t *testing.T) {
	e, g := approvalEnv(t, nil, 300*time.Millisecond)
	e.model.Push(fake.Call("c1", "guarded", `{}`), fake.Text("I could not deploy."))
	e.start()
	e.send("room", "alice", "deploy it")
	e.waitFor("the question", func(out []conch.Outbound) bool { return sentText(out, "Reply **yes**") })
	e.waitFor("the outcome", func(out []conch.Outbound) bool { return sentText(out, "nobody answered in time") })
	e.waitFor("the answer", func(out []conch.Outbound) bool { return sentText(out, "I could not deploy.") })
	if d, err := g.last(t); err != nil || d.Choice != conch.ApproveDeny || d.Reason != conch.ApprovalReasonTimeout {
		t.Fatalf("decision %+v, %v", d, err)
	}
	all, err := e.db.AuditEvents(context.Background(), time.Time{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	var audits []conch.AuditEvent
	for _, a := range all {
		if a.Kind == conch.AuditApproval {
			audits = append(audits, a)
		}
	}
	if len(audits) != 1 || !strings.Contains(string(audits[0].Detail), `"reason":"timeout"`) {
		t.Fatalf("audit %+v", audits)
	}
}

// TestApprovalScheduledWakeTimesOut: a wake submitted by a schedule needs
// an approval while nobody answers: it is denied at the timeout, and the
// turn ends normally.
func TestApprovalScheduledWakeTimesOut(t *testing.T) {
	e, g := approvalEnv(t, nil, 300*time.Millisecond)
	e.model.Push(fake.Call("c1", "guarded", `{}`), fake.Text("Skipped the deploy."))
	e.start()
	key := conch.ConversationKey{Channel: cli, ID: "room"}
	if _, err := e.gw.Submit(context.Background(), conch.Inbound{Key: key, Text: "nightly deploy", Origin: conch.Origin{Kind: conch.OriginSchedule, Ref: "nightly"}}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the answer", func(out []conch.Outbound) bool { return sentText(out, "Skipped the deploy.") })
	if d, _ := g.last(t); d.Choice != conch.ApproveDeny || d.Reason != conch.ApprovalReasonTimeout {
		t.Fatalf("decision %+v", d)
	}
}

// TestApprovalReplyOnlyByAdmitted: a typed "yes" from someone the
// conversation does not admit is dropped (and not taken as an answer);
// bob's "always" allows it and grants the scope, so the next call of the
// same scope runs without a question; the answers never become messages.
func TestApprovalReplyOnlyByAdmitted(t *testing.T) {
	e, g := approvalEnv(t, nil, time.Minute)
	e.model.Push(fake.Call("c1", "guarded", `{}`), fake.Text("Deployed."), fake.Call("c2", "guarded", `{}`), fake.Text("Deployed again."))
	e.start()
	e.send("room", "alice", "deploy it")
	e.waitFor("the question", func(out []conch.Outbound) bool { return sentText(out, "Reply **yes**") })
	e.send("room", "mallory", "yes")
	time.Sleep(200 * time.Millisecond)
	open, err := e.db.OpenApprovals(context.Background(), conch.ConversationKey{Channel: cli, ID: "room"})
	if err != nil || len(open) != 1 {
		t.Fatalf("open questions after mallory's yes: %v %v", open, err)
	}
	e.send("room", "bob", "always")
	e.waitFor("the answer", func(out []conch.Outbound) bool { return sentText(out, "Deployed.") })
	if d, _ := g.last(t); d.Choice != conch.ApproveConversation || d.By != "bob" {
		t.Fatalf("decision %+v", d)
	}
	e.send("room", "alice", "again")
	e.waitFor("the second answer", func(out []conch.Outbound) bool { return sentText(out, "Deployed again.") })
	if d, _ := g.last(t); d.Reason != conch.ApprovalReasonGrant {
		t.Fatalf("second decision %+v, want the conversation's grant", d)
	}
	h, err := e.db.History(context.Background(), conch.ConversationKey{Channel: cli, ID: "room"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range h {
		if m.Role == conch.RoleUser && (m.Text == "always" || m.Text == "yes") {
			t.Fatalf("an answer became a message: %+v", h)
		}
	}
	// /reset forgets the grant.
	e.send("room", "alice", "/reset")
	ok, err := e.db.Granted(context.Background(), conch.ConversationKey{Channel: cli, ID: "room"}, "command:deploy *")
	if err != nil || ok {
		t.Fatalf("grant after /reset: %v %v", ok, err)
	}
}

// TestApprovalStopDenies: /stop while a question is open ends the turn
// and denies the question (turn_ended); a click after that is refused.
func TestApprovalStopDenies(t *testing.T) {
	e, _ := approvalEnv(t, nil, time.Minute)
	e.model.Push(fake.Call("c1", "guarded", `{}`), fake.Text("unreachable"))
	e.start()
	e.send("room", "alice", "deploy it")
	e.waitFor("the question", func(out []conch.Outbound) bool { return sentText(out, "Reply **yes**") })
	open, _ := e.db.OpenApprovals(context.Background(), conch.ConversationKey{})
	if len(open) != 1 {
		t.Fatalf("open: %v", open)
	}
	e.send("room", "alice", "/stop")
	e.waitFor("the outcome", func(out []conch.Outbound) bool { return sentText(out, "the turn ended before an answer") })
	_, err := e.gw.AnswerApproval(context.Background(), conch.ApprovalAnswer{Key: open[0].Key, ID: open[0].ID, Choice: conch.ApproveOnce, Sender: "alice"})
	if conch.KindOf(err) != conch.KindInvalid {
		t.Fatalf("a click after the stop: %v, want already answered", err)
	}
	// From another conversation, even an admitted person cannot answer.
	_, err = e.gw.AnswerApproval(context.Background(), conch.ApprovalAnswer{Key: conch.ConversationKey{Channel: cli, ID: "other"}, ID: open[0].ID, Choice: conch.ApproveOnce, Sender: "alice"})
	if conch.KindOf(err) != conch.KindAuth {
		t.Fatalf("a click from another conversation: %v", err)
	}
}

// TestApprovalShutdownKeepsOpen: a shutdown while a question is open
// leaves it open (the turn resumes at the call after the restart), and the
// restarted gateway's call finds the answer given meanwhile.
func TestApprovalShutdownKeepsOpen(t *testing.T) {
	db := sqlitetest.MustOpenFile(t)
	e, _ := approvalEnv(t, db, time.Minute)
	e.model.Push(fake.Call("c1", "guarded", `{}`))
	e.start()
	e.send("room", "alice", "deploy it")
	e.waitFor("the question", func(out []conch.Outbound) bool { return sentText(out, "Reply **yes**") })
	e.shutdown()
	open, err := db.OpenApprovals(context.Background(), conch.ConversationKey{})
	if err != nil || len(open) != 1 {
		t.Fatalf("open after the shutdown: %v %v", open, err)
	}

	e2, g2 := approvalEnv(t, db, time.Minute)
	e2.model.Push(fake.Text("Deployed after the restart."))
	e2.start()
	if _, err := e2.gw.AnswerApproval(context.Background(), conch.ApprovalAnswer{Key: open[0].Key, ID: open[0].ID, Choice: conch.ApproveOnce, Sender: "bob"}); err != nil {
		t.Fatal(err)
	}
	e2.waitFor("the answer", func(out []conch.Outbound) bool { return sentText(out, "Deployed after the restart.") })
	if d, err := g2.last(t); err != nil || d.Choice != conch.ApproveOnce || d.By != "bob" {
		t.Fatalf("resumed call's decision %+v %v", d, err)
	}
	if n := len(e2.model.Requests()); n != 1 {
		t.Fatalf("model calls after the restart: %d, want 1 (the call resumed without asking the model)", n)
	}
}
