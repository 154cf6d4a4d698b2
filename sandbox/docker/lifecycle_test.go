package docker_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"conch"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"

	"github.com/moby/moby/client"
)

type auditLog struct {
	mu  sync.Mutex
	evs []conch.AuditEvent
}

var _ conch.AuditStore = (*auditLog)(nil)

func (a *auditLog) Audit(_ context.Context, ev conch.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evs = append(a.evs, ev)
	return nil
}

func (a *auditLog) kinds() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ks []string
	for _, e := range a.evs {
		ks = append(ks, string(e.Kind))
	}
	return ks
}

// TestConcurrentFirstUse: many callers asking for one new conversation's
// sandbox at once get one container; creation and removal are audited.
func TestConcurrentFirstUse(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		audit := &auditLog{}
		rt := newRuntime(t, eng, func(o *docker.Options) {
			withAgent(t)(o)
			o.Audit = audit
		})
		ctx := ctxT(t)
		k := key("!busy:example.org")
		ids := make([]string, 8)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				sb, err := rt.Sandbox(ctx, k)
				if err != nil {
					t.Error(err)
					return
				}
				res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"true"}})
				if err != nil || res.ExitCode != 0 {
					t.Errorf("exec: %+v %v", res, err)
				}
				ids[i] = sb.ID()
			})
		}
		wg.Wait()
		for _, id := range ids[1:] {
			if id != ids[0] {
				t.Fatalf("got containers %v, want one", ids)
			}
		}
		if err := rt.Remove(ctx, k); err != nil {
			t.Fatal(err)
		}
		if got := audit.kinds(); len(got) != 2 || got[0] != "sandbox_create" || got[1] != "sandbox_remove" {
			t.Errorf("audit events %v, want sandbox_create then sandbox_remove", got)
		}
		audit.mu.Lock()
		var detail map[string]any
		_ = json.Unmarshal(audit.evs[0].Detail, &detail)
		conv := audit.evs[0].Conversation
		audit.mu.Unlock()
		if conv != k || detail["id"] != ids[0] || detail["engine"] != eng.Name {
			t.Errorf("create event: conversation %v detail %v, want %v with id and engine", conv, detail, k)
		}
	})
}

// TestStoppedBehindOurBack: a container stopped by someone else (an
// operator, a host reboot) is restarted by the next operation.
func TestStoppedBehindOurBack(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		for _, mode := range []string{"agent", "engine-exec"} {
			t.Run(mode, func(t *testing.T) {
				rt := newRuntime(t, eng, func(o *docker.Options) {
					if mode == "agent" {
						withAgent(t)(o)
					}
				})
				ctx := ctxT(t)
				sb, err := rt.Sandbox(ctx, key("!stopped:example.org"))
				if err != nil {
					t.Fatal(err)
				}
				run(t, sb, "true")
				timeout := 1
				if _, err := eng.Client(t).ContainerStop(ctx, sb.ID(), client.ContainerStopOptions{Timeout: &timeout}); err != nil {
					t.Fatal(err)
				}
				if r := run(t, sb, "echo", "back"); out(r) != "back" {
					t.Errorf("after an outside stop: got %q, want back", out(r))
				}
				if _, err := sb.ListFiles(ctx, "/workspace"); err != nil {
					t.Errorf("list after restart: %v", err)
				}
			})
		}
	})
}
