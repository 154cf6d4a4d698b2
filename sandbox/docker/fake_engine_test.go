package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"conch"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// fakeEngine is an engine with containers and volumes in memory: enough of
// engineAPI for the runtime's lifecycle (create, adopt, start, remove).
// Anything else panics on the nil embedded interface.
type fakeEngine struct {
	engineAPI

	mu      sync.Mutex
	ctrs    map[string]*container.InspectResponse // by name
	vols    map[string]bool
	creates atomic.Int32
	starts  atomic.Int32
	removes atomic.Int32
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{ctrs: map[string]*container.InspectResponse{}, vols: map[string]bool{}}
}

func (f *fakeEngine) find(ref string) *container.InspectResponse {
	if c := f.ctrs[ref]; c != nil {
		return c
	}
	for _, c := range f.ctrs {
		if c.ID == ref {
			return c
		}
	}
	return nil
}

var errFakeNotFound = cerrdefs.ErrNotFound.WithMessage("no such object")

func (f *fakeEngine) ImageInspect(context.Context, string, ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	var r client.ImageInspectResult
	r.ID = "sha256:fakeimage"
	return r, nil
}

func (f *fakeEngine) ContainerInspect(_ context.Context, ref string, _ client.ContainerInspectOptions) (client.ContainerInspectResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.find(ref)
	if c == nil {
		return client.ContainerInspectResult{}, errFakeNotFound
	}
	cp := *c
	st := *c.State
	cp.State = &st
	return client.ContainerInspectResult{Container: cp}, nil
}

func (f *fakeEngine) ContainerCreate(_ context.Context, o client.ContainerCreateOptions) (client.ContainerCreateResult, error) {
	time.Sleep(5 * time.Millisecond) // widen any race between callers
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctrs[o.Name] != nil {
		return client.ContainerCreateResult{}, cerrdefs.ErrConflict.WithMessage("name in use")
	}
	n := f.creates.Add(1)
	vol, _, _ := strings.Cut(o.HostConfig.Binds[0], ":")
	f.ctrs[o.Name] = &container.InspectResponse{ID: fmt.Sprintf("%064d", n), Name: "/" + o.Name,
		Config: o.Config, HostConfig: o.HostConfig, State: &container.State{Status: container.StateCreated},
		Mounts: []container.MountPoint{{Name: vol, Destination: WorkspaceDir}}}
	return client.ContainerCreateResult{ID: f.ctrs[o.Name].ID}, nil
}

func (f *fakeEngine) ContainerStart(_ context.Context, ref string, _ client.ContainerStartOptions) (client.ContainerStartResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.find(ref)
	if c == nil {
		return client.ContainerStartResult{}, errFakeNotFound
	}
	f.starts.Add(1)
	c.State.Running, c.State.Status = true, container.StateRunning
	return client.ContainerStartResult{}, nil
}

// stop stops a container behind the runtime's back.
func (f *fakeEngine) stop(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.ctrs[name]
	c.State.Running, c.State.Status = false, container.StateExited
	c.State.FinishedAt = time.Now().Add(-time.Second).Format(time.RFC3339Nano)
}

func (f *fakeEngine) running(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.ctrs[name]
	return c != nil && c.State.Running
}

func (f *fakeEngine) ContainerRemove(_ context.Context, ref string, _ client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.find(ref)
	if c == nil {
		return client.ContainerRemoveResult{}, errFakeNotFound
	}
	f.removes.Add(1)
	delete(f.ctrs, strings.TrimPrefix(c.Name, "/"))
	return client.ContainerRemoveResult{}, nil
}

func (f *fakeEngine) VolumeInspect(_ context.Context, name string, _ client.VolumeInspectOptions) (client.VolumeInspectResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.vols[name] {
		return client.VolumeInspectResult{}, errFakeNotFound
	}
	return client.VolumeInspectResult{}, nil
}

func (f *fakeEngine) VolumeCreate(_ context.Context, o client.VolumeCreateOptions) (client.VolumeCreateResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vols[o.Name] = true
	return client.VolumeCreateResult{}, nil
}

func (f *fakeEngine) VolumeRemove(_ context.Context, name string, _ client.VolumeRemoveOptions) (client.VolumeRemoveResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.vols, name)
	return client.VolumeRemoveResult{}, nil
}

func (f *fakeEngine) Close() error { return nil }

// newFakeRuntime is a Runtime over f, without an agent binary.
func newFakeRuntime(t *testing.T, f *fakeEngine) *Runtime {
	t.Helper()
	o, prof, err := Options{InstanceID: "unit", DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	r, err := start(context.Background(), o, prof, "", f, Info{Engine: EngineDocker, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

var unitKey = conch.ConversationKey{Channel: "matrix", ID: "!unit:example.org"}

func TestFakeConcurrentFirstUseCreatesOnce(t *testing.T) {
	f := newFakeEngine()
	r := newFakeRuntime(t, f)
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() {
			sb, err := r.Sandbox(t.Context(), unitKey)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = sb.ID()
		})
	}
	wg.Wait()
	if n := f.creates.Load(); n != 1 {
		t.Errorf("got %d creates, want 1", n)
	}
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("got ids %v, want one container", ids)
		}
	}
}

func TestFakeStoppedBehindOurBackIsRestarted(t *testing.T) {
	f := newFakeEngine()
	r := newFakeRuntime(t, f)
	sbi, err := r.Sandbox(t.Context(), unitKey)
	if err != nil {
		t.Fatal(err)
	}
	sb := sbi.(*Sandbox)
	name := ContainerName("unit", unitKey)
	f.stop(name)
	starts := f.starts.Load()
	calls := 0
	// An operation that finds the container stopped before it ran anything.
	got, err := do(t.Context(), sb, func(sandboxOps) (string, error) {
		calls++
		if !f.running(name) {
			return "", errContainerGone
		}
		return "ran", nil
	})
	if err != nil || got != "ran" {
		t.Fatalf("got %q, %v; want ran", got, err)
	}
	if calls != 2 || f.starts.Load() != starts+1 || f.creates.Load() != 1 {
		t.Errorf("got %d calls, %d restarts, %d creates; want 2 calls, 1 restart, 1 create",
			calls, f.starts.Load()-starts, f.creates.Load())
	}
}

func TestFakeGoneTwiceIsNotRetriedAgain(t *testing.T) {
	f := newFakeEngine()
	r := newFakeRuntime(t, f)
	sbi, err := r.Sandbox(t.Context(), unitKey)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	_, err = do(t.Context(), sbi.(*Sandbox), func(sandboxOps) (int, error) {
		calls++
		return 0, errContainerGone
	})
	if !errors.Is(err, errContainerGone) || calls != 2 {
		t.Errorf("got %v after %d calls; want errContainerGone after 2", err, calls)
	}
}

// closeCounter is a sandboxOps that counts Close.
type closeCounter struct {
	sandboxOps
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

func TestFakeReleaseForgetsTheBox(t *testing.T) {
	f := newFakeEngine()
	r := newFakeRuntime(t, f)
	ctx := t.Context()
	sbi, err := r.Sandbox(ctx, unitKey)
	if err != nil {
		t.Fatal(err)
	}
	sb := sbi.(*Sandbox)
	ops := &closeCounter{}
	old := sb.b.Load()
	old.ops = ops
	if err := r.Release(ctx, unitKey); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	n := len(r.boxes)
	r.mu.Unlock()
	if n != 0 || ops.closed.Load() != 1 || !old.released {
		t.Errorf("after Release: %d boxes, ops closed %d times, released %v; want 0, 1, true", n, ops.closed.Load(), old.released)
	}
	if f.removes.Load() != 0 || !f.running(ContainerName("unit", unitKey)) {
		t.Errorf("Release touched the container: %d removes", f.removes.Load())
	}
	if err := r.Release(ctx, unitKey); err != nil {
		t.Errorf("second Release: %v", err)
	}
	// The old handle goes on working with a fresh box that adopts the
	// container.
	if _, done, err := sb.use(ctx); err != nil {
		t.Fatal(err)
	} else {
		done()
	}
	if b := sb.b.Load(); b == old || b.id != old.id || f.creates.Load() != 1 {
		t.Errorf("after use: same box %v, id %q (was %q), %d creates; want a new box on the same container",
			b == old, b.id, old.id, f.creates.Load())
	}
}

func TestFakeRemoveReleases(t *testing.T) {
	f := newFakeEngine()
	r := newFakeRuntime(t, f)
	ctx := t.Context()
	if _, err := r.Sandbox(ctx, unitKey); err != nil {
		t.Fatal(err)
	}
	b := r.boxFor(unitKey)
	if err := r.Remove(ctx, unitKey); err != nil {
		t.Fatal(err)
	}
	if !b.released || len(f.ctrs) != 0 || len(f.vols) != 0 {
		t.Errorf("after Remove: released %v, containers %d, volumes %d; want true, 0, 0", b.released, len(f.ctrs), len(f.vols))
	}
}

func TestStatsFrom(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var s container.StatsResponse
	s.Read, s.PreRead = t0.Add(time.Second), t0
	s.CPUStats.CPUUsage.TotalUsage = 1_500_000_000
	s.PreCPUStats.CPUUsage.TotalUsage = 1_000_000_000
	s.CPUStats.SystemUsage, s.PreCPUStats.SystemUsage = 12_000_000_000, 10_000_000_000
	s.CPUStats.OnlineCPUs = 2
	s.MemoryStats = container.MemoryStats{Usage: 100 << 20, Limit: 512 << 20, Stats: map[string]uint64{"inactive_file": 30 << 20}}
	s.PidsStats.Current = 7
	got := statsFrom(s)
	want := conch.SandboxStats{CPUPercent: 50, MemoryBytes: 70 << 20, MemoryLimit: 512 << 20, PIDs: 7, DiskBytes: -1}
	if got != want {
		t.Errorf("cgroup v2 sample: got %+v, want %+v", got, want)
	}

	// cgroup v1 cache; no system usage: CPU over the wall-clock interval.
	s.CPUStats.SystemUsage, s.PreCPUStats.SystemUsage = 0, 0
	s.MemoryStats.Stats = map[string]uint64{"total_inactive_file": 10 << 20}
	got = statsFrom(s)
	if got.CPUPercent != 50 || got.MemoryBytes != 90<<20 {
		t.Errorf("cgroup v1 sample: got %+v, want 50%% CPU and 90 MiB", got)
	}

	// A one-shot sample has no previous reading: no CPU figure.
	s.PreCPUStats = container.CPUStats{}
	if got := statsFrom(s); got.CPUPercent != 0 {
		t.Errorf("one-shot sample: CPU %v, want 0", got.CPUPercent)
	}
}

// TestFakeNameTakenBehindOurBack: a runtime whose Reconcile listed no
// container skips asking the engine on first use; a container made with the
// conversation's name behind its back (here by another runtime) makes the
// create fail with a conflict, and the runtime then adopts that container.
func TestFakeNameTakenBehindOurBack(t *testing.T) {
	f := newFakeEngine()
	other := newFakeRuntime(t, f)
	sb1, err := other.Sandbox(t.Context(), unitKey)
	if err != nil {
		t.Fatal(err)
	}
	r := newFakeRuntime(t, f)
	r.setNames(nil) // known: none
	if r.mayExist(ContainerName("unit", unitKey)) {
		t.Fatal("mayExist: true for a name the listing did not have")
	}
	sb2, err := r.Sandbox(t.Context(), unitKey)
	if err != nil {
		t.Fatalf("Sandbox after a conflict: %v", err)
	}
	if sb2.ID() != sb1.ID() || f.creates.Load() != 1 {
		t.Errorf("got container %s after %d creates, want the existing %s and 1 create", sb2.ID(), f.creates.Load(), sb1.ID())
	}
	if !r.mayExist(ContainerName("unit", unitKey)) {
		t.Error("the name is not known to exist after the conflict")
	}
	if err := r.Remove(t.Context(), unitKey); err != nil {
		t.Fatal(err)
	}
	if r.mayExist(ContainerName("unit", unitKey)) {
		t.Error("the name is still known after Remove")
	}
}
