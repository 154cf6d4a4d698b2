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

func (h *recHooks) BeforeTurn(_ context.Context, t conch.Turn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, "before "+t.Inbound.Text)
}

func (h *recHooks) AfterTurn(_ context.Context, t conch.Turn, answer string, normal bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf("after %s: %q normal=%v", t.Inbound.Text, answer, normal))
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
}
