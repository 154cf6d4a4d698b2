package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"conch"
	"conch/fake"
	"conch/sqlite/sqlitetest"
)

// recHooks records the turn hooks the gateway runs.
type recHooks struct {
	mu    sync.Mutex
	calls []string
}

func (h *recHooks) BeforeTurn(_ context.Context, t conch.Turn) conch.HookRan {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, "before "+t.Inbound.Text)
	return conch.HookRan{Stage: "pre-turn", Hooks: 1}
}

func (h *recHooks) AfterTurn(_ context.Context, t conch.Turn, answer string, normal bool) conch.HookRan {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf("after %s: %q normal=%v", t.Inbound.Text, answer, normal))
	return conch.HookRan{Stage: "post-turn", Hooks: 1, Failed: []string{"10-x"}}
}

func TestHooksRunAroundEachTurn(t *testing.T) {
	h := &recHooks{}
	e := newEnvWith(t, nil, func(o *Options) { o.Hooks = h })
	e.start()
	e.model.Push(fake.Text("hi alice"), fake.Fail(&conch.ModelError{Kind: conch.KindAuth, Err: errors.New("bad key")}))
	e.send("c1", "alice", "hello")
	e.idle()
	e.send("c1", "alice", "again")
	e.idle()
	h.mu.Lock()
	defer h.mu.Unlock()
	want := []string{"before hello", `after hello: "hi alice" normal=true`, "before again", `after again: "" normal=false`}
	if fmt.Sprint(h.calls) != fmt.Sprint(want) {
		t.Errorf("hooks ran %q, want %q", h.calls, want)
	}
	// What ran is kept as the turns' events.
	evs, err := e.db.EventsSince(context.Background(), conch.ConversationKey{Channel: cli, ID: "c1"}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	for _, ev := range evs {
		if r, ok := ev.Data.(conch.HookRan); ok {
			stages = append(stages, fmt.Sprintf("%d:%s%v", ev.Turn, r.Stage, r.Failed))
		}
	}
	if got := fmt.Sprint(stages); got != "[1:pre-turn[] 1:post-turn[10-x] 2:pre-turn[] 2:post-turn[10-x]]" {
		t.Errorf("hook events %s", got)
	}
}

// blockingHooks records post-turn hooks; those of a message named "hang"
// wait for conch to stop, as if it crashed while they ran.
type blockingHooks struct{ recHooks }

func (h *blockingHooks) AfterTurn(ctx context.Context, t conch.Turn, answer string, normal bool) conch.HookRan {
	if t.Inbound.Text == "hang" {
		<-ctx.Done()
		return conch.HookRan{Stage: "post-turn"}
	}
	return h.recHooks.AfterTurn(ctx, t, answer, normal)
}

// Post-turn hooks that a crash kept from running run at the next start,
// before the conversation's next turn; hooks that ran are not run again.
func TestPostTurnHooksRecoveredAfterARestart(t *testing.T) {
	db := sqlitetest.MustOpenMemory(t)
	h := &blockingHooks{}
	e := newEnvWith(t, db, func(o *Options) { o.Hooks = h })
	e.start()
	e.model.Push(fake.Text("one"), fake.Text("two"))
	e.send("c1", "alice", "first")
	e.idle()
	e.send("c1", "alice", "hang")
	e.waitFor("the second answer", countKind(conch.OutboundReply, 2))
	e.shutdown()

	h2 := &recHooks{}
	e2 := newEnvWith(t, db, func(o *Options) { o.Hooks = h2 })
	e2.start()
	e2.idle()
	h2.mu.Lock()
	defer h2.mu.Unlock()
	if want := []string{`after hang: "two" normal=true`}; fmt.Sprint(h2.calls) != fmt.Sprint(want) {
		t.Fatalf("after the restart hooks ran %q, want %q", h2.calls, want)
	}
}
