package sandboxd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"conch"
)

// Exec runs a program in the sandbox.
//
// Output keeps the first req.OutputLimit bytes (DefaultOutputLimit when 0)
// with Truncated set beyond that, while OnOutput sees every byte in order.
// A program is killed only at req.Timeout (StoppedTimeout), when ctx ends
// (StoppedCanceled), or, for a run with a Timeout, at the hard output
// ceiling (ClientOptions.OutputCeiling, StoppedOutput); the whole process
// group goes. A run without a Timeout is a long-lived stream its caller
// consumes and ends (tmux -C attach, tail -f), so it has no ceiling. A program killed by a
// signal reports ExitCode 128+signal, like a shell; SIGKILL becomes
// StoppedOOM only when the cgroup's oom_kill counter or
// ClientOptions.ConfirmOOM confirms it.
//
// When ctx ends, Exec asks the agent to kill the program and returns its
// result with StoppedCanceled and a nil error once the agent confirms.
//
// Errors: a program that is not there, a bad argument or working directory
// come back as a *RemoteError or *conch.Error of kind KindNotFound or
// KindInvalid; a broken stream as ErrDisconnected (not retried: the program
// may have run). The goroutine copying req.Stdin ends when Stdin returns.
func (c *Client) Exec(ctx context.Context, req conch.ExecRequest) (conch.ExecResult, error) {
	if err := validateExec(req); err != nil {
		return conch.ExecResult{}, err
	}
	limit := req.OutputLimit
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	s, err := c.session(ctx)
	if err != nil {
		return conch.ExecResult{}, fmt.Errorf("exec: %w", err)
	}
	var ceiling int64
	if req.Timeout > 0 {
		ceiling = c.opts.OutputCeiling
	}
	st, err := s.open(ctx, request{
		Op:        opExec,
		Argv:      req.Argv,
		Env:       req.Env,
		Dir:       req.Dir,
		TimeoutMS: ceilMS(req.Timeout),
		Ceiling:   ceiling,
		Stdin:     req.Stdin != nil,
	})
	if err != nil {
		return conch.ExecResult{}, fmt.Errorf("exec: %w", err)
	}
	defer s.forget(st)
	if req.Stdin != nil {
		go st.pumpStdin(req.Stdin)
	}

	out := make([]byte, 0, min(limit, 16<<10))
	var total int64
	onData := func(b []byte) {
		total += int64(len(b))
		if room := limit - len(out); room > 0 {
			out = append(out, b[:min(room, len(b))]...)
		}
		if req.OnOutput != nil {
			req.OnOutput(b)
		}
	}
	res, err := st.wait(ctx, onData)
	canceled := false
	if err != nil && ctx.Err() != nil && s.alive() {
		// Ask the agent to kill it, and wait a little for the confirmation.
		canceled = true
		if werr := s.fw.write(st.id, frameCancel, nil); werr == nil {
			gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
			res, err = st.wait(gctx, onData)
			cancel()
		}
	}
	if err != nil {
		if canceled {
			return conch.ExecResult{Output: out, Truncated: total > int64(len(out)), Stopped: conch.StoppedCanceled, ExitCode: -1},
				fmt.Errorf("exec %s: canceled, and the agent did not confirm the kill: %w", req.Argv[0], ctx.Err())
		}
		return conch.ExecResult{}, fmt.Errorf("exec %s: %w", req.Argv[0], err)
	}
	if res.Error != nil {
		return conch.ExecResult{}, remoteErr("exec "+req.Argv[0], res.Error)
	}
	r := conch.ExecResult{
		ExitCode:  res.ExitCode,
		Output:    out,
		Truncated: total > int64(len(out)),
		Duration:  time.Duration(res.DurationUS) * time.Microsecond,
		Stopped:   conch.StoppedReason(res.Stopped),
	}
	if canceled && r.Stopped == conch.StoppedNone && res.Signal != 0 {
		r.Stopped = conch.StoppedCanceled
	}
	if res.Signal == int(syscall.SIGKILL) && r.Stopped == conch.StoppedNone {
		if res.OOM || (c.opts.ConfirmOOM != nil && c.opts.ConfirmOOM(ctx)) {
			r.Stopped = conch.StoppedOOM
		}
	}
	return r, nil
}

// pumpStdin copies the caller's stdin to the agent within the window and
// ends with an eof frame.
func (st *cstream) pumpStdin(r io.Reader) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-st.in.closed:
		case <-st.s.dead:
		case <-ctx.Done():
			return
		}
		cancel()
	}()
	buf := make([]byte, DataChunk)
	for {
		n, rerr := r.Read(buf)
		b := buf[:n]
		for len(b) > 0 {
			k, err := st.out.take(ctx, len(b))
			if err != nil {
				return
			}
			if err := st.s.fw.write(st.id, frameData, b[:k]); err != nil {
				return
			}
			b = b[k:]
		}
		if rerr != nil {
			if ctx.Err() == nil {
				_ = st.s.fw.write(st.id, frameEOF, nil)
			}
			return
		}
	}
}

func validateExec(req conch.ExecRequest) error {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return conch.Errorf(conch.KindInvalid, "exec: no program given")
	}
	for i, a := range req.Argv {
		if j := strings.IndexByte(a, 0); j >= 0 {
			return conch.Errorf(conch.KindInvalid, "exec: argument %d contains a NUL byte (at offset %d); programs cannot receive NUL bytes in arguments", i, j)
		}
	}
	for _, kv := range req.Env {
		if strings.IndexByte(kv, 0) >= 0 {
			return conch.Errorf(conch.KindInvalid, "exec: an environment entry contains a NUL byte")
		}
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return conch.Errorf(conch.KindInvalid, "exec: environment entry %q is not KEY=value", kv)
		}
	}
	if strings.IndexByte(req.Dir, 0) >= 0 {
		return conch.Errorf(conch.KindInvalid, "exec: the working directory contains a NUL byte")
	}
	if req.Timeout < 0 {
		return conch.Errorf(conch.KindInvalid, "exec: negative timeout %s", req.Timeout)
	}
	return nil
}

func ceilMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
