package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"conch"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// stderrDir holds each stdio server's standard error in the sandbox
// (stdout carries JSON-RPC, and a sandbox Exec interleaves the two).
const stderrDir = "/tmp/conch-mcp"

// connectStdio starts the server in the conversation's sandbox; its
// JSON-RPC goes over the Exec's stdin and output. The program lives as
// long as lifetime (and ends when the session closes its stdin).
func (cn *conn) connectStdio(lifetime context.Context, client *mcpsdk.Client) (*mcpsdk.ClientSession, error) {
	ctx := lifetime
	sb, err := cn.sandboxes.Sandbox(ctx, cn.key)
	if err != nil {
		return nil, fmt.Errorf("the conversation's sandbox: %w", err)
	}
	env := cn.srv.Env
	if cn.srv.Egress != nil {
		extra, err := cn.srv.Egress(ctx, cn.key, sb)
		if err != nil {
			return nil, fmt.Errorf("the server's egress: %w", err)
		}
		env = append(append([]string(nil), env...), extra...)
	}
	logFile := stderrDir + "/" + cn.srv.Name + ".log"
	argv := append([]string{"sh", "-c", `mkdir -p ` + stderrDir + ` && exec "$@" 2>>` + logFile, "sh"}, cn.srv.Argv...)
	pr, pw := io.Pipe()
	context.AfterFunc(lifetime, func() { _ = pw.Close() })
	q := newQueue(cn.c.o.MaxMessageBytes * 2)
	go func() {
		res, err := sb.Exec(lifetime, conch.ExecRequest{Argv: argv, Env: env, Stdin: pr, OnOutput: q.push, OutputLimit: 1})
		switch {
		case err != nil && lifetime.Err() != nil:
			err = errors.New("the server was stopped")
		case err != nil:
		case res.Stopped != conch.StoppedNone:
			err = fmt.Errorf("the server was stopped (%s)", res.Stopped)
		default:
			err = fmt.Errorf("the server exited with status %d", res.ExitCode)
		}
		if lifetime.Err() == nil {
			if tail := stderrTail(sb, logFile); tail != "" {
				err = fmt.Errorf("%w; its last words: %s", err, tail)
			}
		}
		err = serverEnded{err}
		q.fail(err)
		pr.CloseWithError(err)
	}()
	t := &mcpsdk.IOTransport{Reader: q, Writer: pw, MaxLineLength: cn.c.o.MaxMessageBytes}
	sess, err := client.Connect(ctx, t, nil)
	if err != nil {
		_ = pw.Close()
		if qe := q.err(); qe != nil {
			err = fmt.Errorf("%w (%v)", err, qe)
		}
		return nil, fmt.Errorf("start %s in the sandbox: %w", strings.Join(cn.srv.Argv, " "), err)
	}
	return sess, nil
}

// serverEnded is how a sandboxed server's end reaches a call waiting on
// it: the call's error says the session is over (Client.run), without
// waiting for the session's watcher to notice.
type serverEnded struct{ err error }

func (e serverEnded) Error() string { return e.err.Error() }
func (e serverEnded) Unwrap() error { return e.err }

// stderrTail reads the end of a server's standard error.
func stderrTail(sb conch.Sandbox, file string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := sb.ReadFile(ctx, file, 64<<10)
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 && len(s)-i < 400 {
		// the last line, or the last 400 bytes
		s = s[i+1:]
	}
	if len(s) > 400 {
		s = "…" + s[len(s)-400:]
	}
	return s
}

// queue buffers a server's output so that OnOutput never blocks the
// sandbox client; it is the IOTransport's reader. Output beyond limit that
// nobody has read ends the connection (a server flooding conch).
type queue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte
	limit  int
	done   error
	closed bool
}

func newQueue(limit int) *queue {
	q := &queue{limit: limit}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *queue) push(b []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done != nil || q.closed {
		return
	}
	if len(q.buf)+len(b) > q.limit {
		q.done = fmt.Errorf("the server sent more than %d bytes at once", q.limit)
		q.buf = nil
	} else {
		q.buf = append(q.buf, b...)
	}
	q.cond.Broadcast()
}

func (q *queue) fail(err error) {
	q.mu.Lock()
	if q.done == nil {
		q.done = err
	}
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *queue) err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.done
}

func (q *queue) Read(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.buf) == 0 && q.done == nil && !q.closed {
		q.cond.Wait()
	}
	if len(q.buf) > 0 {
		n := copy(p, q.buf)
		q.buf = q.buf[n:]
		return n, nil
	}
	if q.closed {
		return 0, io.EOF
	}
	return 0, q.done
}

func (q *queue) Close() error {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
	return nil
}
