package schedule_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"conch"
	"conch/agent"
	"conch/fake"
	"conch/gateway"
	"conch/schedule"
	"conch/sqlite"
	"conch/tool"
)

var key = conch.ConversationKey{Channel: conch.ChannelCLI, ID: "local"}

// world is a running conch over a store file: gateway, fake model, fake
// channel, the schedule tool and the scheduler.
type world struct {
	db    *sqlite.DB
	model *fake.Model
	ch    *fake.Channel
	gw    *gateway.Gateway
	sched *schedule.Scheduler
	// skew moves the scheduler's clock forward.
	skew atomic.Int64
	stop func()
}

func start(t *testing.T, path string, model *fake.Model) *world {
	t.Helper()
	ctx := t.Context()
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{db: db, model: model, ch: fake.NewChannel(conch.ChannelCLI)}
	st := &tool.Schedule{}
	ag, err := agent.New(agent.Options{Model: model, Store: db, Facts: db, Tools: []conch.Tool{st}})
	if err != nil {
		t.Fatal(err)
	}
	w.gw, err = gateway.New(gateway.Options{Store: db, Agent: ag, Channels: []conch.Channel{w.ch}, Facts: db, Events: db,
		Allow: map[conch.ChannelName]gateway.Allowlist{conch.ChannelCLI: gateway.NewAllowlist("alice")}})
	if err != nil {
		t.Fatal(err)
	}
	w.sched, err = schedule.New(schedule.Options{Store: db,
		Now: func() time.Time { return time.Now().Add(time.Duration(w.skew.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	st.S = w.sched
	rctx, cancel := context.WithCancel(context.Background())
	gdone, sdone := make(chan struct{}), make(chan struct{})
	go func() { defer close(gdone); _ = w.gw.Run(rctx) }()
	go func() { defer close(sdone); _ = w.sched.Run(rctx, w.gw) }()
	w.stop = func() {
		cancel()
		<-sdone
		<-gdone
		db.Close()
	}
	t.Cleanup(func() {
		if w.stop != nil {
			w.stop()
		}
	})
	return w
}

func (w *world) shutdown() {
	w.stop()
	w.stop = nil
}

// advance moves the scheduler's clock forward and makes it look again.
func (w *world) advance(t *testing.T, d time.Duration) {
	w.skew.Add(int64(d))
	if _, err := w.sched.Cancel(t.Context(), conch.ConversationKey{}, "none"); err != nil { // pokes the scheduler
		t.Fatal(err)
	}
}

func waitReply(t *testing.T, ch *fake.Channel, n int) []conch.Outbound {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sent, err := ch.WaitSent(ctx, func(s []conch.Outbound) bool { return len(replies(s)) >= n })
	if err != nil {
		t.Fatal(err)
	}
	return replies(sent)
}

func replies(s []conch.Outbound) []conch.Outbound {
	var out []conch.Outbound
	for _, o := range s {
		if o.Kind == conch.OutboundReply {
			out = append(out, o)
		}
	}
	return out
}

// "Check the build every hour and tell me when it breaks": the model sets
// an hourly wake; an hour later the wake arrives as a message of the
// conversation, the model answers, and the answer reaches the channel.
func TestCheckTheBuildEveryHour(t *testing.T) {
	model := &fake.Model{}
	w := start(t, filepath.Join(t.TempDir(), "conch.db"), model)
	model.Push(
		fake.Call("c1", "schedule", `{"action":"cron","cron":"@hourly","message":"Check the build; tell the person only if it is broken."}`),
		fake.Text("I will check the build every hour."),
	)
	if err := w.gw.HandleInbound(t.Context(), conch.Inbound{Key: key, Sender: "alice", Text: "check the build every hour and tell me when it breaks", ExternalID: "m1"}); err != nil {
		t.Fatal(err)
	}
	if r := waitReply(t, w.ch, 1); r[0].Text != "I will check the build every hour." {
		t.Fatalf("first answer = %q", r[0].Text)
	}
	es, err := w.db.Schedules(t.Context(), key)
	if err != nil || len(es) != 1 || es[0].Kind != schedule.KindCron {
		t.Fatalf("stored schedules = %+v, %v", es, err)
	}
	model.Push(fake.Text("The build is broken: TestParse fails."))
	w.advance(t, time.Until(es[0].Next)+time.Second)
	r := waitReply(t, w.ch, 2)
	if r[1].Text != "The build is broken: TestParse fails." || r[1].Key != key {
		t.Fatalf("wake's answer = %+v", r[1])
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1].Messages
	if got := last[len(last)-1].Text; !strings.Contains(got, "Check the build") || !strings.Contains(got, es[0].ID) {
		t.Errorf("the model was woken with %q", got)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		es2, _ := w.db.Schedules(t.Context(), key)
		if len(es2) == 1 && es2[0].Next.After(es[0].Next) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after firing the cron wake is %+v, want it moved on", es2)
		}
	}
}

// A wake due while conch was down fires once at the next start, saying so,
// and not again after another restart — even if the store lost the record
// of its firing (the message's ExternalID keeps it from being stored twice).
func TestMissedWakeFiresOnceAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conch.db")
	ctx := t.Context()
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	wake := schedule.Entry{ID: "s-missed", Key: key, Kind: schedule.KindAt, Message: "Tell the person the backup ran.", Next: due, CreatedAt: due.Add(-time.Hour)}
	if err := db.AddSchedule(ctx, wake); err != nil {
		t.Fatal(err)
	}
	db.Close()

	model := &fake.Model{}
	model.Push(fake.Text("The backup ran."))
	w := start(t, path, model)
	r := waitReply(t, w.ch, 1)
	if r[0].Text != "The backup ran." {
		t.Fatalf("answer = %q", r[0].Text)
	}
	msgs := model.Requests()[0].Messages
	if got := msgs[len(msgs)-1].Text; !strings.Contains(got, "while conch was not running") {
		t.Errorf("missed wake without its note: %q", got)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		es, _ := w.db.Schedules(ctx, key)
		if len(es) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fired wake still stored: %+v", es)
		}
	}
	// Simulate a crash before the firing was recorded: the wake is back.
	if err := w.db.AddSchedule(ctx, wake); err != nil {
		t.Fatal(err)
	}
	w.shutdown()

	w = start(t, path, model)
	deadline := time.Now().Add(5 * time.Second)
	for {
		es, _ := w.db.Schedules(ctx, key)
		if len(es) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the wake was not handled after the restart: %+v", es)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := w.gw.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("the model was asked %d times, want once", n)
	}
	if n := len(replies(w.ch.Sent())); n != 0 {
		t.Errorf("%d more answers after the restart, want none", n)
	}
}
