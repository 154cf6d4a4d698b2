package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"conch"
	"conch/fake"
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
