package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"

	"github.com/moby/moby/client"
)

// testRuntime is a Runtime on a real engine with a fresh instance id; every
// container and volume of that instance is removed at cleanup.
type testRuntime struct {
	*docker.Runtime
	eng  *engine.Engine
	opts docker.Options
}

func newInstance() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "test-" + hex.EncodeToString(b)
}

func newRuntime(t testing.TB, eng *engine.Engine, mod func(*docker.Options)) *testRuntime {
	t.Helper()
	o := docker.Options{
		Host:       eng.Host,
		Engine:     eng.Name,
		InstanceID: newInstance(),
		Image:      eng.Image,
		DataDir:    t.TempDir(),
		CacheDir:   eng.CacheDir,
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if mod != nil {
		mod(&o)
	}
	// Registered first so that it runs last, after the runtimes are closed.
	t.Cleanup(func() { purge(t, eng, o.InstanceID) })
	return reopen(t, eng, o)
}

// reopen starts another Runtime with the same options, as conch does after
// a restart.
func reopen(t testing.TB, eng *engine.Engine, o docker.Options) *testRuntime {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt, err := docker.New(ctx, o)
	if err != nil {
		t.Fatalf("docker.New: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	return &testRuntime{Runtime: rt, eng: eng, opts: o}
}

// purge removes everything labelled with the instance.
func purge(t testing.TB, eng *engine.Engine, instance string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(client.WithHost(eng.Host))
	if err != nil {
		t.Errorf("purge: %v", err)
		return
	}
	defer c.Close()
	f := make(client.Filters).Add("label", docker.LabelInstance+"="+instance)
	list, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		// Podman fails a listing that races with a removal; once more.
		list, err = c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	}
	if err != nil {
		t.Errorf("purge: %v", err)
		return
	}
	for _, s := range list.Items {
		_, _ = c.ContainerRemove(ctx, s.ID, client.ContainerRemoveOptions{Force: true})
	}
	vols, err := c.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err == nil {
		for _, v := range vols.Items {
			_, _ = c.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
		}
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func key(id string) conch.ConversationKey {
	return conch.ConversationKey{Channel: conch.ChannelMatrix, ID: id}
}

// run executes argv and fails the test on a Go error.
func run(t testing.TB, sb conch.Sandbox, argv ...string) conch.ExecResult {
	t.Helper()
	res, err := sb.Exec(ctxT(t), conch.ExecRequest{Argv: argv, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("exec %q: %v", argv, err)
	}
	return res
}

func out(res conch.ExecResult) string { return strings.TrimSpace(string(res.Output)) }
