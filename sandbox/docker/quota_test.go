package docker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"

	"github.com/moby/moby/client"
)

// TestWorkspaceQuota: with Options.Disk, a workspace cannot grow past its
// limit, df shows the limit, and the workspace persists across a stop; an
// engine that cannot enforce a quota refuses to start.
func TestWorkspaceQuota(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		const limit = 64 << 20
		if eng.Name != docker.EnginePodman {
			o := docker.Options{Host: eng.Host, Engine: eng.Name, InstanceID: newInstance(), Image: eng.Image,
				DataDir: t.TempDir(), CacheDir: eng.CacheDir, Disk: limit}
			rt, err := docker.New(ctxT(t), o)
			if err == nil {
				rt.Close()
				t.Fatalf("New with a disk quota on %s: got no error, want %v", eng.Name, docker.ErrNoDiskQuota)
			}
			if !errors.Is(err, docker.ErrNoDiskQuota) || !strings.Contains(conch.UserMessage(err), "sandbox.disk") {
				t.Fatalf("New: got %v (user text %q), want ErrNoDiskQuota naming sandbox.disk", err, conch.UserMessage(err))
			}
			return
		}
		rt := newRuntime(t, eng, func(o *docker.Options) {
			withAgent(t)(o)
			o.Disk = limit
		})
		ctx := ctxT(t)
		k := key("!quota:example.org")
		sb, err := rt.Sandbox(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if err := sb.WriteFile(ctx, "kept.txt", []byte("kept"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := run(t, sb, "df", "-B1", "--output=size", "/workspace")
		f := strings.Fields(out(r))
		if len(f) != 2 {
			t.Fatalf("df: %q", out(r))
		}
		start := time.Now()
		fill, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"dd", "if=/dev/zero", "of=/workspace/fill", "bs=1M", "count=200"}, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("df size %s bytes; dd of 200 MiB: exit %d after %s: %s", f[1], fill.ExitCode, time.Since(start).Round(time.Millisecond), lastLineOf(out(fill)))
		if fill.ExitCode == 0 || !strings.Contains(string(fill.Output), "No space left on device") {
			t.Errorf("dd past the quota: got exit %d %q, want ENOSPC", fill.ExitCode, out(fill))
		}
		if st, err := rt.SandboxStats(ctx, k); err != nil || st.DiskLimit != limit || st.DiskBytes <= 0 {
			t.Errorf("SandboxStats: got %+v, %v; want DiskLimit %d and some use", st, err, limit)
		}
		if d := rt.Describe(ctx, k); !strings.Contains(d, "MiB used") {
			t.Errorf("Describe: got %q, want the workspace use", d)
		}
		run(t, sb, "rm", "/workspace/fill")
		timeout := 0
		if _, err := eng.Client(t).ContainerStop(ctx, sb.ID(), client.ContainerStopOptions{Timeout: &timeout}); err != nil {
			t.Fatal(err)
		}
		b, err := sb.ReadFile(context.WithoutCancel(ctx), "kept.txt", 0)
		if err != nil || string(b) != "kept" {
			t.Errorf("after a stop: got %q, %v; want the workspace kept", b, err)
		}
	})
}

func lastLineOf(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
