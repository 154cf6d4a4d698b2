package docker_test

import (
	"context"
	"errors"
	"fmt"
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
			if !errors.Is(err, docker.ErrNoDiskQuota) || !strings.Contains(conch.UserMessage(err), "sandbox.disk") ||
				!strings.Contains(err.Error(), "no quota support") {
				t.Fatalf("New: got %v (user text %q), want ErrNoDiskQuota naming sandbox.disk with the engine's answer", err, conch.UserMessage(err))
			}
			t.Logf("explicit quota on %s refused: %s", eng.Name, conch.UserMessage(err))
			// The default (auto) runs without one instead.
			o.DiskAuto = true
			rt, err = docker.New(ctxT(t), o)
			if err != nil {
				t.Fatalf("New with sandbox.disk = auto: %v", err)
			}
			rt.Close()
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

// TestWorkspaceQuotaDockerXFS: on a dockerd whose data root is xfs mounted
// with project quotas, a workspace quota is the volume's size option: writes
// past it fail with ENOSPC, df shows it, /status and the stats report its
// use, and it holds in a re-created container on the same workspace.
func TestWorkspaceQuotaDockerXFS(t *testing.T) {
	const limit = 64 << 20
	started := time.Now()
	eng := engine.PrivateDocker(t, engine.WithXFSQuota(2<<30))
	t.Logf("private dockerd on xfs (prjquota) ready in %s", time.Since(started).Round(time.Millisecond))
	rt := newRuntime(t, eng.Engine, func(o *docker.Options) {
		withAgent(t)(o)
		o.Disk = limit
	})
	ctx := ctxT(t)
	k := key("!quota-xfs:example.org")
	sb, err := rt.Sandbox(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	vols, err := eng.Client(t).VolumeList(ctx, client.VolumeListOptions{
		Filters: make(client.Filters).Add("label", docker.LabelInstance+"="+rt.opts.InstanceID)})
	if err != nil || len(vols.Items) != 1 || vols.Items[0].Options["size"] != fmt.Sprint(limit) || vols.Items[0].Labels[docker.LabelDisk] != fmt.Sprint(limit) {
		t.Fatalf("workspace volumes: got %+v, %v; want one with the size option and the %s label", vols.Items, err, docker.LabelDisk)
	}
	if err := sb.WriteFile(ctx, "kept.txt", []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(sb conch.Sandbox, when string) {
		t.Helper()
		r := run(t, sb, "df", "-B1", "--output=size", "/workspace")
		f := strings.Fields(out(r))
		if len(f) != 2 || f[1] != fmt.Sprint(limit) {
			t.Errorf("%s: df /workspace size: got %q, want %d", when, out(r), limit)
		}
		start := time.Now()
		fill, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"dd", "if=/dev/zero", "of=/workspace/fill", "bs=1M", "count=100"}, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: df size %s bytes; dd of 100 MiB: exit %d after %s: %s", when, f[len(f)-1], fill.ExitCode, time.Since(start).Round(time.Millisecond), lastLineOf(out(fill)))
		if fill.ExitCode == 0 || !strings.Contains(string(fill.Output), "No space left on device") {
			t.Errorf("%s: dd past the quota: got exit %d %q, want ENOSPC", when, fill.ExitCode, out(fill))
		}
		if st, err := rt.SandboxStats(ctx, k); err != nil || st.DiskLimit != limit || st.DiskBytes < limit/2 {
			t.Errorf("%s: SandboxStats: got %+v, %v; want DiskLimit %d and the fill counted", when, st, err, limit)
		}
		if d := rt.Describe(ctx, k); !strings.Contains(d, "of 64 MiB used") {
			t.Errorf("%s: Describe: got %q, want the workspace use of its 64 MiB", when, d)
		}
		run(t, sb, "rm", "/workspace/fill")
	}
	check(sb, "first container")
	// A new container on the same workspace (as after an image upgrade).
	first := sb.ID()
	rt.Close()
	if _, err := eng.Client(t).ContainerRemove(ctx, first, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	rt = reopen(t, eng.Engine, rt.opts)
	if err := rt.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	sb, err = rt.Sandbox(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID() == first {
		t.Fatalf("the container was not re-created")
	}
	if b, err := sb.ReadFile(ctx, "kept.txt", 0); err != nil || string(b) != "kept" {
		t.Errorf("after a re-create: got %q, %v; want the workspace kept", b, err)
	}
	check(sb, "re-created container")
	t.Logf("whole test %s", time.Since(started).Round(time.Millisecond))
}

func lastLineOf(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
