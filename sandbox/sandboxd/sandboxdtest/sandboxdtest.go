// Package agenttest runs the real sandbox agent on the host for tests: a
// conch.Sandbox backed by sandboxd.Server, rooted at a temp dir, reached over
// pipes in-process or through a subprocess. Tests only.
package sandboxdtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"conch"
	"conch/sandbox/sandboxd"
)

// Host is a sandbox whose agent runs on the host, rooted at Dir:
// Dir/workspace plays /workspace and Dir/tmp plays /tmp for file operations
// and working directories. Programs are the host's.
type Host struct {
	*sandboxd.Client
	Dir string

	mu    sync.Mutex
	conns []io.Closer // server ends of live connections
	dials int
	wg    sync.WaitGroup
}

var _ conch.Sandbox = (*Host)(nil)

// NewServer returns the server configuration HostSandbox uses for dir.
func NewServer(dir string) *sandboxd.Server {
	return &sandboxd.Server{Root: dir, MemoryEvents: "-"}
}

// HostSandbox starts an in-process agent rooted at dir (created with
// workspace/ and tmp/ inside when missing) and returns a client to it over
// kernel pipes, the same kind of stream a container exec gives. Every dial
// starts a fresh server, as a new exec would. Cleanup closes everything and
// waits for the servers to finish.
func HostSandbox(tb testing.TB, dir string) *Host {
	tb.Helper()
	mustDirs(tb, dir)
	h := &Host{Dir: dir}
	srv := NewServer(dir)
	h.Client = sandboxd.NewClient(func(ctx context.Context) (io.ReadWriteCloser, error) {
		cr, sw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		sr, cw, err := os.Pipe()
		if err != nil {
			cr.Close()
			sw.Close()
			return nil, err
		}
		serverEnd := closers{sr, sw}
		h.mu.Lock()
		h.conns = append(h.conns, serverEnd)
		h.dials++
		h.mu.Unlock()
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			defer serverEnd.Close()
			if err := srv.Serve(context.Background(), sr, sw); err != nil && !errors.Is(err, os.ErrClosed) {
				tb.Logf("agenttest: serve: %v", err)
			}
		}()
		return &pipeConn{r: cr, w: cw}, nil
	}, sandboxd.ClientOptions{ID: "host-" + filepath.Base(dir)})
	tb.Cleanup(func() {
		h.Client.Close()
		h.Break()
		h.wg.Wait()
	})
	return h
}

// SocketSandbox starts an in-process agent listening on a unix socket in
// dir (as `conch sandbox-agent --listen` does in a container, but serving
// peers in its own pid namespace: the test is one) and returns a client
// that dials it with the key handshake. Every dial is a new session.
func SocketSandbox(tb testing.TB, dir string) *Host {
	tb.Helper()
	mustDirs(tb, dir)
	h := &Host{Dir: dir}
	// A short path: a socket's address is limited to 107 bytes.
	sockDir, err := os.MkdirTemp("", "sd")
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(sockDir, "agent.sock")
	key := sandboxd.NewKey()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		err := sandboxd.Listen(ctx, sandboxd.ListenOptions{
			Path: path, Key: key, AllowSameNamespace: true, Server: NewServer(dir),
			Logger: slog.New(slog.DiscardHandler), Ready: func() { close(ready) },
			Accepted: func(c io.Closer) {
				h.mu.Lock()
				h.conns = append(h.conns, c)
				h.mu.Unlock()
			},
		})
		if err != nil {
			tb.Errorf("agenttest: listen: %v", err)
		}
	}()
	<-ready
	h.Client = sandboxd.NewClient(func(ctx context.Context) (io.ReadWriteCloser, error) {
		h.mu.Lock()
		h.dials++
		h.mu.Unlock()
		return sandboxd.DialSocket(ctx, path, key)
	}, sandboxd.ClientOptions{ID: "socket-" + filepath.Base(dir)})
	tb.Cleanup(func() {
		h.Client.Close()
		h.Break()
		cancel()
		h.wg.Wait()
		os.RemoveAll(sockDir)
	})
	return h
}

// Break closes the server ends of every live stream, as if the exec died.
func (h *Host) Break() {
	h.mu.Lock()
	conns := h.conns
	h.conns = nil
	h.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Dials reports how many streams the client has opened.
func (h *Host) Dials() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dials
}

// WorkspacePath returns the host path of a path under /workspace.
func (h *Host) WorkspacePath(rel string) string {
	return filepath.Join(h.Dir, "workspace", filepath.FromSlash(rel))
}

const childEnv = "CONCH_AGENTTEST_SERVE_ROOT"

// ServeIfChild turns the test binary into an agent when it was started by
// SubprocessSandbox; call it first in TestMain.
func ServeIfChild() {
	root, ok := os.LookupEnv(childEnv)
	if !ok {
		return
	}
	err := NewServer(root).Serve(context.Background(), os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// SubprocessSandbox runs the agent as a child process (the test binary
// re-executed; its TestMain must call ServeIfChild) rooted at dir, talking
// over the child's stdin and stdout like `conch sandbox-agent` in a
// container. Each dial starts a new child.
func SubprocessSandbox(tb testing.TB, dir string) *Host {
	tb.Helper()
	mustDirs(tb, dir)
	h := &Host{Dir: dir}
	h.Client = sandboxd.NewClient(func(ctx context.Context) (io.ReadWriteCloser, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+dir)
		cmd.Stderr = os.Stderr
		w, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		r, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		pc := &procConn{cmd: cmd, r: r, w: w}
		h.mu.Lock()
		h.conns = append(h.conns, killer{cmd})
		h.dials++
		h.mu.Unlock()
		return pc, nil
	}, sandboxd.ClientOptions{ID: "subprocess-" + filepath.Base(dir)})
	tb.Cleanup(func() {
		h.Client.Close()
		h.Break()
	})
	return h
}

// Provider returns a conch.SandboxProvider that hands out sb for every
// conversation, for a ToolEnv.
func Provider(sb conch.Sandbox) conch.SandboxProvider { return provider{sb} }

type provider struct{ sb conch.Sandbox }

func (p provider) Sandbox(context.Context, conch.ConversationKey) (conch.Sandbox, error) {
	return p.sb, nil
}

func mustDirs(tb testing.TB, dir string) {
	tb.Helper()
	for _, d := range []string{"workspace", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			tb.Fatalf("agenttest: %v", err)
		}
	}
}

type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

type pipeConn struct {
	r *os.File
	w *os.File
}

func (p *pipeConn) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipeConn) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeConn) Close() error                { return errors.Join(p.w.Close(), p.r.Close()) }

type procConn struct {
	cmd  *exec.Cmd
	r    io.ReadCloser
	w    io.WriteCloser
	once sync.Once
}

func (p *procConn) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *procConn) Write(b []byte) (int, error) { return p.w.Write(b) }

// Close ends the child's input and waits for it to exit.
func (p *procConn) Close() error {
	var err error
	p.once.Do(func() {
		p.w.Close()
		err = p.cmd.Wait()
	})
	return err
}

type killer struct{ cmd *exec.Cmd }

func (k killer) Close() error {
	if k.cmd.Process != nil {
		return k.cmd.Process.Kill()
	}
	return nil
}
