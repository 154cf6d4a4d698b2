package terminal_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/sandbox/agent"
	"conch/sandbox/docker"
	"conch/terminal"
)

// box is a sandbox for terminal tests with the Options that fit it.
type box struct {
	sb   conch.Sandbox
	opts terminal.Options
	// host is true when programs run on the host (paths are host paths).
	host bool
	// ws is the workspace as the sandbox sees it.
	ws string
}

// eachBox runs f against the real sandbox container (docker) and, unless
// -short is off and the container is the point, the host-side agent.
func eachBox(t *testing.T, f func(t *testing.T, b *box)) {
	t.Helper()
	t.Run("container", func(t *testing.T) { f(t, containerBox(t)) })
	t.Run("host", func(t *testing.T) { f(t, hostBox(t)) })
}

// hostBox serves the real sandbox agent on the host over pipes, with real
// paths (no Root), so tmux and bash are the host's.
func hostBox(t testing.TB) *box {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		testenv.Missing(t, "tmux", "not installed on the host")
	}
	dir, err := os.MkdirTemp("", "ct")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ws := filepath.Join(dir, "ws")
	run := filepath.Join(dir, "run")
	for _, d := range []string{ws, run} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	srv := &agent.Server{
		Workspace:    ws,
		MemoryEvents: "-",
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + ws, "TERM=dumb", "SHELL=/bin/bash"},
	}
	var servers []io.Closer
	c := agent.NewClient(func(ctx context.Context) (io.ReadWriteCloser, error) {
		cr, sw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		sr, cw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		servers = append(servers, sr, sw)
		go func() {
			defer sw.Close()
			defer sr.Close()
			_ = srv.Serve(context.Background(), sr, sw)
		}()
		return pipeConn{cr, cw}, nil
	}, agent.ClientOptions{ID: "host-" + filepath.Base(dir)})
	opts := terminal.Options{Scope: "test", RunDir: run, Workspace: ws}
	t.Cleanup(func() {
		// The tmux server outlives its clients: end it.
		_ = exec.Command("tmux", "-S", filepath.Join(run, "tmux.sock"), "kill-server").Run()
		c.Close()
		for _, s := range servers {
			s.Close()
		}
	})
	return &box{sb: c, opts: opts, host: true, ws: ws}
}

type pipeConn struct{ r, w *os.File }

func (p pipeConn) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipeConn) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipeConn) Close() error                { return errors.Join(p.w.Close(), p.r.Close()) }

// containerBox is a real, hardened sandbox container on the test dockerd,
// its agent started from a freshly built conch binary.
func containerBox(t testing.TB) *box {
	t.Helper()
	eng := engine.Docker(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	o := docker.Options{
		Host:        eng.Host,
		Engine:      eng.Name,
		InstanceID:  "termtest-" + hex.EncodeToString(b),
		Image:       eng.Image,
		DataDir:     t.TempDir(),
		CacheDir:    eng.CacheDir,
		AgentBinary: engine.AgentBinary(t),
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rt, err := docker.New(ctx, o)
	if err != nil {
		t.Fatalf("docker.New: %v", err)
	}
	key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "term-" + hex.EncodeToString(b)}
	sb, err := rt.Sandbox(ctx, key)
	if err != nil {
		rt.Close()
		t.Fatalf("Sandbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := rt.Remove(ctx, key); err != nil {
			t.Logf("remove sandbox: %v", err)
		}
		rt.Close()
	})
	return &box{sb: sb, opts: terminal.Options{Scope: key.String()}, ws: "/workspace"}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// mustWait waits and fails the test on an error.
func mustWait(t testing.TB, m *terminal.Manager, timeout time.Duration) terminal.WaitResult {
	t.Helper()
	res, err := m.Wait(ctxT(t), timeout)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return res
}

func obsOf(t testing.TB, res terminal.WaitResult, n int) terminal.Observation {
	t.Helper()
	for _, o := range res.TTYs {
		if o.TTY == n {
			return o
		}
	}
	t.Fatalf("no observation of tty %d in:\n%s", n, res)
	return terminal.Observation{}
}

func mustType(t testing.TB, m *terminal.Manager, n int, expect, text string, enter bool) {
	t.Helper()
	if err := m.Type(ctxT(t), n, expect, text, enter); err != nil {
		t.Fatalf("Type(%d, %q, %q): %v", n, expect, text, err)
	}
}

func contains(t testing.TB, what, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Fatalf("%s: got %q, want it to contain %q", what, got, want)
	}
}
