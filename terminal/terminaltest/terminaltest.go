// Package terminaltest gives terminal tests a sandbox with tmux: a real
// sandbox container, or the sandbox agent serving the host. Tests only.
package terminaltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"
	"conch/sandbox/sandboxd"
	"conch/terminal"
)

// Box is a sandbox for terminal tests with the Options that fit it.
type Box struct {
	SB   conch.Sandbox
	Opts terminal.Options
	// Host is true when programs run on the host (paths are host paths).
	Host bool
	// WS is the workspace as the sandbox's programs see it.
	WS string
	// Break, for Host, breaks every stream to the agent, as a dying exec
	// would; the client reconnects on its next call.
	Break func()
	// AgentDir, for Container, is the host directory the sandbox sees
	// read-only at docker.AgentDir (where its agent binary lives); what a
	// test puts there (a CLI and the node that runs it) shows up at once.
	AgentDir string
}

// Each runs f against a real sandbox container (docker) and against the
// sandbox agent serving the host.
func Each(t *testing.T, f func(t *testing.T, b *Box)) {
	t.Helper()
	t.Run("container", func(t *testing.T) { f(t, Container(t)) })
	t.Run("host", func(t *testing.T) { f(t, Host(t)) })
}

// Host serves the real sandbox agent on the host over pipes, with real
// paths (no Root), so tmux and bash are the host's; Opts point RunDir and
// Workspace at a temp dir.
func Host(t testing.TB) *Box {
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
	srv := &sandboxd.Server{
		Workspace:    ws,
		MemoryEvents: "-",
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + ws, "TERM=dumb", "SHELL=/bin/bash"},
	}
	var mu sync.Mutex
	var servers []io.Closer
	c := sandboxd.NewClient(func(ctx context.Context) (io.ReadWriteCloser, error) {
		cr, sw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		sr, cw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		mu.Lock()
		servers = append(servers, sr, sw)
		mu.Unlock()
		go func() {
			defer sw.Close()
			defer sr.Close()
			_ = srv.Serve(context.Background(), sr, sw)
		}()
		return pipeConn{cr, cw}, nil
	}, sandboxd.ClientOptions{ID: "host-" + filepath.Base(dir)})
	opts := terminal.Options{Scope: "test", RunDir: run, Workspace: ws}
	brk := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range servers {
			s.Close()
		}
		servers = nil
	}
	t.Cleanup(func() {
		// The tmux server outlives its clients: end it.
		_ = exec.Command("tmux", "-S", filepath.Join(run, "tmux.sock"), "kill-server").Run()
		c.Close()
		brk()
	})
	return &Box{SB: c, Opts: opts, Host: true, WS: ws, Break: brk}
}

type pipeConn struct{ r, w *os.File }

func (p pipeConn) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipeConn) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipeConn) Close() error                { return errors.Join(p.w.Close(), p.r.Close()) }

// Container is a real, hardened sandbox container on the test dockerd, its
// agent started from a freshly built conch binary; removed at cleanup.
func Container(t testing.TB) *Box {
	t.Helper()
	return ContainerWith(t, Options{})
}

// Options shape ContainerWith's sandbox.
type Options struct {
	// Agents are coding-agent CLIs (claude, codex, gemini) on the sandbox's
	// image: the derived image conch builds from the pinned npm tarballs
	// (sandbox/docker Options.Agents). It is built once per engine and pin
	// set and shared by every test process (its tag carries its hash; a
	// file lock lets one process build it); the downloads stay in the
	// engines' cache dir.
	Agents []string
}

// ContainerWith is Container with options: ContainerWith(t,
// Options{Agents: []string{"claude"}}) runs the real Claude Code CLI image.
func ContainerWith(t testing.TB, opt Options) *Box {
	t.Helper()
	eng := engine.Docker(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	o := docker.Options{
		Host:           eng.Host,
		Engine:         eng.Name,
		InstanceID:     "termtest-" + hex.EncodeToString(b),
		Image:          eng.Image,
		DataDir:        t.TempDir(),
		CacheDir:       eng.CacheDir,
		SandboxdBinary: engine.SandboxdBinary(t),
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Agents:         opt.Agents,
	}
	limit := 3 * time.Minute
	if len(opt.Agents) > 0 {
		// A first build downloads and commits ~1 GB.
		limit = 20 * time.Minute
		o.BuildProgress = func(s string) { t.Logf("image: %s", s) }
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
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
	return &Box{SB: sb, Opts: terminal.Options{Scope: key.String()}, WS: "/workspace", AgentDir: filepath.Join(o.DataDir, "agent")}
}

var (
	fakeOnce sync.Once
	fakeBin  string
	fakeErr  error
)

// FakeCLI builds internal/testenv/fakecli (static, once per test process),
// installs it in b's workspace and returns its path as the sandbox sees it.
func FakeCLI(t testing.TB, b *Box) string {
	t.Helper()
	fakeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fakecli")
		if err != nil {
			fakeErr = err
			return
		}
		fakeBin = filepath.Join(dir, "fakecli")
		cmd := exec.Command("go", "build", "-o", fakeBin, "conch/internal/testenv/fakecli")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fakeErr = fmt.Errorf("go build fakecli: %v\n%s", err, out)
		}
	})
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	data, err := os.ReadFile(fakeBin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := b.WS + "/.conch/bin"
	if res, err := b.SB.Exec(ctx, conch.ExecRequest{Argv: []string{"mkdir", "-p", dir}, Dir: b.WS}); err != nil || res.ExitCode != 0 {
		t.Fatalf("mkdir %s: %v %s", dir, err, res.Output)
	}
	if err := b.SB.WriteFile(ctx, dir+"/fakecli", data, 0o755); err != nil {
		t.Fatalf("install fakecli: %v", err)
	}
	return dir + "/fakecli"
}
