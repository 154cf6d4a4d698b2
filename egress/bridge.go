package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
const bridgeScript = `import os, socket, sys, threading
mode, ctl = sys.argv[1], sys.argv[2]
if mode == "listen":
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(sys.argv[3])))
    srv.listen(64)
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

// BridgeOptions configures a Bridge.
type BridgeOptions struct {
	// Port is the port on the sandbox's loopback; 0 picks a free one.
	Port int
	// Dir holds the helper script and its control socket in the sandbox;
	// "" means /tmp/conch.
	Dir string
	// Python is the interpreter in the sandbox; "" means python3.
	Python string
}

// Bridge carries connections made to a port on the sandbox's loopback to a
// Proxy on the host, over the sandbox's Exec streams: the sandbox needs no
// network. A CLI in the sandbox uses it as HTTPS_PROXY.
type Bridge struct {
	sb    conch.Sandbox
	p     *Proxy
	o     BridgeOptions
	port  int
	stdin *io.PipeWriter
	stop  context.CancelFunc
	ctx   context.Context
	wg    sync.WaitGroup
	done  chan struct{}
}

// StartBridge starts the sandbox half and returns once it listens.
func StartBridge(ctx context.Context, sb conch.Sandbox, p *Proxy, o BridgeOptions) (*Bridge, error) {
	if o.Dir == "" {
		o.Dir = "/tmp/conch"
	}
	if o.Python == "" {
		o.Python = "python3"
	}
	if res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"mkdir", "-p", o.Dir}, Timeout: 30 * time.Second}); err != nil || res.ExitCode != 0 {
		return nil, fmt.Errorf("egress bridge: mkdir %s: %v %s", o.Dir, err, res.Output)
	}
	if err := sb.WriteFile(ctx, path.Join(o.Dir, "egress-bridge.py"), []byte(bridgeScript), 0o644); err != nil {
		return nil, fmt.Errorf("egress bridge: %w", err)
	}
	lifetime, stop := context.WithCancel(context.WithoutCancel(ctx))
	pr, pw := io.Pipe()
	b := &Bridge{sb: sb, p: p, o: o, stdin: pw, stop: stop, ctx: lifetime, done: make(chan struct{})}
	ready := make(chan int, 1)
	var lines lineSplitter
	var execErr error
	go func() {
		defer close(b.done)
		res, err := sb.Exec(lifetime, conch.ExecRequest{
			Argv:        []string{o.Python, "-u", b.script(), "listen", b.ctl(), strconv.Itoa(o.Port)},
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
		return nil, fmt.Errorf("egress bridge: listener: %w", execErr)
	case <-ctx.Done():
		b.Close()
		return nil, ctx.Err()
	}
}

func (b *Bridge) script() string { return path.Join(b.o.Dir, "egress-bridge.py") }
func (b *Bridge) ctl() string    { return path.Join(b.o.Dir, "egress-bridge.sock") }

// Port is the port the bridge listens on in the sandbox.
func (b *Bridge) Port() int { return b.port }

// ProxyURL is the value for HTTPS_PROXY in the sandbox.
func (b *Bridge) ProxyURL() string { return "http://127.0.0.1:" + strconv.Itoa(b.port) }

// Close stops the listener and every tunnel and waits for them.
func (b *Bridge) Close() error {
	_ = b.stdin.Close()
	b.stop()
	<-b.done
	b.wg.Wait()
	return nil
}

// carry takes one sandbox connection over an Exec and hands it to the
// proxy.
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
	_ = b.p.ServeConn(b.ctx, &streamConn{q: q, w: inW})
}

// streamConn is a connection carried by an Exec: writes go to its stdin,
// reads come from its output.
type streamConn struct {
	q *byteQueue
	w *io.PipeWriter
}

func (c *streamConn) Read(p []byte) (int, error)  { return c.q.read(p) }
func (c *streamConn) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c *streamConn) CloseWrite() error           { return c.w.Close() }
func (c *streamConn) Close() error {
	c.q.close()
	return c.w.Close()
}

// byteQueue buffers Exec output so that OnOutput never blocks the
// sandbox client's delivery of other streams.
type byteQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte
	closed bool
}

func newByteQueue() *byteQueue {
	q := &byteQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// maxQueued bounds what one tunnel may buffer on the host while upstream is
// slower than the sandbox; beyond it the tunnel is ended rather than host
// memory spent (push must not block: it runs on the sandbox client's
// delivery of output).
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

func (q *byteQueue) read(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.buf) == 0 && !q.closed {
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

// Bridges keeps one Bridge per conversation, started on first use and
// again when the previous one ended (the sandbox restarted) or the
// conversation's sandbox changed. Release closes a conversation's bridge.
type Bridges struct {
	p *Proxy
	o BridgeOptions

	mu sync.Mutex
	m  map[conch.ConversationKey]bridgeEntry
}

type bridgeEntry struct {
	b    *Bridge
	sbID string
}

var _ conch.Releaser = (*Bridges)(nil)

// NewBridges returns Bridges to p.
func NewBridges(p *Proxy, o BridgeOptions) *Bridges {
	return &Bridges{p: p, o: o, m: map[conch.ConversationKey]bridgeEntry{}}
}

// ProxyURL returns the HTTPS_PROXY value for sb, the sandbox of the
// conversation key, starting its bridge if needed. It fits
// coder.Options.Egress.
func (bs *Bridges) ProxyURL(ctx context.Context, key conch.ConversationKey, sb conch.Sandbox) (string, error) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if e, ok := bs.m[key]; ok {
		select {
		case <-e.b.done:
		default:
			if e.sbID == sb.ID() {
				return e.b.ProxyURL(), nil
			}
		}
		e.b.Close()
		delete(bs.m, key)
	}
	b, err := StartBridge(ctx, sb, bs.p, bs.o)
	if err != nil {
		return "", err
	}
	bs.m[key] = bridgeEntry{b: b, sbID: sb.ID()}
	return b.ProxyURL(), nil
}

// Release implements conch.Releaser: it closes the conversation's bridge
// and forgets it.
func (bs *Bridges) Release(_ context.Context, key conch.ConversationKey) error {
	bs.mu.Lock()
	e, ok := bs.m[key]
	delete(bs.m, key)
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
