package sandboxd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"time"
	"unicode"

	"conch"
	"conch/internal/backoff"
)

// Defaults of the client.
const (
	// DefaultOutputLimit is how much output ExecResult.Output keeps when the
	// request does not say; OnOutput still sees everything.
	DefaultOutputLimit = 64 << 10
	// DefaultOutputCeiling is how much output a program run with a Timeout
	// may produce before it is killed with StoppedOutput.
	DefaultOutputCeiling = 1 << 30
	// DefaultReadLimit caps ReadFile when the caller passes no limit.
	DefaultReadLimit = 64 << 20
	// cancelGrace is how long Exec waits for the agent to confirm a kill.
	cancelGrace = 5 * time.Second
)

// DialFunc opens a fresh stream to an agent: the stdin (write side) and
// stdout (read side) of a running `conch sandbox-agent`, with nothing else
// mixed in. Close must tear the stream down.
type DialFunc func(ctx context.Context) (io.ReadWriteCloser, error)

// ClientOptions tune a Client.
type ClientOptions struct {
	// ID is what Client.ID returns: the container id.
	ID string
	// OutputCeiling is the output size at which a program run with a
	// Timeout is killed (StoppedOutput); 0 means DefaultOutputCeiling.
	OutputCeiling int64
	// ConfirmOOM, if set, is asked after a program died of SIGKILL that the
	// agent could not attribute; true makes the result StoppedOOM. The
	// runtime can answer from the engine's view of the container.
	ConfirmOOM func(ctx context.Context) bool
}

// Client speaks to an agent over one multiplexed stream and implements
// conch.Sandbox. It is safe for concurrent use: every call is a stream of
// its own. When the stream breaks, calls in flight fail with ErrDisconnected
// and the next call dials again.
type Client struct {
	dial DialFunc
	opts ClientOptions

	dialSem chan struct{} // one dial at a time
	mu      sync.Mutex
	cur     *session
	closed  bool
}

var _ conch.Sandbox = (*Client)(nil)

// ErrDisconnected reports that the stream to the agent broke while a call
// was in flight. Calls that did not change anything (reads, listings) are
// retried once on a new stream; an Exec is not.
var ErrDisconnected = &conch.Error{Kind: conch.KindTransient, User: "the connection to the sandbox broke; try again"}

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("agent client closed")

// NewClient returns a client that dials lazily on first use.
func NewClient(dial DialFunc, opts ClientOptions) *Client {
	if opts.OutputCeiling <= 0 {
		opts.OutputCeiling = DefaultOutputCeiling
	}
	return &Client{dial: dial, opts: opts, dialSem: make(chan struct{}, 1)}
}

// ID returns the container id given in the options.
func (c *Client) ID() string { return c.opts.ID }

// Close tears down the stream; calls in flight fail.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	s := c.cur
	c.cur = nil
	c.mu.Unlock()
	if s != nil {
		s.fail(ErrClosed)
	}
	return nil
}

// Connected reports whether the client holds an open stream (a call now
// needs no dial).
func (c *Client) Connected() bool {
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	return s != nil && s.alive()
}

// Reset drops the current stream, so the next call dials again.
func (c *Client) Reset() {
	c.mu.Lock()
	s := c.cur
	c.cur = nil
	c.mu.Unlock()
	if s != nil {
		s.fail(ErrDisconnected)
	}
}

// Ping round-trips to the agent and returns its version.
func (c *Client) Ping(ctx context.Context) (string, error) {
	var version string
	err := c.retry(ctx, func(s *session) error {
		st, err := s.open(ctx, request{Op: opPing})
		if err != nil {
			return err
		}
		defer s.forget(st)
		res, err := st.wait(ctx, nil)
		if err != nil {
			return err
		}
		version = res.Version
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("agent ping: %w", err)
	}
	return version, nil
}

// session returns the live session, dialling a new one if needed.
func (c *Client) session(ctx context.Context) (*session, error) {
	c.mu.Lock()
	s, closed := c.cur, c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if s != nil && s.alive() {
		return s, nil
	}
	select {
	case c.dialSem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.dialSem }()
	c.mu.Lock()
	s, closed = c.cur, c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if s != nil && s.alive() {
		return s, nil
	}
	s, err := c.connectRetry(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		s.fail(ErrClosed)
		return nil, ErrClosed
	}
	c.cur = s
	c.mu.Unlock()
	return s, nil
}

// connectRetry connects, trying again a few times when the agent's stream
// does not begin with its hello: under load an engine may close a fresh exec
// attachment, or fail the exec, before the program starts. Other failures
// are returned at once.
func (c *Client) connectRetry(ctx context.Context) (*session, error) {
	var s *session
	err := connectPolicy.Retry(ctx, func(ctx context.Context, _ int) error {
		var err error
		s, err = c.connect(ctx)
		if err != nil && !errors.Is(err, errNoHello) {
			return backoff.Permanent(err)
		}
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// connectPolicy: three attempts, about 50–100 ms and 100–200 ms apart.
var connectPolicy = backoff.Policy{Base: 100 * time.Millisecond, Max: 2}

// retryAtOnce retries once without waiting: a fresh session is the remedy.
var retryAtOnce = backoff.Policy{Max: 1, Wait: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}

// ErrConnect is wrapped by the errors of a call that found no agent to
// talk to (the dial or the handshake failed): nothing of the call was sent,
// so it may be tried again, e.g. after the sandbox was recreated.
var ErrConnect = errors.New("no connection to the sandbox agent")

// errNoHello marks a stream that ended before the agent said hello.
var errNoHello = errors.New("no hello from the agent")

func (c *Client) connect(ctx context.Context) (*session, error) {
	rwc, err := c.dial(ctx)
	if err != nil {
		return nil, &conch.Error{Kind: conch.KindUnavailable, User: "cannot reach the sandbox", Err: fmt.Errorf("agent dial: %w: %w", ErrConnect, err)}
	}
	fr := newFrameReader(rwc)
	type helloResult struct {
		h   hello
		err error
	}
	hc := make(chan helloResult, 1)
	go func() {
		h, err := readHello(fr)
		hc <- helloResult{h, err}
	}()
	var hr helloResult
	select {
	case hr = <-hc:
		if hr.err != nil {
			// Whatever came instead (nothing, or the engine's own error
			// text) means the agent did not start.
			hr.err = fmt.Errorf("%w: %w", errNoHello, hr.err)
		}
	case <-ctx.Done():
		rwc.Close()
		return nil, fmt.Errorf("agent handshake: %w", ctx.Err())
	}
	if hr.err == nil && hr.h.Proto != ProtoVersion {
		hr.err = fmt.Errorf("agent %s speaks protocol %d, this client speaks %d; the sandbox must be recreated", hr.h.Version, hr.h.Proto, ProtoVersion)
	}
	if hr.err != nil {
		rwc.Close()
		return nil, &conch.Error{Kind: conch.KindUnavailable, User: "the sandbox agent did not start", Err: fmt.Errorf("agent handshake: %w: %w", ErrConnect, hr.err)}
	}
	s := &session{
		rwc:     rwc,
		fw:      &frameWriter{w: rwc},
		streams: map[uint32]*cstream{},
		dead:    make(chan struct{}),
		version: hr.h.Version,
	}
	go s.readLoop(fr)
	return s, nil
}

// readHello reads the first frame; anything else is shown as text, because
// it is usually an error message from the runtime ("exec failed: …").
func readHello(fr *frameReader) (hello, error) {
	hdr, err := fr.r.Peek(headerSize)
	if err != nil {
		got, _ := fr.r.Peek(fr.r.Buffered())
		if len(got) > 0 {
			return hello{}, fmt.Errorf("stream does not start with a hello frame: %q", printable(got))
		}
		return hello{}, fmt.Errorf("stream ended before the hello frame: %w", err)
	}
	if frameType(hdr[8]) != frameHello || hdr[0] != 0 || hdr[1] != 0 {
		got, _ := fr.r.Peek(min(fr.r.Buffered(), 200))
		return hello{}, fmt.Errorf("stream does not start with a hello frame: %q", printable(got))
	}
	f, err := fr.read()
	if err != nil {
		return hello{}, fmt.Errorf("hello: %w", err)
	}
	var h hello
	if err := json.Unmarshal(f.payload, &h); err != nil {
		return hello{}, fmt.Errorf("hello: %w", err)
	}
	return h, nil
}

func printable(b []byte) string {
	return string(bytes.Map(func(r rune) rune {
		if unicode.IsPrint(r) || r == '\n' {
			return r
		}
		return '.'
	}, b))
}

// retry runs fn on a session, once more on a fresh session if the first
// one broke. Only for calls that are safe to repeat.
func (c *Client) retry(ctx context.Context, fn func(*session) error) error {
	return retryAtOnce.Retry(ctx, func(ctx context.Context, _ int) error {
		s, err := c.session(ctx)
		if err != nil {
			return backoff.Permanent(err)
		}
		err = fn(s)
		if errors.Is(err, ErrDisconnected) {
			return err
		}
		return backoff.Permanent(err)
	}, nil)
}

// session is one connected stream.
type session struct {
	rwc     io.ReadWriteCloser
	fw      *frameWriter
	version string

	mu      sync.Mutex
	streams map[uint32]*cstream
	nextID  uint32
	err     error
	dead    chan struct{}
}

// cstream is one call in flight.
type cstream struct {
	s   *session
	id  uint32
	in  *queue  // data and the result from the agent
	out *window // credit for our data
}

func (s *session) alive() bool {
	select {
	case <-s.dead:
		return false
	default:
		return true
	}
}

// fail ends the session and every call on it.
func (s *session) fail(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	close(s.dead)
	streams := s.streams
	s.streams = nil
	s.mu.Unlock()
	s.rwc.Close()
	for _, st := range streams {
		st.out.close()
		st.in.finish(nil, err)
	}
}

func (s *session) readLoop(fr *frameReader) {
	for {
		f, err := fr.read()
		if err != nil {
			s.fail(fmt.Errorf("%w (read: %v)", ErrDisconnected, err))
			return
		}
		if err := s.dispatch(f); err != nil {
			s.fail(fmt.Errorf("%w (%v)", ErrDisconnected, err))
			return
		}
	}
}

func (s *session) lookup(id uint32) *cstream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[id]
}

func (s *session) dispatch(f frame) error {
	switch f.typ {
	case frameData:
		if st := s.lookup(f.id); st != nil {
			return st.in.push(f.payload)
		}
	case frameWindow:
		n, err := parseWindow(f.payload)
		if err != nil {
			return err
		}
		if st := s.lookup(f.id); st != nil {
			st.out.add(n)
		}
	case frameResult:
		s.mu.Lock()
		st := s.streams[f.id]
		delete(s.streams, f.id)
		s.mu.Unlock()
		if st != nil {
			st.out.close()
			st.in.finish(f.payload, nil)
		}
	case frameHello:
	default:
		return fmt.Errorf("%w: unexpected %s frame from the agent", ErrProtocol, f.typ)
	}
	return nil
}

// open starts a call by sending its request.
func (s *session) open(ctx context.Context, req request) (*cstream, error) {
	hb, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	if len(hb) > MaxFrame {
		return nil, conch.Errorf(conch.KindInvalid, "the request is too large (%d bytes; at most %d)", len(hb), MaxFrame)
	}
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	s.nextID++
	st := &cstream{s: s, id: s.nextID, in: newQueue(), out: newWindow()}
	s.streams[st.id] = st
	s.mu.Unlock()
	if err := s.fw.write(st.id, frameRequest, hb); err != nil {
		s.fail(fmt.Errorf("%w (write: %v)", ErrDisconnected, err))
		return nil, s.failure()
	}
	return st, nil
}

func (s *session) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		return ErrDisconnected
	}
	return s.err
}

// forget drops a call, whatever state it is in. A call abandoned before
// its result is canceled on the agent, so the agent's side ends too.
func (s *session) forget(st *cstream) {
	s.mu.Lock()
	_, pending := s.streams[st.id]
	if pending {
		delete(s.streams, st.id)
	}
	s.mu.Unlock()
	st.out.close()
	if pending {
		_ = s.fw.write(st.id, frameCancel, nil)
	}
}

// sendAll writes data then an eof, within the window.
func (st *cstream) sendAll(ctx context.Context, b []byte) error {
	for len(b) > 0 {
		n, err := st.out.take(ctx, min(len(b), DataChunk))
		if err != nil {
			return err
		}
		if err := st.s.fw.write(st.id, frameData, b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return st.s.fw.write(st.id, frameEOF, nil)
}

// wait consumes data (handing each chunk to onData, then returning its
// credit) until the result arrives.
func (st *cstream) wait(ctx context.Context, onData func([]byte)) (result, error) {
	for {
		b, err := st.in.pop(ctx)
		if err == nil {
			if onData != nil {
				onData(b)
			}
			if werr := st.s.fw.window(st.id, len(b)); werr != nil {
				st.s.fail(fmt.Errorf("%w (write: %v)", ErrDisconnected, werr))
			}
			continue
		}
		if !errors.Is(err, errEnd) {
			return result{}, err
		}
		payload, _ := st.in.result()
		var res result
		if err := json.Unmarshal(payload, &res); err != nil {
			st.s.fail(fmt.Errorf("%w: result: %v", ErrProtocol, err))
			return result{}, fmt.Errorf("%w: result: %v", ErrProtocol, err)
		}
		return res, nil
	}
}

// ReadFile returns at most limit bytes of the file at path (limit ≤ 0 means
// DefaultReadLimit). Ask for one byte more than you want to learn whether
// the file is longer.
func (c *Client) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	var data []byte
	err := c.retry(ctx, func(s *session) error {
		st, err := s.open(ctx, request{Op: opRead, Path: path, Limit: limit})
		if err != nil {
			return err
		}
		defer s.forget(st)
		var buf bytes.Buffer
		res, err := st.wait(ctx, func(b []byte) { buf.Write(b) })
		if err != nil {
			return err
		}
		if res.Error != nil {
			return remoteErr("read "+path, res.Error)
		}
		data = buf.Bytes()
		if data == nil {
			data = []byte{}
		}
		return nil
	})
	if err != nil {
		return nil, wrapOp("read file", err)
	}
	return data, nil
}

// WriteFile replaces the file at path atomically (temp file and rename),
// creating missing parent directories. mode 0 means 0644.
func (c *Client) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	err := c.retry(ctx, func(s *session) error {
		st, err := s.open(ctx, request{Op: opWrite, Path: path, Mode: uint32(mode.Perm())})
		if err != nil {
			return err
		}
		defer s.forget(st)
		sendErr := make(chan error, 1)
		go func() { sendErr <- st.sendAll(ctx, data) }()
		res, err := st.wait(ctx, nil)
		if err != nil {
			return err
		}
		if res.Error != nil {
			return remoteErr("write "+path, res.Error)
		}
		if err := <-sendErr; err != nil && !errors.Is(err, errWindowClosed) {
			return err
		}
		if res.Size != int64(len(data)) {
			return fmt.Errorf("agent wrote %d of %d bytes", res.Size, len(data))
		}
		return nil
	})
	return wrapOp("write file", err)
}

// FileSystem returns the size of the file system holding path and what is
// used of it, in bytes. An agent from before this call says the operation
// is unknown (a *RemoteError).
func (c *Client) FileSystem(ctx context.Context, path string) (size, used int64, err error) {
	err = c.retry(ctx, func(s *session) error {
		st, err := s.open(ctx, request{Op: opStatfs, Path: path})
		if err != nil {
			return err
		}
		defer s.forget(st)
		res, err := st.wait(ctx, nil)
		if err != nil {
			return err
		}
		if res.Error != nil {
			return remoteErr("statfs "+path, res.Error)
		}
		size, used = res.FSBytes, res.FSUsed
		return nil
	})
	return size, used, wrapOp("statfs", err)
}

// ListFiles lists a directory, sorted by name.
func (c *Client) ListFiles(ctx context.Context, path string) ([]conch.FileInfo, error) {
	var out []conch.FileInfo
	err := c.retry(ctx, func(s *session) error {
		st, err := s.open(ctx, request{Op: opList, Path: path})
		if err != nil {
			return err
		}
		defer s.forget(st)
		var buf bytes.Buffer
		res, err := st.wait(ctx, func(b []byte) { buf.Write(b) })
		if err != nil {
			return err
		}
		if res.Error != nil {
			return remoteErr("list "+path, res.Error)
		}
		var entries []wireEntry
		if err := json.Unmarshal(buf.Bytes(), &entries); err != nil {
			return fmt.Errorf("%w: listing: %v", ErrProtocol, err)
		}
		out = make([]conch.FileInfo, len(entries))
		for i, e := range entries {
			out[i] = conch.FileInfo{
				Name:    e.Name,
				Size:    e.Size,
				Mode:    fs.FileMode(e.Mode),
				ModTime: time.Unix(0, e.ModTime),
				IsDir:   e.IsDir,
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrapOp("list files", err)
	}
	return out, nil
}

// wrapOp prefixes an error with the operation, keeping remote errors (whose
// text is already user-facing) as they are.
func wrapOp(op string, err error) error {
	if err == nil {
		return nil
	}
	var re *RemoteError
	if errors.As(err, &re) {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}
