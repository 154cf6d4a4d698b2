package sandboxd

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"conch"
)

const defaultDrainGrace = 250 * time.Millisecond

// execTarget checks an exec request and finds its program, working
// directory and environment.
func (c *sconn) execTarget(req request) (prog, dir string, env []string, err error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return "", "", nil, invalidf("exec: no program given")
	}
	for i, a := range req.Argv {
		if err := checkNUL(fmt.Sprintf("argument %d", i), a); err != nil {
			return "", "", nil, err
		}
	}
	env = c.srv.Env
	if env == nil {
		env = os.Environ()
	}
	env = append(env[:len(env):len(env)], req.Env...)
	for _, kv := range req.Env {
		if err := checkNUL("environment entry", kv); err != nil {
			return "", "", nil, err
		}
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return "", "", nil, invalidf("environment entry %q is not KEY=value", kv)
		}
	}
	dirArg := req.Dir
	if dirArg == "" {
		dirArg = c.srv.workspace()
	}
	dirArg, dir, err = c.srv.resolve(dirArg)
	if err != nil {
		return "", "", nil, err
	}
	if fi, serr := os.Stat(dir); serr != nil {
		return "", "", nil, &wireError{Code: codeNotFound, Message: fmt.Sprintf("working directory %s does not exist", dirArg)}
	} else if !fi.IsDir() {
		return "", "", nil, invalidf("working directory %s is not a directory", dirArg)
	}
	prog, err = lookPath(req.Argv[0], dir, envValue(env, "PATH"))
	if err != nil {
		return "", "", nil, err
	}
	return prog, dir, env, nil
}

// exec runs one program: directly, never through a shell, in its own
// process group, with stdout and stderr on one pipe so their interleaving
// is exactly the order the program wrote them.
func (c *sconn) exec(st *sstream, req request) (result, error) {
	prog, dir, env, err := c.execTarget(req)
	if err != nil {
		return result{}, err
	}

	pr, pw, err := os.Pipe()
	if err != nil {
		return result{}, fmt.Errorf("exec: output pipe: %w", err)
	}
	defer pr.Close()
	newCmd := func() *exec.Cmd { return toolCmd(prog, req.Argv, env, dir, pw) }
	var sr, sw *os.File
	if req.Stdin {
		if sr, sw, err = os.Pipe(); err != nil {
			pw.Close()
			return result{}, fmt.Errorf("exec: input pipe: %w", err)
		}
		defer sw.Close()
	}
	oomBefore := c.srv.oomKills()
	start := time.Now()
	cmd, err := c.startReclaiming(newCmd, sr)
	pw.Close()
	if sr != nil {
		sr.Close()
	}
	if err != nil {
		return result{}, startError(req.Argv[0], err)
	}
	pgid := cmd.Process.Pid

	// Killing: the first reason wins; the whole process group goes.
	var stopped atomic.Pointer[conch.StoppedReason]
	kill := func(reason conch.StoppedReason) {
		stopped.CompareAndSwap(nil, &reason)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	defer killWhenDone(st.ctx, req.TimeoutMS, kill)()

	procDone := make(chan struct{})
	if sw != nil {
		c.wg.Add(1)
		go c.pumpStdin(st, sw, procDone)
	}

	grace := cmp.Or(max(c.srv.DrainGrace, 0), defaultDrainGrace)
	var exited atomic.Bool
	var total int64
	pumpDone := make(chan struct{})
	go func() {
		defer close(pumpDone)
		total = c.pumpOutput(st, pr, req.Ceiling, grace, &exited, kill)
	}()

	werr := cmd.Wait()
	dur := time.Since(start)
	// The call is over: what it left running in its session goes too
	// (`sleep 600 &`, a fork bomb under timeout). Long-lived programs
	// belong in terminals, whose tmux server has a session of its own.
	killGroup(pgid)
	close(procDone)
	if sw != nil {
		_ = sw.SetWriteDeadline(time.Now()) // unblock a write to a program that stopped reading
	}
	exited.Store(true)
	_ = pr.SetReadDeadline(time.Now().Add(grace))
	<-pumpDone

	ps := cmd.ProcessState
	if ps == nil {
		return result{}, fmt.Errorf("exec: wait: %w", werr)
	}
	res := exitResult(ps, dur, total, stopped.Load())
	if res.Signal == int(syscall.SIGKILL) && res.Stopped == "" && oomBefore >= 0 {
		res.OOM = c.srv.oomKills() > oomBefore
	}
	return res, nil
}

// toolCmd is the command of one exec call, its output (stdout and stderr
// together) going to out.
func toolCmd(prog string, argv, env []string, dir string, out *os.File) *exec.Cmd {
	return &exec.Cmd{
		Path:   prog,
		Args:   argv,
		Env:    env,
		Dir:    dir,
		Stdout: out,
		Stderr: out,
		// A process group of its own: everything the program starts
		// without leaving it ends with the call. Not a session (setsid):
		// that made the fork+exec of a trivial command ~0.7 ms slower on
		// the 2-core test machine (BenchmarkExecTrue; docs/decisions/
		// 2026-11-26-sandboxd-unix-socket.md), and there is no terminal to
		// detach from (no exec has one; tmux makes its own session).
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
}

// startReclaiming starts the command newCmd builds, reading stdin when it is
// not nil. When the sandbox cannot fork (EAGAIN) and ReclaimProcesses is set,
// it ends every tool process and tries once more with a new command.
func (c *sconn) startReclaiming(newCmd func() *exec.Cmd, stdin *os.File) (*exec.Cmd, error) {
	cmd := newCmd()
	if stdin != nil {
		cmd.Stdin = stdin
	}
	err := cmd.Start()
	if errors.Is(err, syscall.EAGAIN) && c.srv.ReclaimProcesses {
		// The sandbox cannot fork: something escaped its call and filled
		// the pids limit. End every tool process and try once more.
		n := reclaimProcesses()
		c.log.Warn("agent: fork failed (process limit reached); killed the sandbox's tool processes", "killed_rounds", n)
		fmt.Fprintf(os.Stderr, "fork failed (EAGAIN): the sandbox reached its process limit; killed its tool processes\n")
		cmd = newCmd()
		if stdin != nil {
			cmd.Stdin = stdin
		}
		err = cmd.Start()
	}
	return cmd, err
}

// killWhenDone calls kill when ctx ends (StoppedCanceled) or the timeout
// passes first (StoppedTimeout). The returned func stops watching.
func killWhenDone(ctx context.Context, timeoutMS int64, kill func(conch.StoppedReason)) (stop func()) {
	execCtx, cancelExec := ctx, context.CancelFunc(func() {})
	if timeoutMS > 0 {
		execCtx, cancelExec = context.WithTimeout(ctx, time.Duration(timeoutMS)*time.Millisecond)
	}
	stopKiller := context.AfterFunc(execCtx, func() {
		if errors.Is(execCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			kill(conch.StoppedTimeout)
		} else {
			kill(conch.StoppedCanceled)
		}
	})
	return func() {
		stopKiller()
		cancelExec()
	}
}

// killGroup kills process group pgid until no member is left: a member
// forking while the signal is delivered can add one.
func killGroup(pgid int) {
	for i := 0; i < 100; i++ {
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
			return // ESRCH: the group is empty
		}
		time.Sleep(time.Millisecond)
	}
}

// reclaimProcesses kills every process the agent may signal except itself
// and pid 1 (kill(-1)), repeating until none is left or a second passed,
// and returns how many rounds it took. In a sandbox the agent shares its
// uid only with the tools' processes: init and the container's main
// process run as another user, so they stay.
func reclaimProcesses() int {
	deadline := time.Now().Add(time.Second)
	n := 0
	for time.Now().Before(deadline) {
		n++
		if err := syscall.Kill(-1, syscall.SIGKILL); err != nil {
			break // ESRCH: nothing left to signal
		}
		time.Sleep(5 * time.Millisecond)
	}
	return n
}

// exitResult describes how a program ended; stopped is why it was killed,
// if it was.
func exitResult(ps *os.ProcessState, dur time.Duration, total int64, stopped *conch.StoppedReason) result {
	res := result{DurationUS: dur.Microseconds(), OutputBytes: total}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = int(ws.Signal())
		res.ExitCode = 128 + res.Signal
	} else {
		res.ExitCode = ps.ExitCode()
	}
	if stopped != nil {
		res.Stopped = string(*stopped)
	}
	return res
}

// pumpOutput sends the program's output as data frames as the client gives
// credit, kills the program when it passes ceiling (0: none), and stops a
// grace period after exited is set. It returns the bytes sent.
func (c *sconn) pumpOutput(st *sstream, pr *os.File, ceiling int64, grace time.Duration, exited *atomic.Bool, kill func(conch.StoppedReason)) (total int64) {
	for {
		// Credit waits on the connection, not the exec: output produced
		// before a kill is still delivered.
		n, err := st.out.take(c.ctx, DataChunk)
		if err != nil {
			return total
		}
		if exited.Load() {
			_ = pr.SetReadDeadline(time.Now().Add(grace))
		}
		buf := make([]byte, headerSize+n)
		m, rerr := pr.Read(buf[headerSize:])
		st.out.giveBack(n - m)
		if m > 0 {
			if ceiling > 0 && total+int64(m) > ceiling {
				m = int(ceiling - total)
				kill(conch.StoppedOutput)
				rerr = errors.New("output ceiling")
			}
			total += int64(m)
			if m > 0 {
				if err := c.fw.writeBuf(st.id, frameData, buf[:headerSize+m]); err != nil {
					kill(conch.StoppedCanceled)
					return total
				}
			}
		}
		if rerr != nil {
			return total
		}
	}
}

// pumpStdin copies the client's stdin frames to the program and returns
// credit as it goes; after the program stops reading, input is discarded.
func (c *sconn) pumpStdin(st *sstream, sw *os.File, procDone <-chan struct{}) {
	defer c.wg.Done()
	defer sw.Close()
	ctx, cancel := context.WithCancel(st.ctx)
	defer cancel()
	go func() {
		select {
		case <-procDone:
			cancel()
		case <-ctx.Done():
		}
	}()
	broken := false
	for {
		b, err := st.in.pop(ctx)
		if err != nil {
			return // eof, stream end, or program gone
		}
		if !broken {
			if _, err := sw.Write(b); err != nil {
				broken = true
			}
		}
		if err := c.fw.window(st.id, len(b)); err != nil {
			return
		}
	}
}

// lookPath finds the program like a shell would, with the program's own PATH.
func lookPath(name, dir, pathEnv string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", err
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" || !filepath.IsAbs(d) {
			continue // "." and relative entries are never searched
		}
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	msg := fmt.Sprintf("program %q not found (searched PATH=%s); it may not be installed in the sandbox", name, pathEnv)
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		msg = fmt.Sprintf("program %q not found in PATH; to run the file %s in the working directory, write ./%s", name, name, name)
	}
	return "", &wireError{Code: codeNotFound, Message: msg}
}

func executable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil && os.IsNotExist(err):
		return &wireError{Code: codeNotFound, Message: fmt.Sprintf("program %s does not exist", p)}
	case err != nil:
		return newWireError(err)
	case fi.IsDir():
		return invalidf("%s is a directory, not a program", p)
	case fi.Mode()&0o111 == 0:
		return &wireError{Code: codePermission, Message: fmt.Sprintf("%s is not executable (chmod +x it, or run it with its interpreter)", p)}
	}
	return nil
}

func startError(name string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOEXEC):
		return invalidf("%s is not a program this sandbox can run (exec format error); if it is a script, give it a #! line or run it with its interpreter", name)
	case errors.Is(err, syscall.EACCES):
		return &wireError{Code: codePermission, Message: fmt.Sprintf("permission denied running %s", name)}
	case errors.Is(err, syscall.ENOENT):
		return &wireError{Code: codeNotFound, Message: fmt.Sprintf("cannot run %s: it or its interpreter does not exist", name)}
	}
	return fmt.Errorf("exec %s: %w", name, err)
}

func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val // the last one wins, as in exec
		}
	}
	return v
}

// oomKills reads the cgroup's oom_kill counter; -1 when unavailable.
func (s *Server) oomKills() int64 {
	p := s.MemoryEvents
	switch p {
	case "-":
		return -1
	case "":
		p = "/sys/fs/cgroup/memory.events"
	}
	f, err := os.Open(p)
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "oom_kill "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}
