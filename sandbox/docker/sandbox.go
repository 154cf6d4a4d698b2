package docker

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync/atomic"
	"time"

	"conch"
	"conch/internal/backoff"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// sandboxOps carries out one sandbox's operations: the sandboxd's
// client, or engineOps (one Engine API exec per operation).
type sandboxOps interface {
	Exec(ctx context.Context, req conch.ExecRequest) (conch.ExecResult, error)
	ReadFile(ctx context.Context, path string, limit int64) ([]byte, error)
	ReadWorkspaceFile(ctx context.Context, path string, limit int64) ([]byte, error)
	WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error
	ListFiles(ctx context.Context, path string) ([]conch.FileInfo, error)
	Close() error
}

// errContainerGone is returned before anything ran when the container is
// stopped or removed; the operation is retried once after a restart.
var errContainerGone = errors.New("sandbox container is not running")

// Sandbox is a handle on one conversation's computer. Every operation
// restarts the container first if an idle stop or a crash stopped it.
type Sandbox struct {
	rt *Runtime
	// b is the conversation's box; replaced by the current one when it was
	// released (Release, Remove) while this handle lived.
	b  atomic.Pointer[box]
	id atomic.Pointer[string]
	// eops serves EngineExec.
	eops atomic.Pointer[engineOps]
}

var (
	_ conch.Sandbox         = (*Sandbox)(nil)
	_ conch.WorkspaceReader = (*Sandbox)(nil)
)

func newSandbox(r *Runtime, b *box) *Sandbox {
	s := &Sandbox{rt: r}
	s.b.Store(b)
	id := b.id
	s.id.Store(&id)
	return s
}

// ID is the engine's container id (as of the handle's last operation).
func (s *Sandbox) ID() string { return *s.id.Load() }

// Name is the container's name.
func (s *Sandbox) Name() string { return s.b.Load().name }

// Key is the conversation the sandbox belongs to.
func (s *Sandbox) Key() conch.ConversationKey { return s.b.Load().key }

// use makes the container run and returns its operations; done must be
// called when the operation ends.
func (s *Sandbox) use(ctx context.Context) (ops sandboxOps, done func(), err error) {
	r := s.rt
	if err := r.checkOpen(); err != nil {
		return nil, nil, err
	}
	b, err := r.relock(ctx, s.b.Load())
	if err != nil {
		return nil, nil, err
	}
	defer b.unlock()
	s.b.Store(b)
	if err := r.ensureLocked(ctx, b); err != nil {
		return nil, nil, err
	}
	if b.ops == nil {
		b.ops = r.newOps(b.id, b.name, b.sock)
	}
	id := b.id
	s.id.Store(&id)
	r.touch(b, +1)
	return b.ops, func() { r.touch(b, -1) }, nil
}

// gone marks the container as not running after an operation found it so.
func (s *Sandbox) gone(ctx context.Context) {
	b, err := s.rt.relock(ctx, s.b.Load())
	if err != nil {
		return
	}
	b.running = false
	b.closeOpsLocked()
	b.unlock()
}

// retryAfterRestart retries an operation once, at once: the container's
// restart was the wait.
var retryAfterRestart = backoff.Policy{Max: 1, Wait: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}

// do runs op, restarting the container and retrying once when it was found
// stopped before the operation began (so nothing of it ran).
func do[T any](ctx context.Context, s *Sandbox, op func(sandboxOps) (T, error)) (T, error) {
	var v T
	err := retryAfterRestart.Retry(ctx, func(ctx context.Context, attempt int) error {
		ops, done, err := s.use(ctx)
		if err != nil {
			return backoff.Permanent(err)
		}
		start := time.Now()
		v, err = op(ops)
		done()
		if err == nil || attempt > 1 || ctx.Err() != nil {
			return backoff.Permanent(err)
		}
		switch {
		case errors.Is(err, errContainerGone):
			s.gone(ctx)
			return err
		case conch.KindOf(err) == conch.KindTransient || conch.KindOf(err) == conch.KindUnavailable:
			// The agent's stream broke. If the container had stopped
			// before we began, nothing ran: restart and retry. If it
			// stopped later, the next operation restarts it.
			if stopped, before := s.stoppedSince(ctx, start); stopped {
				s.gone(ctx)
				if before {
					return err
				}
			} else if s.recoverPids(ctx) {
				return err
			}
		}
		return backoff.Permanent(err)
	}, nil)
	return v, err
}

// recoverPids restarts the container, keeping its workspace, when it has
// reached its process limit: then not even the agent can start (a fork
// bomb that left its call, found by a restarted conch). It reports whether
// it restarted the container.
func (s *Sandbox) recoverPids(ctx context.Context) bool {
	r := s.rt
	cur, limit, ok := r.pids(ctx, s.ID())
	if !ok || !atPidsLimit(cur, limit) {
		return false
	}
	b, err := r.relock(ctx, s.b.Load())
	if err != nil {
		return false
	}
	defer b.unlock()
	b.closeOpsLocked()
	r.log.Warn("sandbox at its process limit: restarting it (the workspace is kept)",
		"conversation", b.key.String(), "container", b.name, "pids", cur, "limit", limit)
	timeout := 0
	_, err = r.api.ContainerStop(ctx, b.id, client.ContainerStopOptions{Timeout: &timeout})
	if err == nil {
		err = r.startContainer(ctx, b.id, b.name, b.sock)
	}
	if err != nil {
		r.log.Warn("restart sandbox at its process limit", "container", b.name, "err", err)
		b.running = false
		return false
	}
	r.audit(ctx, conch.AuditSandboxRestart, b.key, map[string]any{"container": b.name, "id": b.id,
		"reason": "process limit reached", "pids": cur, "limit": limit})
	return true
}

// stoppedSince reports whether the container is not running, and whether it
// had already stopped before t.
func (s *Sandbox) stoppedSince(ctx context.Context, t time.Time) (stopped, before bool) {
	c, err := s.rt.api.ContainerInspect(ctx, s.ID(), client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return true, true
	}
	if err != nil || c.Container.State == nil || c.Container.State.Running {
		return false, false
	}
	fin, err := time.Parse(time.RFC3339Nano, c.Container.State.FinishedAt)
	return true, err == nil && fin.Before(t)
}

// Exec runs a program in the sandbox.
func (s *Sandbox) Exec(ctx context.Context, req conch.ExecRequest) (conch.ExecResult, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return conch.ExecResult{}, conch.Errorf(conch.KindInvalid, "exec: no program given")
	}
	if req.Stdin != nil {
		// Stdin can be read once: no retry after a restart.
		ops, done, err := s.use(ctx)
		if err != nil {
			return conch.ExecResult{}, err
		}
		defer done()
		return ops.Exec(ctx, req)
	}
	return do(ctx, s, func(o sandboxOps) (conch.ExecResult, error) { return o.Exec(ctx, req) })
}

// ReadFile reads at most limit bytes of a file (limit <= 0: the whole file).
func (s *Sandbox) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	return do(ctx, s, func(o sandboxOps) ([]byte, error) { return o.ReadFile(ctx, path, limit) })
}

// ReadWorkspaceFile implements conch.WorkspaceReader through the sandboxd
// (the path is resolved inside the sandbox, no link followed).
func (s *Sandbox) ReadWorkspaceFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	return do(ctx, s, func(o sandboxOps) ([]byte, error) { return o.ReadWorkspaceFile(ctx, path, limit) })
}

// WriteFile writes a file, creating its directory.
func (s *Sandbox) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	_, err := do(ctx, s, func(o sandboxOps) (struct{}, error) { return struct{}{}, o.WriteFile(ctx, path, data, mode) })
	return err
}

// ListFiles lists a directory.
func (s *Sandbox) ListFiles(ctx context.Context, path string) ([]conch.FileInfo, error) {
	return do(ctx, s, func(o sandboxOps) ([]conch.FileInfo, error) { return o.ListFiles(ctx, path) })
}

// DialAgent opens a new session with the container's agent over its
// transport (the socket, or one exec whose stdio is the stream).
func (s *Sandbox) DialAgent(ctx context.Context) (io.ReadWriteCloser, error) {
	b := s.b.Load()
	if b.sock != "" {
		return s.rt.socketDial(s.ID(), s.Name(), b.sock)(ctx)
	}
	return s.rt.dialAgent(ctx, s.ID(), s.Name())
}

// EngineExec runs one program as its own Engine API exec, bypassing the
// agent: the baseline the agent is measured against.
func (s *Sandbox) EngineExec(ctx context.Context, req conch.ExecRequest) (conch.ExecResult, error) {
	if _, done, err := s.use(ctx); err != nil {
		return conch.ExecResult{}, err
	} else {
		done()
	}
	e := s.eops.Load()
	if e == nil || e.id != s.ID() {
		e = &engineOps{rt: s.rt, id: s.ID(), oomBase: -1}
		s.eops.Store(e)
	}
	return e.Exec(ctx, req)
}

// CheckStatic reports an error unless path is a statically linked ELF
// executable, which is what runs inside any sandbox image.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0 or set sandbox.agent_binary to a static conch", path)
		}
	}
	return nil
}
