package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"conch"
	"conch/sandbox/sandboxd"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// DefaultOutputLimit caps ExecResult.Output when the request sets no limit.
const DefaultOutputLimit = 256 << 10

// newOps returns the operations of container id: through the in-sandbox
// agent when an agent binary is configured (over the socket in sock, or
// one exec per connection when sock is ""), else one engine exec each.
func (r *Runtime) newOps(id, name, sock string) sandboxOps {
	if r.agentName == "" {
		return &engineOps{rt: r, id: id, oomBase: -1}
	}
	a := &sandboxdOps{oomBase: -1}
	dial := sandboxd.DialFunc(func(ctx context.Context) (io.ReadWriteCloser, error) {
		return r.dialAgent(ctx, id, name)
	})
	if sock != "" {
		dial = r.socketDial(id, name, sock)
	}
	a.Client = sandboxd.NewClient(dial, sandboxd.ClientOptions{ID: id, ConfirmOOM: a.confirmOOM})
	return a
}

// dialAgent starts the agent in container id over one exec.
func (r *Runtime) dialAgent(ctx context.Context, id, name string) (io.ReadWriteCloser, error) {
	if r.agentName == "" {
		return nil, errors.New("dial sandbox agent: no agent binary configured (sandbox.agent_binary)")
	}
	ex, err := r.api.ExecCreate(ctx, id, client.ExecCreateOptions{
		AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Cmd: []string{AgentDir + "/" + r.agentName, "sandbox-agent"}, WorkingDir: WorkspaceDir, User: r.profile.User,
	})
	if err != nil {
		if notRunning(err) {
			return nil, fmt.Errorf("dial sandbox agent in %s: %w: %v", name, errContainerGone, err)
		}
		return nil, r.engineErr("dial sandbox agent in "+name, err)
	}
	hr, err := r.api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, r.engineErr("attach sandbox agent in "+name, err)
	}
	logw := &lineLogger{log: r.log, msg: "sandbox agent", attrs: []any{"container", name}}
	return newExecConn(hr.HijackedResponse, ex.ID, logw), nil
}

// notRunning reports an exec refused because the container is stopped or
// gone: Docker answers 409 or 404, Podman 4 a 500 "container state improper".
func notRunning(err error) bool {
	return cerrdefs.IsConflict(err) || cerrdefs.IsNotFound(err) ||
		strings.Contains(err.Error(), "container state improper") || strings.Contains(err.Error(), "is not running")
}

// lineLogger logs each line written to it.
type lineLogger struct {
	log   *slog.Logger
	msg   string
	attrs []any
	mu    sync.Mutex
	buf   []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.log.Info(l.msg, append(slices.Clone(l.attrs), "line", string(l.buf[:i]))...)
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 4096 {
		l.log.Info(l.msg, append(slices.Clone(l.attrs), "line", string(l.buf))...)
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

// engineOps runs every operation as its own Engine API exec. It needs
// /bin/sh, cat, head, find and kill in the image (the sandbox image has them).
type engineOps struct {
	rt *Runtime
	id string

	mu      sync.Mutex
	oomBase int64 // cgroup oom_kill count after the last check; -1 unknown
}

var _ sandboxOps = (*engineOps)(nil)

func (e *engineOps) Close() error { return nil }

// resolve makes a sandbox path absolute: relative paths are under the workspace.
func resolve(p string) string {
	if p == "" {
		return WorkspaceDir
	}
	if !path.IsAbs(p) {
		p = path.Join(WorkspaceDir, p)
	}
	return path.Clean(p)
}

// attach creates and attaches one exec.
func (e *engineOps) attach(ctx context.Context, opts client.ExecCreateOptions) (client.HijackedResponse, string, error) {
	opts.AttachStdout, opts.AttachStderr = true, true
	opts.User = e.rt.profile.User // the container's own user is init's
	ex, err := e.rt.api.ExecCreate(ctx, e.id, opts)
	if err != nil {
		if notRunning(err) {
			return client.HijackedResponse{}, "", fmt.Errorf("exec: %w: %v", errContainerGone, err)
		}
		return client.HijackedResponse{}, "", e.rt.engineErr("exec", err)
	}
	hr, err := e.rt.api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return client.HijackedResponse{}, "", e.rt.engineErr("exec attach", err)
	}
	return hr.HijackedResponse, ex.ID, nil
}

// exitCode waits for the engine to record the exec's end. The stream ends
// when the process does, but the engine may report it running a moment
// longer (seconds, on a loaded machine with Podman's conmon).
func (e *engineOps) exitCode(ctx context.Context, execID string) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	wait := time.Millisecond
	for {
		ins, err := e.rt.api.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return -1, e.rt.engineErr("exec inspect", err)
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return -1, fmt.Errorf("exec inspect: the engine still reports the program running: %w", ctx.Err())
		case <-t.C:
		}
		wait = min(wait*2, 50*time.Millisecond)
	}
}

// outputSink collects interleaved output up to a limit.
type outputSink struct {
	mu        sync.Mutex
	buf       []byte
	limit     int
	truncated bool
	onOutput  func([]byte)
}

func (s *outputSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch room := s.limit - len(s.buf); {
	case room >= len(p):
		s.buf = append(s.buf, p...)
	default:
		s.buf = append(s.buf, p[:max(room, 0)]...)
		s.truncated = true
	}
	if s.onOutput != nil {
		s.onOutput(bytes.Clone(p))
	}
	return len(p), nil
}

// pidStripper passes stdout through after removing the first line, which
// the trampoline shell writes with the program's pid.
type pidStripper struct {
	w    io.Writer
	line []byte
	done bool
	pid  chan int
}

func (p *pidStripper) Write(b []byte) (int, error) {
	n := len(b)
	if !p.done {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.line = append(p.line, b...)
			return n, nil
		}
		p.line = append(p.line, b[:i]...)
		p.done = true
		pid, _ := strconv.Atoi(strings.TrimSpace(string(p.line)))
		p.pid <- pid
		b = b[i+1:]
	}
	if len(b) > 0 {
		if _, err := p.w.Write(b); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// trampoline prints the shell's pid and execs the program in its place,
// with stderr on the stdout pipe so that their interleaving is exactly the
// order the program wrote them (the engine reads two pipes in no set
// order). Both engines start an exec'd process as the leader of its own
// session and process group, so kill -KILL -pid stops the program and
// everything it started.
var trampoline = []string{"/bin/sh", "-c", `echo $$; exec "$@" 2>&1`, "conch-exec"}

// Exec runs one program.
func (e *engineOps) Exec(ctx context.Context, req conch.ExecRequest) (conch.ExecResult, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return conch.ExecResult{}, conch.Errorf(conch.KindInvalid, "exec: no program given")
	}
	limit := req.OutputLimit
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	e.mu.Lock()
	needBase := e.oomBase < 0
	e.mu.Unlock()
	if needBase {
		if n, err := e.oomKills(ctx); err == nil {
			e.mu.Lock()
			e.oomBase = n
			e.mu.Unlock()
		}
	}
	start := time.Now()
	hr, execID, err := e.attach(ctx, client.ExecCreateOptions{
		Cmd: append(slices.Clone(trampoline), req.Argv...), Env: req.Env, WorkingDir: resolve(req.Dir),
		AttachStdin: req.Stdin != nil,
	})
	if err != nil {
		return conch.ExecResult{}, err
	}
	defer hr.Close()
	sink := &outputSink{limit: limit, onOutput: req.OnOutput}
	pids := &pidStripper{w: sink, pid: make(chan int, 1)}
	dm := &demux{src: hr.Reader, stderr: sink}
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(pids, dm)
		copied <- err
	}()
	if req.Stdin != nil {
		go func() {
			_, _ = io.Copy(hr.Conn, req.Stdin)
			_ = hr.CloseWrite()
		}()
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if req.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
	}
	defer cancel()
	var stopped conch.StoppedReason
	select {
	case err = <-copied:
	case <-runCtx.Done():
		stopped = conch.StoppedCanceled
		if ctx.Err() == nil {
			stopped = conch.StoppedTimeout
		}
		var ended bool
		if ended, err = e.stop(ctx, pids, copied, hr); ended {
			stopped = conch.StoppedNone // it ended on its own before it could be stopped
		}
	}
	dur := time.Since(start)
	if err != nil && stopped == "" {
		return conch.ExecResult{}, fmt.Errorf("exec %s: output: %w", req.Argv[0], err)
	}
	code, err := e.exitCode(ctx, execID)
	if err != nil {
		return conch.ExecResult{}, err
	}
	res := conch.ExecResult{ExitCode: code, Duration: dur, Stopped: stopped}
	sink.mu.Lock()
	res.Output, res.Truncated = sink.buf, sink.truncated
	sink.mu.Unlock()
	if stopped == "" && code == 137 && e.oomKilled(ctx) {
		res.Stopped = conch.StoppedOOM
	}
	return res, nil
}

// stop ends a program whose time ran out and returns how its output
// ended. Its process group is killed once the trampoline has told its pid,
// which under load can come after a short deadline; a program that ends
// meanwhile is left alone (ended).
func (e *engineOps) stop(ctx context.Context, pids *pidStripper, copied <-chan error, hr client.HijackedResponse) (ended bool, err error) {
	t := time.NewTimer(pidWait)
	defer t.Stop()
	select {
	case pid := <-pids.pid:
		e.kill(ctx, pid)
	case err := <-copied:
		return true, err
	case <-t.C:
	}
	hr.Close()
	return false, <-copied
}

// pidWait bounds how long stop waits for the pid of a program that ran
// out of time before it gives up killing it.
const pidWait = 15 * time.Second

// kill stops the process group of pid with a second exec.
func (e *engineOps) kill(ctx context.Context, pid int) {
	if pid <= 0 {
		return
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	p := strconv.Itoa(pid)
	if _, _, _, err := e.run(kctx, []string{"kill", "-KILL", "--", "-" + p, p}, nil, 4096); err != nil {
		e.rt.log.Warn("kill sandbox program", "container", shortID(e.id), "pid", pid, "err", err)
	}
}

// oomKills reads the container's cgroup oom_kill counter (v2 memory.events
// or v1 memory.oom_control).
func (e *engineOps) oomKills(ctx context.Context) (int64, error) {
	out, _, _, err := e.run(ctx, append([]string{"cat"}, oomCounterFiles...), nil, 64<<10)
	if err != nil {
		return -1, err
	}
	if n, ok := parseOOMKill(out); ok {
		return n, nil
	}
	return -1, errors.New("no oom_kill counter in the container's memory cgroup")
}

// oomKilled reports whether the memory cgroup killed something since the
// last check.
func (e *engineOps) oomKilled(ctx context.Context) bool {
	n, err := e.oomKills(ctx)
	if err != nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	killed := e.oomBase >= 0 && n > e.oomBase
	e.oomBase = n
	return killed
}

// run runs a helper program and returns its stdout (up to limit bytes), its
// stderr and exit code.
func (e *engineOps) run(ctx context.Context, argv []string, stdin io.Reader, limit int) (stdout, stderr []byte, code int, err error) {
	hr, execID, err := e.attach(ctx, client.ExecCreateOptions{Cmd: argv, WorkingDir: WorkspaceDir, AttachStdin: stdin != nil})
	if err != nil {
		return nil, nil, -1, err
	}
	defer hr.Close()
	if stdin != nil {
		go func() {
			_, _ = io.Copy(hr.Conn, stdin)
			_ = hr.CloseWrite()
		}()
	}
	out := &outputSink{limit: limit}
	errb := &outputSink{limit: 64 << 10}
	stop := context.AfterFunc(ctx, hr.Close)
	_, cerr := io.Copy(out, &demux{src: hr.Reader, stderr: errb})
	if !stop() {
		return nil, nil, -1, fmt.Errorf("exec %s: %w", argv[0], ctx.Err())
	}
	if cerr != nil {
		return nil, nil, -1, fmt.Errorf("exec %s: %w", argv[0], cerr)
	}
	code, err = e.exitCode(ctx, execID)
	return out.buf, errb.buf, code, err
}

// fileErr turns a helper's failure into an error naming the path.
func fileErr(op, p string, stderr []byte, code int) error {
	msg := strings.TrimSpace(string(stderr))
	switch {
	case strings.Contains(msg, "No such file or directory"):
		return &conch.Error{Kind: conch.KindNotFound, User: fmt.Sprintf("%s: %s does not exist", op, p), Err: fs.ErrNotExist}
	case strings.Contains(msg, "Is a directory"):
		return conch.Errorf(conch.KindInvalid, "%s: %s is a directory", op, p)
	case strings.Contains(msg, "Not a directory"):
		return conch.Errorf(conch.KindInvalid, "%s: %s is not a directory", op, p)
	case strings.Contains(msg, "Permission denied") || strings.Contains(msg, "Read-only file system"):
		return &conch.Error{Kind: conch.KindInvalid, User: fmt.Sprintf("%s: %s: %s", op, p, lastLine(msg)), Err: fs.ErrPermission}
	}
	return fmt.Errorf("%s %s: exit %d: %s", op, p, code, msg)
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		return strings.TrimSpace(s[i+1:])
	}
	return s
}

// ReadFile returns at most limit bytes of the file (limit <= 0: all of it,
// up to 64 MiB).
func (e *engineOps) ReadFile(ctx context.Context, p string, limit int64) ([]byte, error) {
	p = resolve(p)
	const maxAll = 64 << 20
	argv := []string{"cat", "--", p}
	cap := maxAll
	if limit > 0 {
		argv = []string{"head", "-c", strconv.FormatInt(limit, 10), "--", p}
		cap = int(min(limit, maxAll))
	}
	out, stderr, code, err := e.run(ctx, argv, nil, cap)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fileErr("read", p, stderr, code)
	}
	return out, nil
}

// ReadWorkspaceFile is refused without the sandboxd: a file read by a
// program of the image cannot be opened without following links, and a
// check before the read could be raced.
func (e *engineOps) ReadWorkspaceFile(context.Context, string, int64) ([]byte, error) {
	return nil, conch.Errorf(conch.KindUnavailable, "sending files needs the sandbox agent (sandbox.sandboxd_binary), which this sandbox runs without")
}

// WriteFile writes data to the file, creating its directory.
func (e *engineOps) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	p = resolve(p)
	if mode == 0 {
		mode = 0o644
	}
	argv := []string{"/bin/sh", "-c", `mkdir -p -- "$(dirname -- "$1")" && cat > "$1" && chmod "$2" -- "$1"`,
		"conch-write", p, strconv.FormatUint(uint64(mode.Perm()), 8)}
	_, stderr, code, err := e.run(ctx, argv, bytes.NewReader(data), 4096)
	if err != nil {
		return err
	}
	if code != 0 {
		return fileErr("write", p, stderr, code)
	}
	return nil
}

// ListFiles lists the directory's entries, sorted by name.
func (e *engineOps) ListFiles(ctx context.Context, p string) ([]conch.FileInfo, error) {
	p = resolve(p)
	argv := []string{"find", p, "-mindepth", "1", "-maxdepth", "1", "-printf", `%f\0%s\0%m\0%T@\0%y\0`}
	out, stderr, code, err := e.run(ctx, argv, nil, 16<<20)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fileErr("list", p, stderr, code)
	}
	return parseFind(out)
}

func parseFind(out []byte) ([]conch.FileInfo, error) {
	fields := strings.Split(string(out), "\x00")
	if n := len(fields); n > 0 && fields[n-1] == "" {
		fields = fields[:n-1]
	}
	if len(fields)%5 != 0 {
		return nil, fmt.Errorf("list: malformed find output (%d fields)", len(fields))
	}
	infos := make([]conch.FileInfo, 0, len(fields)/5)
	for i := 0; i < len(fields); i += 5 {
		size, err1 := strconv.ParseInt(fields[i+1], 10, 64)
		perm, err2 := strconv.ParseUint(fields[i+2], 8, 32)
		secs, err3 := strconv.ParseFloat(fields[i+3], 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("list: malformed find output: %w", err)
		}
		fi := conch.FileInfo{Name: fields[i], Size: size, Mode: fs.FileMode(perm),
			ModTime: time.Unix(0, int64(secs*1e9)).UTC()}
		switch fields[i+4] {
		case "d":
			fi.IsDir, fi.Mode = true, fi.Mode|fs.ModeDir
		case "l":
			fi.Mode |= fs.ModeSymlink
		case "p":
			fi.Mode |= fs.ModeNamedPipe
		case "s":
			fi.Mode |= fs.ModeSocket
		}
		infos = append(infos, fi)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	return infos, nil
}
