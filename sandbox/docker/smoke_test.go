package docker_test

import (
	"testing"

	"conch/internal/testenv/engine"
)

func TestSmoke(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		rt := newRuntime(t, eng, nil)
		ctx := ctxT(t)
		if err := rt.Reconcile(ctx); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		info, err := rt.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("info: %+v", info)
		sb, err := rt.Sandbox(ctx, key("!smoke:example.org"))
		if err != nil {
			t.Fatalf("Sandbox: %v", err)
		}
		res := run(t, sb, "sh", "-c", "id; ps -o pid,pgid,sid,comm; cat /proc/self/status | grep Cap; ls /sys/fs/cgroup /sys/fs/cgroup/memory | head -50; cat /sys/fs/cgroup/memory/memory.oom_control; ulimit -a")
		t.Logf("exit %d stopped %q output:\n%s", res.ExitCode, res.Stopped, res.Output)
	})
}
