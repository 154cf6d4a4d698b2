package docker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/gateway"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"

	"github.com/moby/moby/client"
)

// Describe is /status's line about the conversation's computer, rendered by
// the gateway from this backend's view (conch.SandboxAdmin) at the
// runtime's clock.
func (r *testRuntime) Describe(ctx context.Context, key conch.ConversationKey) string {
	now := time.Now()
	if r.opts.Now != nil {
		now = r.opts.Now()
	}
	return gateway.SandboxStatus(ctx, r.Runtime, key, now, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// TestSandboxAdmin: the backend-neutral operator's view on a real engine,
// and Release leaving the container alone.
func TestSandboxAdmin(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		rt := newRuntime(t, eng, withAgent(t))
		ctx := ctxT(t)
		k := key("!admin:example.org")
		sb, err := rt.Sandbox(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		run(t, sb, "sh", "-c", "head -c 1048576 /dev/zero > /workspace/blob")
		name := docker.ContainerName(rt.opts.InstanceID, k)

		list, err := rt.Sandboxes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].Key != k || list[0].Name != name || !list[0].Running || list[0].Pool || list[0].Orphan {
			t.Fatalf("Sandboxes: got %+v, want one running %s for %s", list, name, k)
		}
		info, err := rt.SandboxInfo(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if info.ID != sb.ID() || info.State != "running" || !strings.HasSuffix(info.Image, eng.Image) || info.Engine == "" || info.Created.IsZero() {
			t.Errorf("SandboxInfo: got %+v, want id %s, running, image …%s, engine and created set", info, sb.ID(), eng.Image)
		}
		if info.Busy || time.Since(info.LastUsed) > time.Minute || !info.ImageCurrent || !info.ProfileCurrent || info.Workspace != name || info.StartedAt.IsZero() {
			t.Errorf("SandboxInfo: got %+v, want idle, just used, current, workspace %s, started", info, name)
		}
		var none *conch.NoSandboxError
		if _, err := rt.SandboxInfo(ctx, key("!none:example.org")); conch.KindOf(err) != conch.KindNotFound || !errors.As(err, &none) || len(none.Workspaces) != 0 {
			t.Errorf("SandboxInfo of a conversation without a sandbox: got %v, want KindNotFound, a NoSandboxError without workspaces", err)
		}
		if d, err := rt.Inspect(ctx, k.String()); err != nil || d.SandboxInfo != info || len(d.Hardening) == 0 {
			t.Errorf("Inspect(%s): got %+v, %v; want the SandboxInfo's view with its hardening", k, d, err)
		}

		st, err := rt.SandboxStats(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s stats: %+v", eng.Name, st)
		if st.MemoryBytes <= 0 || st.PIDs <= 0 || st.CPUPercent < 0 {
			t.Errorf("SandboxStats: got %+v, want memory > 0 and pids > 0", st)
		}
		if st.PIDsLimit != rt.Profile().Pids || st.AtPIDsLimit() {
			t.Errorf("SandboxStats: %d of %d processes, want the profile's limit %d and not at it", st.PIDs, st.PIDsLimit, rt.Profile().Pids)
		}
		if st.MemoryLimit != rt.Profile().Memory {
			t.Errorf("SandboxStats: memory limit %d, want the profile's %d", st.MemoryLimit, rt.Profile().Memory)
		}
		if st.DiskBytes != -1 && st.DiskBytes < 1<<20 {
			t.Errorf("SandboxStats: disk %d bytes, want -1 (unknown) or at least the 1 MiB written", st.DiskBytes)
		}

		if err := rt.Release(ctx, k); err != nil {
			t.Fatal(err)
		}
		ins, err := eng.Client(t).ContainerInspect(ctx, sb.ID(), client.ContainerInspectOptions{})
		if err != nil || !ins.Container.State.Running {
			t.Fatalf("after Release the container should still run: %v", err)
		}
		// The handle held across Release still works, on the same container.
		if r := run(t, sb, "echo", "still"); out(r) != "still" {
			t.Errorf("exec after Release: got %q, want still", out(r))
		}
		if sb.ID() != info.ID {
			t.Errorf("after Release: container %s, want the same %s", sb.ID(), info.ID)
		}

		if err := rt.Remove(ctx, k); err != nil {
			t.Fatal(err)
		}
		if list, err := rt.Sandboxes(ctx); err != nil || len(list) != 0 {
			t.Errorf("Sandboxes after Remove: %+v, %v; want none", list, err)
		}
	})
}
