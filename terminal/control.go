package terminal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"conch"
)

// errControlClosed reports a command sent to a control client that has ended.
var errControlClosed = errors.New("tmux control client ended")

// Failures tmux reports, told apart where tmux's message arrives (a %error
// block or a failed start) so that callers use errors.Is.
var (
	// errDuplicateSession: new-session found a session of that name.
	errDuplicateSession = errors.New("tmux: duplicate session")
	// errNoSession: the session, pane or server does not exist.
	errNoSession = errors.New("tmux: no such session")
)

// tmuxError is a failure tmux reported: its message, and what kind of
// failure it is when conch branches on it.
type tmuxError struct {
	msg  string
	kind error // errDuplicateSession, errNoSession or nil
}

func (e *tmuxError) Error() string { return "tmux: " + e.msg }
func (e *tmuxError) Unwrap() error { return e.kind }

// newTmuxError classifies tmux's message. tmux has no error codes: its
// message is the only account of what failed, read here once.
func newTmuxError(msg string) *tmuxError {
	e := &tmuxError{msg: msg}
	switch {
	case strings.Contains(msg, "duplicate session"):
		e.kind = errDuplicateSession
	case strings.Contains(msg, "can't find"), strings.Contains(msg, "no server"):
		e.kind = errNoSession
	}
	return e
}

// controlEvents receives what a control client observes. The methods are
// called from the client's reader goroutine, in order, and must not block on
// the client itself.
type controlEvents interface {
	// output is pane output (%output), the escapes decoded.
	output(pane string, data []byte)
	// renamed is a window rename (%window-renamed); with automatic-rename
	// on, tmux renames a window when its foreground program changes or its
	// pane dies ("bash[dead]").
	renamed(window, name string)
	// subscription is a new value of a format the client subscribed to
	// (refresh-client -B; %subscription-changed).
	subscription(name, value string)
	// ended is called once when the client's stream ends.
	ended(err error)
}

// control is one tmux control-mode client (`tmux -C`) running as a long-lived
// Exec in the sandbox: commands are written to its standard input, replies
// come back as %begin/%end blocks and pane output as %output notifications.
type control struct {
	stdin *io.PipeWriter
	ev    controlEvents

	mu        sync.Mutex // guards pending and closed, and orders writes
	pending   []chan reply
	closed    bool
	firstSeen bool // the reply to the command line has come

	done chan struct{} // closed when the Exec has returned
	err  error         // why, set before done is closed
	stop context.CancelFunc
}

type reply struct {
	lines []string
	err   error
}

// startControl starts `tmux <args>` (args include -C) over sb. The first
// %begin/%end block (the reply to the command on the command line) is
// awaited, so on return the session exists and the client is attached.
func startControl(ctx context.Context, sb conch.Sandbox, env []string, dir string, args []string, ev controlEvents) (*control, error) {
	pr, pw := io.Pipe()
	lifetime, stop := context.WithCancel(context.WithoutCancel(ctx))
	c := &control{stdin: pw, ev: ev, done: make(chan struct{}), stop: stop}
	first := make(chan reply, 1)
	c.pending = append(c.pending, first)
	var lb lineBuffer
	p := &parser{c: c}
	go func() {
		res, err := sb.Exec(lifetime, conch.ExecRequest{
			Argv:        args,
			Env:         env,
			Dir:         dir,
			Stdin:       pr,
			OutputLimit: 4 << 10,
			OnOutput: func(chunk []byte) {
				lb.feed(chunk, p.line)
			},
		})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("tmux exited %d: %w", res.ExitCode, newTmuxError(strings.TrimSpace(string(tail(res.Output, 512)))))
		}
		if err == nil {
			err = errControlClosed
		}
		pr.CloseWithError(err)
		c.mu.Lock()
		c.closed = true
		pend := c.pending
		c.pending = nil
		c.mu.Unlock()
		for _, ch := range pend {
			ch <- reply{err: fmt.Errorf("%w: %w", errControlClosed, err)}
		}
		c.err = err
		close(c.done)
		ev.ended(err)
	}()
	select {
	case r := <-first:
		if r.err != nil {
			c.close()
			return nil, fmt.Errorf("tmux control: %w", r.err)
		}
		return c, nil
	case <-ctx.Done():
		c.close()
		return nil, ctx.Err()
	}
}

// command runs tmux commands, one per line, written together so that tmux
// runs them back to back, and returns their output lines concatenated. The
// first failure is returned after every reply has come. (A "a ; b" list
// would not do: tmux skips the rest of a list after a failure, and the
// replies that never come could not be told apart.)
func (c *control) command(ctx context.Context, cmds ...string) ([]string, error) {
	for _, l := range cmds {
		if strings.ContainsAny(l, "\n\r") {
			return nil, fmt.Errorf("tmux command: line break in %q", l)
		}
	}
	chs := make([]chan reply, len(cmds))
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errControlClosed
	}
	for i := range chs {
		chs[i] = make(chan reply, 1)
	}
	c.pending = append(c.pending, chs...)
	// Writing under the lock keeps the order of pending and of the
	// commands tmux sees the same. The pipe hands the bytes to the Exec's
	// stdin pump; it does not wait for tmux.
	_, err := io.WriteString(c.stdin, strings.Join(cmds, "\n")+"\n")
	c.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("tmux command: %w", err)
	}
	var out []string
	var first error
	for _, ch := range chs {
		var r reply
		select {
		case r = <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.done:
			// The reader delivered every pending reply before closing
			// done; ours may be among them.
			select {
			case r = <-ch:
			default:
				return nil, errControlClosed
			}
		}
		out = append(out, r.lines...)
		if r.err != nil && first == nil {
			first = r.err
		}
	}
	return out, first
}

// close detaches the client (the tmux session keeps running) and waits for
// the Exec to end.
func (c *control) close() {
	c.mu.Lock()
	if !c.closed {
		_, _ = io.WriteString(c.stdin, "detach-client\n")
	}
	c.mu.Unlock()
	_ = c.stdin.Close()
	c.stop()
	<-c.done
}

// parser turns control-mode lines into replies and events.
type parser struct {
	c     *control
	block []string
	in    bool
	ours  bool
}

func (p *parser) line(l []byte) {
	if p.in {
		if isBlockEnd(l, "%end") || isBlockEnd(l, "%error") {
			p.in = false
			p.endBlock(bytes.HasPrefix(l, []byte("%error")))
			return
		}
		p.block = append(p.block, string(l))
		return
	}
	switch {
	case bytes.HasPrefix(l, []byte("%begin ")):
		p.in = true
		p.block = p.block[:0]
		f := bytes.Fields(l)
		p.ours = len(f) >= 4 && string(f[3]) == "1"
	case bytes.HasPrefix(l, []byte("%output ")):
		rest := l[len("%output "):]
		pane, data, _ := bytes.Cut(rest, []byte(" "))
		p.c.ev.output(string(pane), decodeOctal(data))
	case bytes.HasPrefix(l, []byte("%extended-output ")):
		// %extended-output %pane age ... : data
		rest := l[len("%extended-output "):]
		pane, after, _ := bytes.Cut(rest, []byte(" "))
		if _, data, ok := bytes.Cut(after, []byte(" : ")); ok {
			p.c.ev.output(string(pane), decodeOctal(data))
		}
	case bytes.HasPrefix(l, []byte("%subscription-changed ")):
		// %subscription-changed name $session @window index %pane : value
		head, value, ok := bytes.Cut(l, []byte(" : "))
		if f := bytes.Fields(head); ok && len(f) >= 2 {
			p.c.ev.subscription(string(f[1]), string(value))
		}
	case bytes.HasPrefix(l, []byte("%window-renamed ")):
		f := strings.SplitN(string(l), " ", 3)
		if len(f) == 3 {
			p.c.ev.renamed(f[1], f[2])
		}
	}
}

// endBlock hands a finished %begin block to the command waiting for it.
// Blocks with flags 0 answer commands this client did not send: only the
// first one (the reply to the command on tmux's command line) is awaited.
func (p *parser) endBlock(failed bool) {
	c := p.c
	c.mu.Lock()
	if !p.ours && c.firstSeen {
		c.mu.Unlock()
		return
	}
	c.firstSeen = true
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	ch := c.pending[0]
	c.pending = c.pending[1:]
	c.mu.Unlock()
	ch <- p.result(failed)
}

func (p *parser) result(failed bool) reply {
	lines := append([]string(nil), p.block...)
	if failed {
		return reply{lines: lines, err: newTmuxError(strings.Join(lines, "; "))}
	}
	return reply{lines: lines}
}

func isBlockEnd(l []byte, word string) bool {
	return bytes.HasPrefix(l, []byte(word+" "))
}

// lineBuffer splits a byte stream into lines without their "\n".
type lineBuffer struct{ buf []byte }

func (b *lineBuffer) feed(chunk []byte, f func([]byte)) {
	b.buf = append(b.buf, chunk...)
	for {
		i := bytes.IndexByte(b.buf, '\n')
		if i < 0 {
			break
		}
		line := b.buf[:i]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		f(line)
		b.buf = b.buf[i+1:]
	}
	if len(b.buf) == 0 {
		b.buf = nil
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
