package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/agent"
	"conch/fake"
	"conch/internal/backoff"
	"conch/sqlite"
	"conch/sqlite/sqlitetest"
)

const cli = conch.ChannelCLI

type env struct {
	t     *testing.T
	db    *sqlite.DB
	model *fake.Model
	ch    *fake.Channel
	gw    *Gateway
	stop  context.CancelFunc
	done  chan error
}

func newEnv(t *testing.T, db *sqlite.DB) *env {
	t.Helper()
	return newEnvWith(t, db, nil)
}

// newEnvWith is newEnv with the gateway's options adjusted by opt.
func newEnvWith(t *testing.T, db *sqlite.DB, opt func(*Options)) *env {
	t.Helper()
	if db == nil {
		db = sqlitetest.MustOpenMemory(t)
	}
	e := &env{t: t, db: db, model: &fake.Model{}, ch: fake.NewChannel(cli)}
	ag, err := agent.New(agent.Options{Model: e.model, Store: db, Facts: db, Tools: []conch.Tool{
		&fake.Tool{Name: "echo", Fn: func(_ context.Context, _ conch.ToolEnv, a json.RawMessage) (conch.ToolOutput, error) {
			return conch.ToolOK(string(a)), nil
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		Store: db, Agent: ag, Channels: []conch.Channel{e.ch}, Facts: db, Events: db,
		Allow: map[conch.ChannelName]Allowlist{cli: NewAllowlist("alice", "bob")},
	}
	if opt != nil {
		opt(&o)
	}
	e.gw, err = New(o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) start() {
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	e.done = make(chan error, 1)
	go func() { e.done <- e.gw.Run(ctx) }()
	e.t.Cleanup(e.shutdown)
	e.waitRunning()
}

func (e *env) waitRunning() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		e.gw.mu.Lock()
		ok, started := e.gw.ctx != nil, e.gw.started
		e.gw.mu.Unlock()
		if ok {
			// Running, and done resuming what it found: a message sent
			// now is announced by its own submission.
			select {
			case <-started:
			case <-ctx.Done():
				e.t.Fatal("gateway did not finish resuming")
			}
			return
		}
		select {
		case <-ctx.Done():
			e.t.Fatal("gateway did not start")
		case <-time.After(time.Millisecond):
		}
	}
}

func (e *env) shutdown() {
	if e.stop == nil {
		return
	}
	e.stop()
	e.stop = nil
	if err := <-e.done; err != nil {
		e.t.Errorf("gateway run: %v", err)
	}
}

func (e *env) send(conv, sender, text string) {
	e.t.Helper()
	err := e.gw.HandleInbound(context.Background(), conch.Inbound{
		Key: conch.ConversationKey{Channel: cli, ID: conv}, Sender: conch.UserID(sender), Text: text,
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) waitFor(what string, pred func([]conch.Outbound) bool) []conch.Outbound {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := e.ch.WaitSent(ctx, pred)
	if err != nil {
		e.t.Fatalf("waiting for %s: %v; sent: %+v", what, err, out)
	}
	return out
}

func (e *env) idle() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.gw.WaitIdle(ctx); err != nil {
		e.t.Fatal(err)
	}
}

func texts(out []conch.Outbound, kind conch.OutboundKind) []string {
	var s []string
	for _, o := range out {
		if o.Kind == kind {
			s = append(s, o.Text)
		}
	}
	return s
}

func countKind(kind conch.OutboundKind, n int) func([]conch.Outbound) bool {
	return func(out []conch.Outbound) bool { return len(texts(out, kind)) >= n }
}

// blockingModel answers each request only when released.
type blockingModel struct {
	release chan string
	started chan string
}

func newBlockingModel() *blockingModel {
	return &blockingModel{release: make(chan string), started: make(chan string, 10)}
}

func (b *blockingModel) fn(ctx context.Context, req conch.ModelRequest) (conch.ModelResponse, error) {
	b.started <- req.Messages[len(req.Messages)-1].Text
	select {
	case text := <-b.release:
		return conch.ModelResponse{Text: text}, nil
	case <-ctx.Done():
		return conch.ModelResponse{}, ctx.Err()
	}
}

func TestReply(t *testing.T) {
	e := newEnv(t, nil)
	e.model.Push(fake.Call("c1", "echo", `{"x":1}`), fake.Text("hello alice"))
	e.start()
	e.send("room", "alice", "hi")
	out := e.waitFor("reply", countKind(conch.OutboundReply, 1))
	if got := texts(out, conch.OutboundReply); got[0] != "hello alice" {
		t.Fatalf("reply %q, want hello alice", got)
	}
	e.idle()
	hist, err := e.db.History(context.Background(), conch.ConversationKey{Channel: cli, ID: "room"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 4 { // user, assistant call, tool result, answer
		t.Fatalf("history has %d messages, want 4: %+v", len(hist), hist)
	}
	if e.ch.Typing(conch.ConversationKey{Channel: cli, ID: "room"}) {
		t.Fatal("typing still on after the reply")
	}
}

func TestUnknownSenderGetsNothing(t *testing.T) {
	e := newEnv(t, nil)
	e.start()
	e.send("room", "mallory", "hi")
	e.send("room", "", "hi")
	e.idle()
	if out := e.ch.Sent(); len(out) != 0 {
		t.Fatalf("sent %+v to an unknown sender", out)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Fatalf("%d model calls for an unknown sender", n)
	}
	convs, err := e.db.Conversations(context.Background())
	if err != nil || len(convs) != 0 {
		t.Fatalf("stored conversations %v (%v), want none", convs, err)
	}
}

func TestQueuedAndOrdered(t *testing.T) {
	e := newEnv(t, nil)
	bm := newBlockingModel()
	e.model.Func = bm.fn
	e.start()
	e.send("room", "alice", "first")
	if got := <-bm.started; got != "first" {
		t.Fatalf("model started on %q, want first", got)
	}
	e.send("room", "alice", "second")
	e.send("room", "bob", "third")
	out := e.waitFor("queued notices", countKind(conch.OutboundNotice, 2))
	if got := texts(out, conch.OutboundNotice); got[0] != "queued (position 1)" || got[1] != "queued (position 2)" {
		t.Fatalf("notices %q", got)
	}
	bm.release <- "answer 1"
	if got := <-bm.started; got != "second" {
		t.Fatalf("model started on %q, want second", got)
	}
	bm.release <- "answer 2"
	<-bm.started
	bm.release <- "answer 3"
	out = e.waitFor("three replies", countKind(conch.OutboundReply, 3))
	if got := strings.Join(texts(out, conch.OutboundReply), ","); got != "answer 1,answer 2,answer 3" {
		t.Fatalf("replies %s, want in order", got)
	}
}

func TestConversationsAreIndependent(t *testing.T) {
	e := newEnv(t, nil)
	bm := newBlockingModel()
	e.model.Func = func(ctx context.Context, req conch.ModelRequest) (conch.ModelResponse, error) {
		if req.Messages[len(req.Messages)-1].Text == "slow" {
			return bm.fn(ctx, req)
		}
		return conch.ModelResponse{Text: "fast answer"}, nil
	}
	e.start()
	e.send("a", "alice", "slow")
	<-bm.started
	e.send("b", "bob", "quick")
	out := e.waitFor("fast reply", countKind(conch.OutboundReply, 1))
	if out[0].Key.ID != "b" {
		t.Fatalf("first reply went to %s, want b", out[0].Key.ID)
	}
	bm.release <- "slow answer"
	e.waitFor("slow reply", countKind(conch.OutboundReply, 2))
}

func TestStop(t *testing.T) {
	e := newEnv(t, nil)
	bm := newBlockingModel()
	e.model.Func = bm.fn
	e.start()
	e.send("room", "alice", "long task")
	<-bm.started
	e.send("room", "alice", "/stop")
	e.waitFor("stop notice", func(out []conch.Outbound) bool {
		return len(out) > 0 && out[len(out)-1].Text == "Stopped."
	})
	e.idle()
	e.send("room", "alice", "/stop")
	e.waitFor("nothing running", func(out []conch.Outbound) bool {
		return out[len(out)-1].Text == "Nothing is running."
	})
	turns, err := e.db.UnfinishedTurns(context.Background())
	if err != nil || len(turns) != 0 {
		t.Fatalf("unfinished turns %+v (%v), want none", turns, err)
	}
}

func TestResetForgetsHistory(t *testing.T) {
	e := newEnv(t, nil)
	e.model.Push(fake.Text("one"), fake.Text("two"))
	e.start()
	e.send("room", "alice", "remember this")
	e.waitFor("reply", countKind(conch.OutboundReply, 1))
	e.idle()
	e.send("room", "alice", "/reset")
	e.waitFor("reset notice", func(out []conch.Outbound) bool {
		return strings.HasPrefix(out[len(out)-1].Text, "Conversation reset")
	})
	e.send("room", "alice", "fresh")
	e.waitFor("reply", countKind(conch.OutboundReply, 2))
	reqs := e.model.Requests()
	if msgs := reqs[len(reqs)-1].Messages; len(msgs) != 1 || msgs[0].Text != "fresh" {
		t.Fatalf("after reset the model saw %+v, want only the new message", msgs)
	}
}

func TestCommands(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/help", "/reset"},
		{"/status", "Idle."},
	}
	e := newEnv(t, nil)
	e.start()
	for i, tt := range tests {
		e.send("room", "alice", tt.in)
		out := e.waitFor(tt.in, countKind(conch.OutboundNotice, i+1))
		if got := out[len(out)-1].Text; !strings.Contains(got, tt.want) {
			t.Errorf("%s: got %q, want it to contain %q", tt.in, got, tt.want)
		}
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Fatalf("commands reached the model %d times", n)
	}
}

func TestOnlyKnownCommands(t *testing.T) {
	for _, text := range []string{"/etc/hosts is broken", "/tmp is full, why?", "/me waves", "/frobnicate"} {
		if c, ok := parseCommand(text); ok {
			t.Errorf("%q parsed as command %q; it is a message", text, c.name)
		}
	}
	if c, ok := parseCommand("  /stop  "); !ok || c.name != "stop" {
		t.Fatalf("got %+v %v, want stop", c, ok)
	}
}

func TestDuplicateDeliveryHandledOnce(t *testing.T) {
	e := newEnv(t, nil)
	e.model.Func = func(context.Context, conch.ModelRequest) (conch.ModelResponse, error) {
		return conch.ModelResponse{Text: "answer"}, nil
	}
	e.start()
	in := conch.Inbound{Key: conch.ConversationKey{Channel: cli, ID: "room"}, Sender: "alice", Text: "hi", ExternalID: "$event1"}
	for range 3 {
		if err := e.gw.HandleInbound(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	e.waitFor("reply", countKind(conch.OutboundReply, 1))
	e.idle()
	if n := len(e.model.Requests()); n != 1 {
		t.Fatalf("model called %d times for one message delivered thrice", n)
	}
}

func TestFatalModelErrorToldSafely(t *testing.T) {
	e := newEnv(t, nil)
	e.model.Push(fake.Fail(&conch.ModelError{Kind: conch.KindAuth, Status: 401, Message: "bad key sk-123"}))
	e.start()
	e.send("room", "alice", "hi")
	out := e.waitFor("reply", countKind(conch.OutboundReply, 1))
	got := texts(out, conch.OutboundReply)[0]
	if strings.Contains(got, "sk-123") || !strings.Contains(got, "API key") {
		t.Fatalf("reply %q leaks detail or lacks the hint", got)
	}
}

func TestResumeAfterCrash(t *testing.T) {
	db := sqlitetest.MustOpenFile(t)
	ctx := context.Background()
	key := conch.ConversationKey{Channel: cli, ID: "room"}
	// A previous run stored two messages and crashed while on the first.
	t1, _, err := db.AddInbound(ctx, conch.Inbound{Key: key, Sender: "alice", Text: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.StartTurn(ctx, t1.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.AddInbound(ctx, conch.Inbound{Key: key, Sender: "alice", Text: "second"}); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, db)
	e.model.Push(fake.Text("answer 1"), fake.Text("answer 2"))
	e.start()
	out := e.waitFor("both replies", countKind(conch.OutboundReply, 2))
	if got := strings.Join(texts(out, conch.OutboundReply), ","); got != "answer 1,answer 2" {
		t.Fatalf("replies %s", got)
	}
}

func TestResumeStoredAnswerIsDeliveredWithoutModel(t *testing.T) {
	db := sqlitetest.MustOpenFile(t)
	ctx := context.Background()
	key := conch.ConversationKey{Channel: cli, ID: "room"}
	t1, _, _ := db.AddInbound(ctx, conch.Inbound{Key: key, Sender: "alice", Text: "q"})
	if _, err := db.StartTurn(ctx, t1.ID); err != nil {
		t.Fatal(err)
	}
	// Crash after the answer was stored, before it was delivered.
	if err := db.AppendMessage(ctx, t1.ID, conch.Message{Role: conch.RoleAssistant, Text: "stored answer"}); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, db)
	e.start()
	out := e.waitFor("reply", countKind(conch.OutboundReply, 1))
	if got := texts(out, conch.OutboundReply)[0]; got != "stored answer" {
		t.Fatalf("got %q", got)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Fatalf("model called %d times", n)
	}
}

// TestResumeKeepsTheAnswerEventOnce: conch was killed after a turn's answer
// was stored and its event kept (the web chat showed it), before the turn
// was marked done. The resumed turn delivers the stored answer to its
// channel again (at least once), but the event log, which the web chat and
// the dashboard show, keeps the answer once. (Found by the chaos run on
// every channel: a resumed turn's answer appeared twice in the event log.)
func TestResumeKeepsTheAnswerEventOnce(t *testing.T) {
	db := sqlitetest.MustOpenFile(t)
	ctx := context.Background()
	key := conch.ConversationKey{Channel: cli, ID: "room"}
	// The first run: the message, its turn started, its answer stored and
	// published; then the kill, before FinishTurn.
	first := NewHub(db, nil, time.Now)
	t1, _, _ := db.AddInbound(ctx, conch.Inbound{Key: key, Sender: "alice", Text: "q"})
	first.Publish(ctx, key, t1.ID, conch.MessageEvent{Role: conch.RoleUser, Text: "q", Sender: "alice"})
	if _, err := db.StartTurn(ctx, t1.ID); err != nil {
		t.Fatal(err)
	}
	first.Publish(ctx, key, t1.ID, conch.TurnState{Status: conch.TurnRunning, Attempt: 1})
	if err := db.AppendMessage(ctx, t1.ID, conch.Message{Role: conch.RoleAssistant, Text: "stored answer"}); err != nil {
		t.Fatal(err)
	}
	first.Publish(ctx, key, t1.ID, conch.MessageEvent{Role: conch.RoleAssistant, Text: "stored answer"})
	// Another message arrived in the meantime (its events come after).
	t2, _, _ := db.AddInbound(ctx, conch.Inbound{Key: key, Sender: "alice", Text: "next"})
	first.Publish(ctx, key, t2.ID, conch.MessageEvent{Role: conch.RoleUser, Text: "next", Sender: "alice"})

	e := newEnv(t, db)
	e.model.Push(fake.Text("answer to next"))
	e.start()
	out := e.waitFor("both replies", countKind(conch.OutboundReply, 2))
	if got := strings.Join(texts(out, conch.OutboundReply), ","); got != "stored answer,answer to next" {
		t.Fatalf("replies %s: want the stored answer delivered again, then the next", got)
	}
	e.idle()
	evs, err := db.EventsSince(ctx, key, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	answers := map[conch.TurnID][]string{}
	for _, ev := range evs {
		if m, ok := ev.Data.(conch.MessageEvent); ok && m.Role == conch.RoleAssistant {
			answers[ev.Turn] = append(answers[ev.Turn], m.Text)
		}
	}
	if got := answers[t1.ID]; len(got) != 1 {
		t.Errorf("the resumed turn's answer is kept %d times in the event log: %q", len(got), got)
	}
	if got := answers[t2.ID]; len(got) != 1 || got[0] != "answer to next" {
		t.Errorf("the next turn's answers in the event log: %q", got)
	}
}

// TestResumeKeepsAnAnswerEventNotKeptBefore: killed after the answer was
// stored but before its event was kept: the resumed turn keeps it then.
func TestResumeKeepsAnAnswerEventNotKeptBefore(t *testing.T) {
	db := sqlitetest.MustOpenFile(t)
	ctx := context.Background()
	key := conch.ConversationKey{Channel: cli, ID: "room"}
	first := NewHub(db, nil, time.Now)
	t1, _, _ := db.AddInbound(ctx, conch.Inbound{Key: key, Sender: "alice", Text: "q"})
	first.Publish(ctx, key, t1.ID, conch.MessageEvent{Role: conch.RoleUser, Text: "q", Sender: "alice"})
	if _, err := db.StartTurn(ctx, t1.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendMessage(ctx, t1.ID, conch.Message{Role: conch.RoleAssistant, Text: "stored answer"}); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, db)
	e.start()
	e.waitFor("reply", countKind(conch.OutboundReply, 1))
	e.idle()
	evs, err := db.EventsSince(ctx, key, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if m, ok := ev.Data.(conch.MessageEvent); ok && m.Role == conch.RoleAssistant && m.Text == "stored answer" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the answer is kept %d times in the event log, want once", n)
	}
}

// fullStore is a store whose disk is full for its first few writes of a
// kind: they fail as the SQLite store fails them (conch.ErrStoreFull).
type fullStore struct {
	*sqlite.DB
	mu                   sync.Mutex
	starts, appends, fin int // writes still to refuse
}

func storeFull(what string) error {
	return &conch.Error{Kind: conch.KindUnavailable, User: "disk full at /data: free some space, then send the message again",
		Err: fmt.Errorf("%s: %w: database or disk is full (13)", what, conch.ErrStoreFull)}
}

func (s *fullStore) refuse(n *int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *n > 0 {
		*n--
		return true
	}
	return false
}

func (s *fullStore) StartTurn(ctx context.Context, id conch.TurnID) (conch.Turn, error) {
	if s.refuse(&s.starts) {
		return conch.Turn{}, storeFull("start turn")
	}
	return s.DB.StartTurn(ctx, id)
}

func (s *fullStore) AppendMessage(ctx context.Context, id conch.TurnID, m conch.Message) error {
	if s.refuse(&s.appends) {
		return storeFull("append message")
	}
	return s.DB.AppendMessage(ctx, id, m)
}

func (s *fullStore) FinishTurn(ctx context.Context, id conch.TurnID, status conch.TurnStatus, reason string) error {
	if s.refuse(&s.fin) {
		return storeFull("finish turn")
	}
	return s.DB.FinishTurn(ctx, id, status, reason)
}

// TestFullDiskTurnWaitsAndIsAnsweredOnce: the store's disk is full while a
// stored message's turn runs (its start, its answer, its end are refused in
// turn). The turn waits and runs again once there is room, in the same run
// of conch: the person gets the one answer, no "send it again", and the
// turn is recorded done. (Found by the chaos run on every channel: a turn
// whose answer could not be stored told the person to send the message
// again, stayed running in the store, and was answered a second time after
// the next restart; one whose start was refused was dropped until a
// restart.)
func TestFullDiskTurnWaitsAndIsAnsweredOnce(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		starts, appends, fin int
		asked                int
	}{
		{"start refused", 2, 0, 0, 1},
		{"answer refused", 0, 1, 0, 2},
		{"end refused", 0, 0, 2, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := sqlitetest.MustOpenFile(t)
			fs := &fullStore{DB: db, starts: tt.starts, appends: tt.appends, fin: tt.fin}
			model := &fake.Model{}
			ag, err := agent.New(agent.Options{Model: model, Store: fs, Facts: db})
			if err != nil {
				t.Fatal(err)
			}
			ch := fake.NewChannel(cli)
			gw, err := New(Options{
				Store: fs, Agent: ag, Channels: []conch.Channel{ch}, Facts: db, Events: db,
				Allow:      map[conch.ChannelName]Allowlist{cli: NewAllowlist("alice")},
				StoreRetry: backoff.Policy{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond},
			})
			if err != nil {
				t.Fatal(err)
			}
			model.Func = func(context.Context, conch.ModelRequest) (conch.ModelResponse, error) {
				return conch.ModelResponse{Text: "the answer"}, nil
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- gw.Run(ctx) }()
			defer func() { cancel(); <-done }()
			key := conch.ConversationKey{Channel: cli, ID: "room"}
			deadline := time.Now().Add(10 * time.Second)
			for gw.HandleInbound(ctx, conch.Inbound{Key: key, Sender: "alice", Text: "q", ExternalID: "m1"}) != nil {
				if time.Now().After(deadline) {
					t.Fatal("the message was never taken")
				}
				time.Sleep(10 * time.Millisecond)
			}
			for {
				turns, err := db.UnfinishedTurns(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(turns) == 0 && len(ch.Sent()) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("turns still unfinished: %+v; sent %+v", turns, ch.Sent())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := gw.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			var replies []string
			for _, o := range ch.Sent() {
				replies = append(replies, o.Text)
			}
			if len(replies) != 1 || replies[0] != "the answer" {
				t.Errorf("the person got %q, want the answer once", replies)
			}
			if n := len(model.Requests()); n != tt.asked {
				t.Errorf("the model was asked %d times, want %d", n, tt.asked)
			}
		})
	}
}

func TestAbandonAfterMaxAttempts(t *testing.T) {
	db := sqlitetest.MustOpenFile(t)
	ctx := context.Background()
	key := conch.ConversationKey{Channel: cli, ID: "room"}
	t1, _, _ := db.AddInbound(ctx, conch.Inbound{Key: key, Sender: "alice", Text: "crashes conch"})
	for range 3 { // three runs each crashed during this turn
		if _, err := db.StartTurn(ctx, t1.ID); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t, db)
	e.start()
	out := e.waitFor("abandon notice", countKind(conch.OutboundNotice, 1))
	if got := out[0].Text; !strings.Contains(got, "gave up") || !strings.Contains(got, "crashes conch") {
		t.Fatalf("notice %q", got)
	}
	e.idle()
	if n := len(e.model.Requests()); n != 0 {
		t.Fatalf("model called %d times for an abandoned turn", n)
	}
	turns, _ := db.UnfinishedTurns(ctx)
	if len(turns) != 0 {
		t.Fatalf("turn still unfinished: %+v", turns)
	}
}

func TestShutdownLeavesTurnForResume(t *testing.T) {
	db := sqlitetest.MustOpenFile(t)
	e := newEnv(t, db)
	bm := newBlockingModel()
	e.model.Func = bm.fn
	e.start()
	e.send("room", "alice", "interrupted")
	<-bm.started
	e.shutdown()
	turns, err := db.UnfinishedTurns(context.Background())
	if err != nil || len(turns) != 1 || turns[0].Status != conch.TurnRunning {
		t.Fatalf("unfinished %+v (%v), want one running turn", turns, err)
	}
	e2 := newEnv(t, db)
	e2.model.Push(fake.Text("resumed answer"))
	e2.start()
	e2.waitFor("resumed reply", countKind(conch.OutboundReply, 1))

	// The stored events tell the turn was stopped by the shutdown and
	// resumed, not that it ran once to its end.
	key := conch.ConversationKey{Channel: cli, ID: "room"}
	sub, err := e2.gw.Events().Subscribe(t.Context(), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for ev := range sub {
		if ts, ok := ev.Data.(conch.TurnState); ok {
			states = append(states, fmt.Sprintf("%s/%d/%s/%v", ts.Status, ts.Attempt, ts.Reason, ts.Resumes))
			if ts.Status == conch.TurnDone {
				break
			}
		}
	}
	want := []string{"pending/0//false", "running/1//false", "stopped/0/" + conch.ReasonInterrupted + "/true", "running/2//false", "done/0//false"}
	if !slices.Equal(states, want) {
		t.Fatalf("turn states: got %q, want %q", states, want)
	}
}

func TestConversationClosed(t *testing.T) {
	e := newEnv(t, nil)
	bm := newBlockingModel()
	e.model.Func = bm.fn
	e.start()
	e.send("room", "alice", "work")
	<-bm.started
	e.send("room", "alice", "queued")
	key := conch.ConversationKey{Channel: cli, ID: "room"}
	if err := e.gw.ConversationClosed(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	e.idle()
	turns, _ := e.db.UnfinishedTurns(context.Background())
	if len(turns) != 0 {
		t.Fatalf("unfinished turns after close: %+v", turns)
	}
}

// TestConcurrentMessagesNoneLost drives many conversations at once (run with -race).
func TestConcurrentMessagesNoneLost(t *testing.T) {
	e := newEnv(t, nil)
	var mu sync.Mutex
	seen := map[string]int{}
	e.model.Func = func(_ context.Context, req conch.ModelRequest) (conch.ModelResponse, error) {
		text := req.Messages[len(req.Messages)-1].Text
		mu.Lock()
		seen[text]++
		mu.Unlock()
		return conch.ModelResponse{Text: "re: " + text}, nil
	}
	e.start()
	var wg sync.WaitGroup
	for c := range 10 {
		wg.Go(func() {
			for m := range 10 {
				e.send(fmt.Sprint("conv", c), "alice", fmt.Sprintf("c%d m%d", c, m))
			}
		})
	}
	wg.Wait()
	e.waitFor("100 replies", countKind(conch.OutboundReply, 100))
	e.idle()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 100 {
		t.Fatalf("model saw %d distinct messages, want 100", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%q handled %d times", k, n)
		}
	}
}

var _ = errors.New

// describingRuntime is a Runtime with the operator's view of its sandboxes.
type describingRuntime struct {
	conch.Runtime
	conch.SandboxAdmin
}

func (describingRuntime) Remove(context.Context, conch.ConversationKey) error { return nil }

func (describingRuntime) SandboxInfo(_ context.Context, key conch.ConversationKey) (conch.SandboxInfo, error) {
	return conch.SandboxInfo{Name: "conch-" + key.ID, State: "running", Running: true, ImageCurrent: true}, nil
}

func (describingRuntime) SandboxStats(context.Context, conch.ConversationKey) (conch.SandboxStats, error) {
	return conch.SandboxStats{}, nil
}

func TestStatusDescribesSandbox(t *testing.T) {
	e := newEnv(t, nil)
	e.gw.opts.Runtime = describingRuntime{}
	e.start()
	e.send("room", "alice", "/status")
	out := e.waitFor("status", countKind(conch.OutboundNotice, 1))
	if got := out[0].Text; !strings.Contains(got, "Computer: conch-room, running") {
		t.Fatalf("status %q lacks the sandbox line", got)
	}
}

func TestSlashMessageReachesModel(t *testing.T) {
	e := newEnv(t, nil)
	e.model.Push(fake.Text("cleaning up"))
	e.start()
	e.send("room", "alice", "/tmp is full")
	out := e.waitFor("reply", countKind(conch.OutboundReply, 1))
	if got := texts(out, conch.OutboundReply)[0]; got != "cleaning up" {
		t.Fatalf("reply %q", got)
	}
}

func TestRedeliveredCommandHandledOnce(t *testing.T) {
	e := newEnv(t, nil)
	e.model.Push(fake.Text("answer"))
	e.start()
	reset := conch.Inbound{Key: conch.ConversationKey{Channel: cli, ID: "room"}, Sender: "alice", Text: "/reset", ExternalID: "$reset"}
	if err := e.gw.HandleInbound(context.Background(), reset); err != nil {
		t.Fatal(err)
	}
	e.waitFor("reset notice", countKind(conch.OutboundNotice, 1))
	hello := conch.Inbound{Key: reset.Key, Sender: "alice", Text: "hello", ExternalID: "$hello"}
	if err := e.gw.HandleInbound(context.Background(), hello); err != nil {
		t.Fatal(err)
	}
	e.waitFor("reply", countKind(conch.OutboundReply, 1))
	e.idle()
	// The channel delivers the batch again: nothing must change.
	for _, in := range []conch.Inbound{reset, hello} {
		if err := e.gw.HandleInbound(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	e.idle()
	if n := len(texts(e.ch.Sent(), conch.OutboundNotice)); n != 1 {
		t.Fatalf("%d notices, want the one reset notice", n)
	}
	hist, err := e.db.History(context.Background(), reset.Key)
	if err != nil || len(hist) != 2 {
		t.Fatalf("history %+v (%v): want hello and its answer kept", hist, err)
	}
}

func TestRedeliveredCommandAfterRestart(t *testing.T) {
	db := sqlitetest.MustOpenFile(t)
	e := newEnv(t, db)
	e.start()
	reset := conch.Inbound{Key: conch.ConversationKey{Channel: cli, ID: "room"}, Sender: "alice", Text: "/reset", ExternalID: "$reset"}
	if err := e.gw.HandleInbound(context.Background(), reset); err != nil {
		t.Fatal(err)
	}
	e.waitFor("reset notice", countKind(conch.OutboundNotice, 1))
	e.shutdown()

	e2 := newEnv(t, db)
	e2.start()
	if err := e2.gw.HandleInbound(context.Background(), reset); err != nil {
		t.Fatal(err)
	}
	e2.idle()
	if out := e2.ch.Sent(); len(out) != 0 {
		t.Fatalf("a /reset redelivered after a restart was handled again: %+v", out)
	}
}
