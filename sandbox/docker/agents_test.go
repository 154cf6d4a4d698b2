package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sandboximage "conch/images/sandbox"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

var allAgents = []string{"claude", "codex", "gemini"}

// pinned returns the pinned version of each agent.
func pinned(t testing.TB, names []string) map[string]string {
	t.Helper()
	as, err := sandboximage.LookupAgents(names)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, a := range as {
		m[a.Name] = a.Version
	}
	return m
}

type lines struct {
	mu sync.Mutex
	l  []string
}

func (l *lines) add(s string) { l.mu.Lock(); l.l = append(l.l, s); l.mu.Unlock() }
func (l *lines) text() string { l.mu.Lock(); defer l.mu.Unlock(); return strings.Join(l.l, "\n") }

// TestAgentImage: the derived image with all three real CLIs is built from
// the npm tarballs on the base image (no builder, no registry), keeps the
// base's configuration, and in a hardened sandbox (read-only root, uid 1000,
// no network) each CLI prints its pinned version; a second ensure reuses it.
func TestAgentImage(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		var progress lines
		rt := newRuntime(t, eng, func(o *docker.Options) {
			o.Agents = allAgents
			o.BuildProgress = progress.add
		})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		start := time.Now()
		ref, err := rt.AgentImage(ctx, allAgents, progress.add)
		if err != nil {
			t.Fatalf("AgentImage: %v\nprogress:\n%s", err, progress.text())
		}
		t.Logf("%s: %s ensured in %s", eng.Name, ref, time.Since(start).Round(time.Millisecond))
		if !strings.HasPrefix(ref, "conch-sandbox-claude-codex-gemini:") {
			t.Errorf("ref %q, want conch-sandbox-claude-codex-gemini:<hash>", ref)
		}
		api := eng.Client(t)
		ins, err := api.ImageInspect(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		base, err := api.ImageInspect(ctx, eng.Image)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: image size %d MiB (base %d MiB)", eng.Name, ins.Size>>20, base.Size>>20)
		labels := ins.Config.Labels
		for name, v := range pinned(t, allAgents) {
			if got := labels[sandboximage.AgentVersionLabel(name)]; got != v {
				t.Errorf("label %s = %q, want %q", sandboximage.AgentVersionLabel(name), got, v)
			}
		}
		for k, want := range map[string]string{
			sandboximage.AgentsLabel: "claude,codex,gemini", sandboximage.RefLabel: ref,
			sandboximage.HashLabel: sandboximage.Hash(),
		} {
			if labels[k] != want {
				t.Errorf("label %s = %q, want %q", k, labels[k], want)
			}
		}
		if !strings.HasSuffix(ref, ":"+labels[sandboximage.AgentsHashLabel]) {
			t.Errorf("ref %s does not end in the agents hash %q", ref, labels[sandboximage.AgentsHashLabel])
		}
		if ins.Config.User != base.Config.User || ins.Config.WorkingDir != base.Config.WorkingDir ||
			!slices.Equal(ins.Config.Cmd, base.Config.Cmd) {
			t.Errorf("config user %q dir %q cmd %q, want the base's %q %q %q", ins.Config.User, ins.Config.WorkingDir, ins.Config.Cmd,
				base.Config.User, base.Config.WorkingDir, base.Config.Cmd)
		}
		for _, e := range base.Config.Env {
			if !slices.Contains(ins.Config.Env, e) {
				t.Errorf("env %q of the base is missing: %q", e, ins.Config.Env)
			}
		}
		got, err := rt.ImageAgents(ctx)
		if err != nil || len(got) != 3 {
			t.Errorf("ImageAgents: %v, %v; want the three agents", got, err)
		}

		// A hardened sandbox (the real create path) runs the derived image.
		sb, err := rt.Sandbox(ctx, key("!agents:example.org"))
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{
			"claude": "2.1.330 (Claude Code)", "codex": "codex-cli 0.169.0", "gemini": "0.61.0",
		} {
			res := run(t, sb, name, "--version")
			if res.ExitCode != 0 || !strings.Contains(out(res), want) {
				t.Errorf("%s --version: exit %d, %q; want %q", name, res.ExitCode, out(res), want)
			}
		}
		// Codex started interactively does not copy itself into the
		// workspace (/etc/codex/config.toml turns its daemon off).
		if r := run(t, sb, "sh", "-c", `export TMUX_TMPDIR=/tmp OPENAI_API_KEY=sk-test
			tmux new-session -d -s cx -x 100 -y 30 codex && sleep 12
			tmux capture-pane -p -t cx | grep -c . ; tmux kill-server
			du -sk $HOME/.codex; ls $HOME/.codex/packages 2>&1`); !strings.Contains(out(r), "No such file") {
			t.Errorf("codex start: want no $CODEX_HOME/packages, got %q", out(r))
		} else {
			t.Logf("%s: codex start wrote: %q", eng.Name, out(r))
		}
		if r := run(t, sb, "sh", "-c", "id -u; touch /opt/conch-agents/x 2>&1; stat -c '%u %a' /opt/conch-agents/claude/claude /usr/local/bin/codex"); !strings.Contains(out(r), "1000") ||
			!strings.Contains(out(r), "Read-only file system") || !strings.Contains(out(r), "0 755\n0 755") {
			t.Errorf("uid, read-only /opt, root-owned CLIs: got %q", out(r))
		}

		// Reused: a runtime started again finds the image and builds nothing.
		var again lines
		rt2 := reopen(t, eng, rt.opts)
		if _, err := rt2.EnsureImage(ctx, again.add); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(again.text(), "building") || strings.Contains(again.text(), "copying") {
			t.Errorf("second ensure rebuilt: %q", again.text())
		}
		ins2, err := api.ImageInspect(ctx, ref)
		if err != nil || ins2.ID != ins.ID {
			t.Errorf("image after the second ensure: %v, id %s, want %s", err, ins2.ID, ins.ID)
		}
	})
}

// TestUserImageFromBase: an image an operator built FROM conch's image
// inherits its hash label; under another name it is the operator's and is
// used as it is, never rebuilt, even when that label is from an older
// definition.
func TestUserImageFromBase(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		ctx := ctxT(t)
		api := eng.Client(t)
		tag := "user-sandbox:" + strings.TrimPrefix(newInstance(), "test-")
		c, err := api.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{Image: eng.Image}})
		if err != nil {
			t.Fatal(err)
		}
		defer api.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
		// As if FROM a conch image of an older definition: it inherits the
		// hash label (not current) and conch's reference label.
		if _, err := api.ContainerCommit(ctx, c.ID, client.ContainerCommitOptions{Reference: tag, Config: &container.Config{},
			Changes: []string{"LABEL " + sandboximage.HashLabel + "=0123456789abcdef", "LABEL " + sandboximage.RefLabel + "=" + eng.Image, "LABEL user.made=1"}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = api.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true}) })
		before, err := api.ImageInspect(ctx, tag)
		if err != nil {
			t.Fatal(err)
		}
		if before.Config.Labels[sandboximage.HashLabel] != "0123456789abcdef" {
			t.Fatalf("the committed image has labels %v", before.Config.Labels)
		}
		var progress lines
		rt := newRuntime(t, eng, func(o *docker.Options) { o.Image = tag })
		h, err := rt.EnsureImage(ctx, progress.add)
		if err != nil {
			t.Fatal(err)
		}
		after, err := api.ImageInspect(ctx, tag)
		if err != nil {
			t.Fatal(err)
		}
		if after.ID != before.ID || progress.text() != "" {
			t.Errorf("the operator's image was rebuilt (id %s → %s, progress %q)", before.ID, after.ID, progress.text())
		}
		if h != before.ID {
			t.Errorf("hash of an operator's image: got %q, want its id %q", h, before.ID)
		}
	})
}

// BenchmarkAgentImage: building the image with all three CLIs, cold (empty
// download cache → built), cached (downloads cached, image built again) and
// reused (present: a no-op ensure). It runs on a base of its own (the test
// image committed under another name, an operator's image to conch), so the
// derived image it removes is no other test's.
//
//	go test -run X -bench AgentImage -benchtime 1x ./sandbox/docker
func BenchmarkAgentImage(b *testing.B) {
	eng := engine.Docker(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	api := eng.Client(b)
	base := "conch-bench-base:" + strings.TrimPrefix(newInstance(), "test-")
	c, err := api.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{Image: eng.Image}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := api.ContainerCommit(ctx, c.ID, client.ContainerCommitOptions{Reference: base, Config: &container.Config{},
		Changes: []string{"LABEL bench=" + base}}); err != nil {
		b.Fatal(err)
	}
	_, _ = api.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	var refs []string
	b.Cleanup(func() {
		for _, r := range append(refs, base) {
			_, _ = api.ImageRemove(context.Background(), r, client.ImageRemoveOptions{Force: true})
		}
	})
	cache := b.TempDir()
	var cold, cached, reused time.Duration
	for i := 0; i < b.N; i++ {
		if err := os.RemoveAll(filepath.Join(cache, "npm")); err != nil {
			b.Fatal(err)
		}
		for _, r := range refs {
			_, _ = api.ImageRemove(ctx, r, client.ImageRemoveOptions{Force: true})
		}
		rt := newRuntime(b, eng, func(o *docker.Options) { o.Image = base; o.CacheDir = cache })
		start := time.Now()
		ref, err := rt.AgentImage(ctx, allAgents, nil)
		if err != nil {
			b.Fatal(err)
		}
		cold += time.Since(start)
		refs = append(refs, ref)
		if _, err := api.ImageRemove(ctx, ref, client.ImageRemoveOptions{Force: true}); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if _, err := rt.AgentImage(ctx, allAgents, nil); err != nil {
			b.Fatal(err)
		}
		cached += time.Since(start)
		var progress lines
		start = time.Now()
		if _, err := rt.AgentImage(ctx, allAgents, progress.add); err != nil {
			b.Fatal(err)
		}
		reused += time.Since(start)
		if progress.text() != "" {
			b.Fatalf("reuse built: %q", progress.text())
		}
	}
	n := float64(b.N)
	b.ReportMetric(cold.Seconds()/n, "cold-s")
	b.ReportMetric(cached.Seconds()/n, "cached-s")
	b.ReportMetric(float64(reused.Microseconds())/1000/n, "reused-ms")
	b.ReportMetric(0, "ns/op")
}
