package egress

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"conch"
)

// bridgeScript is the sandbox half of a Bridge, for the python3 of the
// sandbox image. "listen" accepts connections on the sandbox's loopback and
// announces each on stdout ("conn N"); "attach" takes connection N over a
// unix socket (SCM_RIGHTS) and pumps it to stdout and from stdin, so that a
// conch.Sandbox Exec carries it. Nothing in it touches a network.
//
// A listener ends when its stdin closes (conch closed the bridge, or conch
// itself ended). One left over from an earlier conch (its pid file names
// it) is ended by the next listener on the same port, which then binds the
// port again: the URL a CLI was started with stays valid across a restart.
const bridgeScript = `import errno, os, signal, socket, sys, threading, time
mode, ctl = sys.argv[1], sys.argv[2]
if mode == "listen":
    port, pidf = int(sys.argv[3]), sys.argv[4]
    try:
        old = int(open(pidf).read().strip())
        if old != os.getpid() and ctl.encode() in open("/proc/%d/cmdline" % old, "rb").read():
            os.kill(old, signal.SIGKILL)
    except (OSError, ValueError):
        pass
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    deadline = time.time() + 10
    while True:
        try:
            srv.bind(("127.0.0.1", port))
            break
        except OSError as e:
            if e.errno != errno.EADDRINUSE or time.time() > deadline:
                raise
            time.sleep(0.05)
    srv.listen(64)
    with open(pidf + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(pidf + ".tmp", pidf)
    try:
        os.unlink(ctl)
    except FileNotFoundError:
        pass
    cs = socket.socket(socket.AF_UNIX)
    cs.bind(ctl)
    cs.listen(64)
    conns, lock = {}, threading.Lock()
    def serve_ctl():
        while True:
            c, _ = cs.accept()
            try:
                cid = c.recv(32).decode().strip()
                with lock:
                    s = conns.pop(cid, None)
                if s is not None:
                    socket.send_fds(c, [b"ok"], [s.fileno()])
                    s.close()
            finally:
                c.close()
    def watch_stdin():
        sys.stdin.buffer.read()
        os._exit(0)
    threading.Thread(target=serve_ctl, daemon=True).start()
    threading.Thread(target=watch_stdin, daemon=True).start()
    print("ready %d" % srv.getsockname()[1], flush=True)
    n = 0
    while True:
        s, _ = srv.accept()
        n += 1
        with lock:
            conns[str(n)] = s
        print("conn %d" % n, flush=True)
else:
    c = socket.socket(socket.AF_UNIX)
    c.connect(ctl)
    c.sendall(sys.argv[3].encode())
    _, fds, _, _ = socket.recv_fds(c, 16, 1)
    c.close()
    if not fds:
        sys.exit(2)
    s = socket.socket(fileno=fds[0])
    def up():
        while True:
            b = os.read(0, 65536)
            if not b:
                break
            s.sendall(b)
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    threading.Thread(target=up, daemon=True).start()
    out = sys.stdout.buffer
    while True:
        b = s.recv(65536)
        if not b:
            break
        out.write(b)
        out.flush()
`

// ConnServer serves one client connection and closes it. A Bridge hands
// it every connection made to its port in the sandbox; the Injector
// implements it.
type ConnServer interface {
	ServeConn(ctx context.Context, c net.Conn) error
}

// DefaultBridgePort is the port on the sandbox's loopback where conch's
// wiring puts the coding agent's bridge. It is fixed (each sandbox has its
// own loopback, so nothing else of conch's competes for it) so that the URL
// a CLI was started with stays valid after conch restarts.
const DefaultBridgePort = 47291

// BridgeOptions configures a Bridge.
type BridgeOptions struct {
	// Port is the port on the sandbox's loopback; 0 picks a free one (the
	// Bridges of one process then keep the port a conversation got, but a
	// new process cannot know it: give a fixed port for that).
	Port int
	// Dir holds the helper script, its control socket and pid file in the
	// sandbox; "" means /tmp/conch.
	Dir string
	// Python is the interpreter in the sandbox; "" means python3.
	Python string
}

// Bridge carries connections made to a port on the sandbox's loopback to a
// ConnServer on the host (the Injector), over the
// sandbox's Exec streams: the sandbox needs no network.
type Bridge struct {
	sb    conch.Sandbox
	srv   ConnServer
	o     BridgeOptions
	name  string // of the control socket and pid file
	port  int
	stdin *io.PipeWriter
	stop  context.CancelFunc
	ctx   context.Context
	wg    sync.WaitGroup
	done  chan struct{}
}

// StartBridge starts the sandbox half and returns once it listens. With a
// fixed Port, a listener left on it by an earlier bridge (of this process
// or of a conch that has since ended) is ended first.
func StartBridge(ctx context.Context, sb conch.Sandbox, srv ConnServer, o BridgeOptions) (*Bridge, error) {
	if o.Dir == "" {
		o.Dir = "/tmp/conch"
	}
	if o.Python == "" {
		o.Python = "python3"
	}
	if o.Port < 0 || o.Port > 65535 {
		return nil, conch.Errorf(conch.KindInvalid, "egress bridge: port %d is not a TCP port", o.Port)
	}
	name := "egress-bridge-" + strconv.Itoa(o.Port)
	if o.Port == 0 {
		r := make([]byte, 6)
		_, _ = rand.Read(r)
		name = "egress-bridge-" + hex.EncodeToString(r)
	}
	if res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"mkdir", "-p", o.Dir}, Timeout: 30 * time.Second}); err != nil || res.ExitCode != 0 {
		return nil, fmt.Errorf("egress bridge: mkdir %s: %v %s", o.Dir, err, res.Output)
	}
	if err := sb.WriteFile(ctx, path.Join(o.Dir, "egress-bridge.py"), []byte(bridgeScript), 0o644); err != nil {
		return nil, fmt.Errorf("egress bridge: %w", err)
	}
	lifetime, stop := context.WithCancel(context.WithoutCancel(ctx))
	pr, pw := io.Pipe()
	b := &Bridge{sb: sb, srv: srv, o: o, name: name, stdin: pw, stop: stop, ctx: lifetime, done: make(chan struct{})}
	ready := make(chan int, 1)
	var lines lineSplitter
	var execErr error
	go func() {
		defer close(b.done)
		res, err := sb.Exec(lifetime, conch.ExecRequest{
			Argv:        []string{o.Python, "-u", b.script(), "listen", b.ctl(), strconv.Itoa(o.Port), b.pidFile()},
			Dir:         o.Dir,
			Stdin:       pr,
			OutputLimit: 4 << 10,
			OnOutput: func(chunk []byte) {
				lines.feed(chunk, func(l string) {
					switch {
					case strings.HasPrefix(l, "ready "):
						port, _ := strconv.Atoi(strings.TrimPrefix(l, "ready "))
						ready <- port
					case strings.HasPrefix(l, "conn "):
						b.wg.Add(1)
						go b.carry(strings.TrimPrefix(l, "conn "))
					}
				})
			},
		})
		if err == nil {
			err = fmt.Errorf("exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Output)))
		}
		execErr = err
		pr.CloseWithError(err)
	}()
	select {
	case b.port = <-ready:
		return b, nil
	case <-b.done:
		stop()
		return nil, fmt.Errorf("egress bridge: listener on port %d: %w", o.Port, execErr)
	case <-ctx.Done():
		b.Close()
		return nil, ctx.Err()
	}
}

func (b *Bridge) script() string  { return path.Join(b.o.Dir, "egress-bridge.py") }
func (b *Bridge) ctl() string     { return path.Join(b.o.Dir, b.name+".sock") }
func (b *Bridge) pidFile() string { return path.Join(b.o.Dir, b.name+".pid") }

// Port is the port the bridge listens on in the sandbox.
func (b *Bridge) Port() int { return b.port }

// URL is the bridge's origin as the sandbox's programs reach it,
// "http://127.0.0.1:<port>": a base URL for an Injector, HTTPS_PROXY for a
// Proxy.
func (b *Bridge) URL() string { return "http://127.0.0.1:" + strconv.Itoa(b.port) }

// Done is closed when the sandbox half has ended (closed, or its exec
// stream ended).
func (b *Bridge) Done() <-chan struct{} { return b.done }

// Close stops the listener and every connection and waits for them.
func (b *Bridge) Close() error {
	_ = b.stdin.Close()
	b.stop()
	<-b.done
	b.wg.Wait()
	return nil
}

// carry takes one sandbox connection over an Exec and hands it to the
// server.
func (b *Bridge) carry(id string) {
	defer b.wg.Done()
	inR, inW := io.Pipe()
	q := newByteQueue()
	go func() {
		_, err := b.sb.Exec(b.ctx, conch.ExecRequest{
			Argv:        []string{b.o.Python, "-u", b.script(), "attach", b.ctl(), id},
			Dir:         b.o.Dir,
			Stdin:       inR,
			OutputLimit: 1,
			OnOutput:    q.push,
		})
		inR.CloseWithError(errors.Join(err, io.EOF))
		q.close()
	}()
	c := &streamConn{q: q, w: inW,
		local:  &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: b.port},
		remote: sandboxAddr("sandbox " + b.sb.ID() + " connection " + id)}
	_ = b.srv.ServeConn(b.ctx, c)
}

// sandboxAddr names the sandbox end of a carried connection.
type sandboxAddr string

func (a sandboxAddr) Network() string { return "sandbox" }
func (a sandboxAddr) String() string  { return string(a) }

// streamConn is a connection carried by an Exec: writes go to its stdin,
// reads come from its output. Its local address is the bridge's listener
// in the sandbox (127.0.0.1:port), which is what its client dialled.
type streamConn struct {
	q      *byteQueue
	w      *io.PipeWriter
	local  net.Addr
	remote net.Addr
}

var _ net.Conn = (*streamConn)(nil)

func (c *streamConn) Read(p []byte) (int, error)  { return c.q.read(p) }
func (c *streamConn) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c *streamConn) CloseWrite() error           { return c.w.Close() }
func (c *streamConn) Close() error {
	c.q.close()
	return c.w.Close()
}
func (c *streamConn) LocalAddr() net.Addr  { return c.local }
func (c *streamConn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets the read deadline; see SetWriteDeadline.
func (c *streamConn) SetDeadline(t time.Time) error {
	c.q.setDeadline(t)
	return c.SetWriteDeadline(t)
}

// SetReadDeadline makes a pending or later Read return
// os.ErrDeadlineExceeded once t has passed (net/http relies on it to end
// its background read).
func (c *streamConn) SetReadDeadline(t time.Time) error {
	c.q.setDeadline(t)
	return nil
}

// errNoWriteDeadline: a write goes to the exec's stdin pipe, which cannot
// be interrupted without ending the connection.
var errNoWriteDeadline = errors.New("egress bridge: write deadlines are not supported")

// SetWriteDeadline accepts only the zero time (no deadline): a Write blocks
// until the sandbox side takes the bytes or the stream ends.
func (c *streamConn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		return nil
	}
	return errNoWriteDeadline
}

// byteQueue buffers Exec output so that OnOutput never blocks the
// sandbox client's delivery of other streams.
type byteQueue struct {
	mu       sync.Mutex
	cond     *sync.Cond
	buf      []byte
	closed   bool
	deadline time.Time
	timer    *time.Timer
}

func newByteQueue() *byteQueue {
	q := &byteQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// maxQueued bounds what one connection may buffer on the host while its
// server is slower than the sandbox; beyond it the connection is ended
// rather than host memory spent (push must not block: it runs on the
// sandbox client's delivery of output).
const maxQueued = 16 << 20

func (q *byteQueue) push(b []byte) {
	q.mu.Lock()
	if !q.closed {
		if len(q.buf)+len(b) > maxQueued {
			q.closed, q.buf = true, nil
		} else {
			q.buf = append(q.buf, b...)
		}
	}
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *byteQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// wake wakes the readers under the lock, so that a reader between its
// deadline check and its Wait cannot miss it.
func (q *byteQueue) wake() {
	q.mu.Lock()
	q.cond.Broadcast()
	q.mu.Unlock()
}

func (q *byteQueue) setDeadline(t time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deadline = t
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	if !t.IsZero() {
		q.timer = time.AfterFunc(time.Until(t), q.wake)
	}
	q.cond.Broadcast()
}

func (q *byteQueue) read(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.buf) == 0 && !q.closed {
		if !q.deadline.IsZero() && !time.Now().Before(q.deadline) {
			return 0, os.ErrDeadlineExceeded
		}
		q.cond.Wait()
	}
	if len(q.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, q.buf)
	q.buf = q.buf[n:]
	if len(q.buf) == 0 {
		q.buf = nil
	}
	return n, nil
}

// lineSplitter splits a stream into lines.
type lineSplitter struct{ rest []byte }

func (s *lineSplitter) feed(chunk []byte, f func(string)) {
	s.rest = append(s.rest, chunk...)
	for {
		i := bytes.IndexByte(s.rest, '\n')
		if i < 0 {
			return
		}
		f(strings.TrimRight(string(s.rest[:i]), "\r"))
		s.rest = s.rest[i+1:]
	}
}

// Bridges keeps one Bridge per conversation to one ConnServer. URL starts
// a conversation's bridge on first use and again, on the same port, when
// the previous one ended (its exec stream ended, the sandbox restarted, or
// conch restarted: a bridge's sandbox half ends with the conch that started
// it) or the conversation's sandbox changed. Release closes a
// conversation's bridge.
type Bridges struct {
	srv ConnServer
	o   BridgeOptions

	mu    sync.Mutex
	m     map[conch.ConversationKey]bridgeEntry
	ports map[conch.ConversationKey]int // with Port 0: the port a conversation got
}

type bridgeEntry struct {
	b    *Bridge
	sbID string
}

var _ conch.Releaser = (*Bridges)(nil)

// NewBridges returns Bridges to srv.
func NewBridges(srv ConnServer, o BridgeOptions) *Bridges {
	return &Bridges{srv: srv, o: o, m: map[conch.ConversationKey]bridgeEntry{}, ports: map[conch.ConversationKey]int{}}
}

// URL returns the origin ("http://127.0.0.1:<port>") of the bridge into
// sb, the sandbox of the conversation key: the live one, or one started
// now on the same port. It is cheap when the bridge lives, so call it
// before each use of the route (a CLI's start, and its reattachment after
// a restart of conch).
func (bs *Bridges) URL(ctx context.Context, key conch.ConversationKey, sb conch.Sandbox) (string, error) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if e, ok := bs.m[key]; ok {
		select {
		case <-e.b.done:
		default:
			if e.sbID == sb.ID() {
				return e.b.URL(), nil
			}
		}
		e.b.Close()
		delete(bs.m, key)
	}
	o := bs.o
	if o.Port == 0 {
		o.Port = bs.ports[key]
	}
	b, err := StartBridge(ctx, sb, bs.srv, o)
	if err != nil {
		return "", err
	}
	bs.m[key] = bridgeEntry{b: b, sbID: sb.ID()}
	bs.ports[key] = b.Port()
	return b.URL(), nil
}

// Release implements conch.Releaser: it closes the conversation's bridge
// and forgets it.
func (bs *Bridges) Release(_ context.Context, key conch.ConversationKey) error {
	bs.mu.Lock()
	e, ok := bs.m[key]
	delete(bs.m, key)
	delete(bs.ports, key)
	bs.mu.Unlock()
	if ok {
		return e.b.Close()
	}
	return nil
}

// Close closes every bridge.
func (bs *Bridges) Close() error {
	bs.mu.Lock()
	m := bs.m
	bs.m = map[conch.ConversationKey]bridgeEntry{}
	bs.mu.Unlock()
	for _, e := range m {
		e.b.Close()
	}
	return nil
}
