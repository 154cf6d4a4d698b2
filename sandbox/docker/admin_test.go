package docker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// knownSet is a settable Options.Known.
type knownSet struct {
	mu   sync.Mutex
	keys map[conch.ConversationKey]bool
}

func (k *knownSet) Known(context.Context) ([]conch.ConversationKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []conch.ConversationKey
	for key := range k.keys {
		out = append(out, key)
	}
	return out, nil
}

func (k *knownSet) forget(key conch.ConversationKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.keys, key)
}

func byName(list []conch.SandboxInfo) map[string]conch.SandboxInfo {
	m := map[string]conch.SandboxInfo{}
	for _, s := range list {
		m[s.Name] = s
	}
	return m
}

// TestAdmin drives the operator's view on real containers: two
// conversations (one stopped), an orphan, a warm-pool container and a
// dangling workspace; Sandboxes, Inspect, /status, Prune and RemoveRef.
func TestAdmin(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		a, b, c := key("!a:example.org"), key("!b:example.org"), key("!c:example.org")
		known := &knownSet{keys: map[conch.ConversationKey]bool{a: true, b: true, c: true}}
		clock := &fakeClock{t: time.Now()}
		rt := newRuntime(t, eng, func(o *docker.Options) {
			o.Known = known.Known
			o.WarmPool = 1
			o.Retention = time.Hour
			o.SweepEvery = 24 * time.Hour // the test sweeps by Prune, not the janitor
			o.Now = clock.Now
		})
		ctx := ctxT(t)
		api := eng.Client(t)
		inst := rt.opts.InstanceID
		nameA, nameB, nameC := docker.ContainerName(inst, a), docker.ContainerName(inst, b), docker.ContainerName(inst, c)

		ids := map[string]string{}
		for _, k := range []conch.ConversationKey{a, b, c} {
			sb, err := rt.Sandbox(ctx, k)
			if err != nil {
				t.Fatalf("Sandbox %s: %v", k, err)
			}
			if r := run(t, sb, "true"); r.ExitCode != 0 {
				t.Fatalf("exec in %s: exit %d", k, r.ExitCode)
			}
			ids[k.String()] = sb.ID()
		}
		if err := rt.FillPool(ctx); err != nil {
			t.Fatalf("FillPool: %v", err)
		}
		timeout := 2
		if _, err := api.ContainerStop(ctx, ids[b.String()], client.ContainerStopOptions{Timeout: &timeout}); err != nil {
			t.Fatal(err)
		}
		known.forget(c)
		dangling := "conch-dangling-" + inst
		if _, err := api.VolumeCreate(ctx, client.VolumeCreateOptions{Name: dangling,
			Labels: map[string]string{docker.LabelInstance: inst, docker.LabelConversation: "matrix:!gone:example.org"}}); err != nil {
			t.Fatal(err)
		}

		t.Run("Sandboxes", func(t *testing.T) {
			list, err := rt.Sandboxes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 4 {
				t.Fatalf("got %d sandboxes %+v, want 4", len(list), list)
			}
			if !list[3].Pool || list[3].Conversation != conch.PoolConversation {
				t.Errorf("last entry %+v, want the pool container", list[3])
			}
			m := byName(list)
			for _, tc := range []struct {
				name, convo, state string
				orphan, lastUsed   bool
			}{
				{nameA, a.String(), "running", false, true},
				{nameB, b.String(), "exited", false, true},
				{nameC, c.String(), "running", true, true},
			} {
				s, ok := m[tc.name]
				if !ok {
					t.Errorf("%s missing from %v", tc.name, list)
					continue
				}
				if s.Conversation != tc.convo || s.State != tc.state || s.Orphan != tc.orphan || s.LastUsed.IsZero() == tc.lastUsed {
					t.Errorf("%s: got conversation %q state %q orphan %v last used %v, want %q %q %v used=%v",
						tc.name, s.Conversation, s.State, s.Orphan, s.LastUsed, tc.convo, tc.state, tc.orphan, tc.lastUsed)
				}
				if s.Freshness() != "current" || s.Workspace != tc.name || s.ID != ids[tc.convo] || len(s.ShortID()) != 12 {
					t.Errorf("%s: got freshness %q workspace %q id %s, want current, %s, %s", tc.name, s.Freshness(), s.Workspace, s.ID, tc.name, ids[tc.convo])
				}
				if s.Created.IsZero() || time.Since(s.Created) > time.Hour {
					t.Errorf("%s: created %v, want just now", tc.name, s.Created)
				}
			}
		})

		t.Run("SandboxCounts", func(t *testing.T) {
			// One listing, no inspect: the same counts as the list.
			counts, err := rt.SandboxCounts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprint(counts)
			want := "[{exited conversation 1} {running conversation 1} {running orphan 1} {running pool 1}]"
			if got != want {
				t.Fatalf("SandboxCounts %s, want %s", got, want)
			}
		})

		t.Run("Inspect", func(t *testing.T) {
			for _, ref := range []string{nameA, ids[a.String()][:12], a.String(), "/" + nameA} {
				d, err := rt.Inspect(ctx, ref)
				if err != nil {
					t.Fatalf("Inspect %q: %v", ref, err)
				}
				if d.ID != ids[a.String()] {
					t.Errorf("Inspect %q: got %s, want %s", ref, d.ID, ids[a.String()])
				}
			}
			d, err := rt.Inspect(ctx, nameA)
			if err != nil {
				t.Fatal(err)
			}
			settings := map[string]string{}
			for _, s := range d.Hardening {
				settings[s.Name] = s.Value
			}
			for k, want := range map[string]string{"init user": "1001:1001", "read-only root": "true", "privileged": "false",
				"pids limit": "128", "cpus": "1", "memory": "512 MiB", "init": "true"} {
				if got := settings[k]; got != want {
					t.Errorf("hardening %s: got %q, want %q", k, got, want)
				}
			}
			if !strings.Contains(settings["security options"], "no-new-privileges") || !strings.Contains(settings["tmpfs"], "/tmp") {
				t.Errorf("hardening: got %+v, want no-new-privileges and a /tmp tmpfs", d.Hardening)
			}
			if len(d.HardeningProblems) != 0 {
				t.Errorf("hardening problems %v, want none", d.HardeningProblems)
			}
			if d.OOMKilled || !d.Running || !strings.HasPrefix(d.Engine, eng.Name+" ") || d.Labels[docker.LabelInstance] != inst || !strings.HasSuffix(d.Image, eng.Image) {
				t.Errorf("got oom %v running %v engine %q labels %v image %q", d.OOMKilled, d.Running, d.Engine, d.Labels, d.Image)
			}
			if !slices.ContainsFunc(d.Mounts, func(m conch.SandboxMount) bool {
				return m.Destination == docker.WorkspaceDir && m.Source == nameA && !m.ReadOnly
			}) {
				t.Errorf("mounts %+v, want %s read-write at %s", d.Mounts, nameA, docker.WorkspaceDir)
			}
			if d, err := rt.Inspect(ctx, ids[b.String()][:6]); err != nil || d.State != "exited" || d.FinishedAt.IsZero() {
				t.Errorf("Inspect stopped b: got state %q finished %v, %v; want exited with a finish time", d.State, d.FinishedAt, err)
			}
		})

		t.Run("unknown refs", func(t *testing.T) {
			for _, ref := range []string{"nosuch", "matrix:!nobody:example.org", "fffffffffffff", ""} {
				_, err := rt.Inspect(ctx, ref)
				var re *conch.SandboxRefError
				if ref == "" {
					if conch.KindOf(err) != conch.KindInvalid {
						t.Errorf("Inspect(%q): got %v, want an invalid-input error", ref, err)
					}
					continue
				}
				if !errors.As(err, &re) || re.Ref != ref || conch.KindOf(err) != conch.KindNotFound {
					t.Errorf("Inspect(%q): got %v, want a not-found RefError", ref, err)
				}
				if _, err := rt.RemoveRef(ctx, ref, false); !errors.As(err, &re) {
					t.Errorf("RemoveRef(%q): got %v, want a RefError", ref, err)
				}
			}
		})

		t.Run("KeyOf", func(t *testing.T) {
			list, err := rt.Sandboxes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pool := list[len(list)-1].Name
			if _, err := rt.KeyOf(ctx, pool); conch.KindOf(err) != conch.KindInvalid {
				t.Errorf("KeyOf(pool %s): got %v, want refused", pool, err)
			}
			if k, err := rt.KeyOf(ctx, nameB); err != nil || k != b {
				t.Errorf("KeyOf(%s): got %v, %v; want %v", nameB, k, err, b)
			}
		})

		t.Run("Describe", func(t *testing.T) {
			for _, tc := range []struct {
				key     conch.ConversationKey
				prefix  string
				contain []string
			}{
				{a, "Computer: " + nameA + ", running, idle ", []string{"image current"}},
				{b, "Computer: " + nameB + ", stopped, restarted on next use, idle ", []string{"image current"}},
				{key("!never:example.org"), "Computer: none yet (created on first use)", nil},
				{conch.ConversationKey{}, "Computer: unknown: ", nil},
			} {
				got := rt.Describe(ctx, tc.key)
				if !strings.HasPrefix(got, tc.prefix) {
					t.Errorf("Describe(%v): got %q, want prefix %q", tc.key, got, tc.prefix)
				}
				for _, w := range tc.contain {
					if !strings.Contains(got, w) {
						t.Errorf("Describe(%v): got %q, want %q in it", tc.key, got, w)
					}
				}
			}
		})

		clock.Add(2 * time.Hour) // b is now past the 1h retention
		t.Run("Prune", func(t *testing.T) {
			want := []string{
				"container " + nameB + " (stopped and unused for 2h, past retention; workspace kept)",
				"container " + nameC + " (orphan: the store no longer knows conversation " + c.String() + ") and volume " + nameC,
				"volume " + dangling + " (dangling workspace of matrix:!gone:example.org, a conversation the store no longer knows)",
			}
			dry, err := rt.Prune(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(dry, want) {
				t.Fatalf("dry run:\ngot  %q\nwant %q", dry, want)
			}
			if list, _ := rt.Sandboxes(ctx); len(list) != 4 {
				t.Fatalf("after a dry run %d sandboxes, want all 4", len(list))
			}
			got, err := rt.Prune(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("prune:\ngot  %q\nwant %q", got, want)
			}
			list, err := rt.Sandboxes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 2 || list[0].Name != nameA || !list[1].Pool {
				t.Fatalf("after prune: %+v, want a and the pool", list)
			}
			for vol, kept := range map[string]bool{nameB: true, nameC: false, dangling: false, nameA: true} {
				_, err := api.VolumeInspect(ctx, vol, client.VolumeInspectOptions{})
				if kept != (err == nil) {
					t.Errorf("volume %s after prune: got %v, want kept=%v", vol, err, kept)
				}
			}
			if got := rt.Describe(ctx, b); got != "Computer: none now, workspace kept (a container is created on next use)" {
				t.Errorf("Describe(b) after prune: got %q", got)
			}
			if again, err := rt.Prune(ctx, false); err != nil || len(again) != 0 {
				t.Errorf("second prune: got %q, %v; want nothing", again, err)
			}
		})

		t.Run("RemoveRef", func(t *testing.T) {
			got, err := rt.RemoveRef(ctx, b.String(), false)
			if want := []string{"volume " + nameB}; err != nil || !slices.Equal(got, want) {
				t.Errorf("rm b (workspace only left): got %q, %v; want %q", got, err, want)
			}
			if _, err := rt.RemoveRef(ctx, b.String(), false); conch.KindOf(err) != conch.KindNotFound {
				t.Errorf("rm b again: got %v, want not found", err)
			}
			got, err = rt.RemoveRef(ctx, nameA, true)
			if want := []string{"container " + nameA}; err != nil || !slices.Equal(got, want) {
				t.Errorf("rm a --keep-workspace: got %q, %v; want %q", got, err, want)
			}
			if _, err := api.VolumeInspect(ctx, nameA, client.VolumeInspectOptions{}); err != nil {
				t.Errorf("a's workspace after --keep-workspace: %v", err)
			}
			// The conversation gets a new container on its old workspace.
			sb, err := rt.Sandbox(ctx, a)
			if err != nil {
				t.Fatal(err)
			}
			if sb.ID() == ids[a.String()] {
				t.Errorf("after rm --keep-workspace: same container %s, want a new one", sb.ID())
			}
			got, err = rt.RemoveRef(ctx, a.String(), false)
			if want := []string{"container " + nameA, "volume " + nameA}; err != nil || !slices.Equal(got, want) {
				t.Errorf("rm a: got %q, %v; want %q", got, err, want)
			}
			if _, err := api.ContainerInspect(ctx, sb.ID(), client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
				t.Errorf("a's container after rm: got %v, want gone", err)
			}
			list, err := rt.Sandboxes(ctx)
			if err != nil || len(list) != 1 || !list[0].Pool {
				t.Fatalf("before removing the pool: %+v, %v", list, err)
			}
			pool := list[0]
			got, err = rt.RemoveRef(ctx, pool.ShortID(), false)
			if want := []string{"container " + pool.Name, "volume " + pool.Workspace}; err != nil || !slices.Equal(got, want) {
				t.Errorf("rm pool: got %q, %v; want %q", got, err, want)
			}
			if list, err := rt.Sandboxes(ctx); err != nil || len(list) != 0 {
				t.Errorf("at the end: %+v, %v; want none", list, err)
			}
			if got := rt.Describe(ctx, a); got != "Computer: none yet (created on first use)" {
				t.Errorf("Describe(a) after rm: got %q", got)
			}
		})
	})
}

// TestAdminPoolAssigned: a conversation that took a warm-pool container is
// listed under its conversation (from the registry, as a later process
// reads it) and removed with the pool volume that became its workspace.
func TestAdminPoolAssigned(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		rt := newRuntime(t, eng, func(o *docker.Options) { o.WarmPool = 1 })
		ctx := ctxT(t)
		if err := rt.FillPool(ctx); err != nil {
			t.Fatalf("FillPool: %v", err)
		}
		pool, err := rt.Sandboxes(ctx)
		if err != nil || len(pool) != 1 || !pool[0].Pool {
			t.Fatalf("after FillPool: %+v, %v; want one pool container", pool, err)
		}
		k := key("!pooled:example.org")
		if _, err := rt.Sandbox(ctx, k); err != nil {
			t.Fatal(err)
		}
		rt.Close() // waits for the pool refill it started
		rt2 := reopen(t, eng, rt.opts)
		name := docker.ContainerName(rt.opts.InstanceID, k)
		list, err := rt2.Sandboxes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s, ok := byName(list)[name]
		if !ok || s.Conversation != k.String() || s.Key != k || s.Pool || s.Orphan || s.ID != pool[0].ID || s.Workspace != pool[0].Workspace {
			t.Fatalf("assigned container: got %+v (found %v), want conversation %s on pool container %s with workspace %s",
				s, ok, k, pool[0].ShortID(), pool[0].Workspace)
		}
		got, err := rt2.RemoveRef(ctx, k.String(), false)
		if want := []string{"container " + name, "volume " + pool[0].Workspace}; err != nil || !slices.Equal(got, want) {
			t.Fatalf("rm: got %q, %v; want %q", got, err, want)
		}
		if _, err := eng.Client(t).VolumeInspect(ctx, pool[0].Workspace, client.VolumeInspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Errorf("the assigned pool volume after rm: got %v, want gone", err)
		}
		if got := rt2.Describe(ctx, k); got != "Computer: none yet (created on first use)" {
			t.Errorf("Describe after rm: got %q", got)
		}
	})
}
