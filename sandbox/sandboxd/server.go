package sandboxd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Server is the agent side of the protocol. The zero value serves a real
// container: paths are taken as they are and programs get the agent's
// environment.
type Server struct {
	// Root, if set, is prepended to every sandbox path the server touches:
	// file operations and programs' working directories. Tests use it to
	// serve a temp dir as if it were the container (Root/workspace plays
	// /workspace). Program paths in argv are not mapped.
	Root string
	// Workspace is where relative paths and an empty working directory
	// resolve; "" means /workspace.
	Workspace string
	// Env is the base environment of programs; nil means os.Environ().
	Env []string
	// MemoryEvents is the cgroup v2 memory.events file whose oom_kill counter
	// confirms an OOM kill; "" means /sys/fs/cgroup/memory.events, "-" turns
	// the check off.
	MemoryEvents string
	// DrainGrace is how long output is still awaited after a program exited
	// while something it started keeps its output open; 0 means 250 ms.
	DrainGrace time.Duration
	// Logger receives protocol problems; nil discards them.
	Logger *slog.Logger
	// ReclaimProcesses lets the agent kill every process it may signal
	// (kill(-1), all but itself and pid 1) when a program cannot be started
	// because fork fails with EAGAIN (the pids limit). Only for an agent in
	// a sandbox, where init runs as another user: never in tests on a host.
	ReclaimProcesses bool
}

// Serve runs the agent with default settings over r and w until r ends, a
// write fails, or ctx is done. It is what `conch sandbox-agent` runs.
func Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	return (&Server{}).Serve(ctx, r, w)
}

// ServeStdio is the whole `conch sandbox-agent` command: it makes itself
// untraceable by the tools (see SetNotDumpable), serves over the process's
// stdin and stdout, turns SIGPIPE into write errors (so a broken stream ends
// the agent cleanly and its programs are killed) and stops on SIGTERM or
// SIGINT. It reclaims the sandbox's processes when fork fails.
func ServeStdio(ctx context.Context) error {
	if err := SetNotDumpable(); err != nil {
		return fmt.Errorf("sandbox agent: %w", err)
	}
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return (&Server{ReclaimProcesses: true}).Serve(ctx, os.Stdin, os.Stdout)
}

// SetNotDumpable clears the calling process's dumpable flag
// (prctl(PR_SET_DUMPABLE, 0)): a process of the same uid without
// CAP_SYS_PTRACE can then no longer ptrace it or read its memory, and its
// /proc files belong to root. Programs it starts are dumpable again after
// their execve, so the tools can still debug their own programs.
func SetNotDumpable() error {
	const prSetDumpable = 4
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", errno)
	}
	return nil
}

// sconn is one served connection.
type sconn struct {
	srv *Server
	ctx context.Context
	fw  *frameWriter
	log *slog.Logger

	mu      sync.Mutex
	streams map[uint32]*sstream
	wg      sync.WaitGroup
}

// sstream is one request being served.
type sstream struct {
	id     uint32
	ctx    context.Context // canceled by a cancel frame or the end of the connection
	cancel context.CancelFunc
	in     *queue  // stdin or file contents from the client
	out    *window // credit for data to the client
}

// Serve runs the agent over r and w; see the package doc for the protocol.
// It returns nil when r ends, and kills every program it started before it
// returns.
func (s *Server) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &sconn{srv: s, ctx: ctx, fw: &frameWriter{w: w}, log: log, streams: map[uint32]*sstream{}}
	defer func() {
		cancel()
		c.wg.Wait()
	}()

	hb, _ := json.Marshal(hello{Proto: ProtoVersion, Version: Version})
	if err := c.fw.write(0, frameHello, hb); err != nil {
		return fmt.Errorf("agent serve: hello: %w", err)
	}

	errc := make(chan error, 1)
	go func() { errc <- c.readLoop(newFrameReader(r)) }()
	select {
	case err := <-errc:
		if errors.Is(err, io.EOF) {
			return nil
		}
		return fmt.Errorf("agent serve: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *sconn) readLoop(fr *frameReader) error {
	for {
		f, err := fr.read()
		if err != nil {
			return err
		}
		if err := c.dispatch(f); err != nil {
			c.log.Warn("agent: dropping connection", "err", err)
			return err
		}
	}
}

func (c *sconn) stream(id uint32) *sstream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id]
}

func (c *sconn) dispatch(f frame) error {
	switch f.typ {
	case frameRequest:
		var req request
		if err := json.Unmarshal(f.payload, &req); err != nil {
			return fmt.Errorf("%w: request header: %v", ErrProtocol, err)
		}
		ctx, cancel := context.WithCancel(c.ctx)
		st := &sstream{id: f.id, ctx: ctx, cancel: cancel, in: newQueue(), out: newWindow()}
		c.mu.Lock()
		_, dup := c.streams[f.id]
		if !dup {
			c.streams[f.id] = st
		}
		c.mu.Unlock()
		if dup || f.id == 0 {
			cancel()
			return fmt.Errorf("%w: request on stream %d, which is in use", ErrProtocol, f.id)
		}
		c.wg.Add(1)
		go c.handle(st, req)
	case frameData:
		if st := c.stream(f.id); st != nil {
			return st.in.push(f.payload)
		}
	case frameEOF:
		if st := c.stream(f.id); st != nil {
			st.in.finish(nil, nil)
		}
	case frameWindow:
		n, err := parseWindow(f.payload)
		if err != nil {
			return err
		}
		if st := c.stream(f.id); st != nil {
			st.out.add(n)
		}
	case frameCancel:
		if st := c.stream(f.id); st != nil {
			st.cancel()
		}
	default:
		return fmt.Errorf("%w: unexpected %s frame from the client", ErrProtocol, f.typ)
	}
	return nil
}

func (c *sconn) handle(st *sstream, req request) {
	defer c.wg.Done()
	defer st.cancel()
	var res result
	var err error
	switch req.Op {
	case opPing:
		res.Version = Version
	case opExec:
		res, err = c.exec(st, req)
	case opRead:
		res, err = c.readFile(st, req)
	case opWrite:
		res, err = c.writeFile(st, req)
	case opList:
		res, err = c.list(st, req)
	case opReadWorkspace:
		res, err = c.readWorkspace(st, req)
	case opStatfs:
		res, err = c.statfs(req)
	default:
		err = invalidf("unknown operation %q", req.Op)
	}
	if err != nil {
		res = result{Error: newWireError(err)}
	}
	b, _ := json.Marshal(res)
	c.mu.Lock()
	delete(c.streams, st.id)
	c.mu.Unlock()
	st.out.close()
	st.in.finish(nil, errWindowClosed)
	if err := c.fw.write(st.id, frameResult, b); err != nil {
		c.log.Debug("agent: result not delivered", "stream", st.id, "err", err)
	}
}

// resolve makes a sandbox path absolute and clean, and maps it to the path
// the server opens.
func (s *Server) resolve(p string) (abs, host string, err error) {
	if p == "" {
		return "", "", invalidf("empty path")
	}
	if err := checkNUL("path", p); err != nil {
		return "", "", err
	}
	if !path.IsAbs(p) {
		p = path.Join(s.workspace(), p)
	}
	abs = path.Clean(p)
	if s.Root == "" {
		return abs, abs, nil
	}
	return abs, filepath.Join(s.Root, filepath.FromSlash(abs)), nil
}

func (s *Server) workspace() string {
	if s.Workspace == "" {
		return "/workspace"
	}
	return s.Workspace
}

func checkNUL(what, v string) error {
	for i := 0; i < len(v); i++ {
		if v[i] == 0 {
			return invalidf("%s contains a NUL byte at offset %d", what, i)
		}
	}
	return nil
}

// sendBytes streams b to the client as data frames.
func (c *sconn) sendBytes(st *sstream, b []byte) error {
	for len(b) > 0 {
		n, err := st.out.take(st.ctx, min(len(b), DataChunk))
		if err != nil {
			return err
		}
		if err := c.fw.write(st.id, frameData, b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// sendReader streams r to the client as data frames until EOF.
func (c *sconn) sendReader(st *sstream, r io.Reader) (int64, error) {
	var total int64
	for {
		n, err := st.out.take(st.ctx, DataChunk)
		if err != nil {
			return total, err
		}
		buf := make([]byte, headerSize+n)
		m, rerr := r.Read(buf[headerSize:])
		st.out.giveBack(n - m)
		if m > 0 {
			total += int64(m)
			if err := c.fw.writeBuf(st.id, frameData, buf[:headerSize+m]); err != nil {
				return total, err
			}
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
	}
}
