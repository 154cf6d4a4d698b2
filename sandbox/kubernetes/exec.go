//go:build kubernetes

package kubernetes

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// dialAgent starts `conch sandbox-agent` in the pod's sandbox container over
// one exec (WebSocket, falling back to SPDY on older servers) and returns
// its stdin and stdout as one stream; stderr lines are logged. The exec
// lives until Close, not until ctx ends (ctx bounds only the dial).
func (r *Runtime) dialAgent(ctx context.Context, pod string) (io.ReadWriteCloser, error) {
	ex, err := r.executor(pod, SandboxContainer, []string{AgentDir + "/" + agentName, "sandbox-agent"}, true)
	if err != nil {
		return nil, fmt.Errorf("dial sandbox agent in %s: %w", pod, err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &execConn{in: inW, out: outR, cancel: cancel, done: make(chan struct{})}
	logw := &lineLogger{log: r.opts.Logger, attrs: []any{"pod", pod}}
	go func() {
		defer close(c.done)
		err := ex.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: logw})
		if err == nil {
			err = io.EOF
		} else {
			err = fmt.Errorf("sandbox agent stream in %s: %w", pod, err)
		}
		_ = outW.CloseWithError(err)
		_ = inR.CloseWithError(err)
	}()
	// A refused exec (pod gone, RBAC) ends the goroutine at once; the
	// client's first request (its ping) then fails with that error.
	return c, nil
}

// executor runs cmd in a container of pod over one exec through the API
// server: WebSocket, falling back to SPDY on older servers.
func (r *Runtime) executor(pod, container string, cmd []string, stdin bool) (remotecommand.Executor, error) {
	req := r.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(r.ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container, Command: cmd, Stdin: stdin, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(r.rest, http.MethodGet, req.URL().String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(r.rest, http.MethodPost, req.URL())
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// execConn is one exec as an io.ReadWriteCloser: Write feeds the agent's
// stdin, Read returns its stdout, Close ends the exec.
type execConn struct {
	in     *io.PipeWriter
	out    *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func (c *execConn) Read(p []byte) (int, error)  { return c.out.Read(p) }
func (c *execConn) Write(p []byte) (int, error) { return c.in.Write(p) }

// CloseWrite closes the agent's stdin; reading goes on.
func (c *execConn) CloseWrite() error { return c.in.Close() }

func (c *execConn) Close() error {
	c.once.Do(func() {
		_ = c.in.Close()
		c.cancel()
		_ = c.out.Close()
	})
	return nil
}

// lineLogger logs each line the agent writes to stderr.
type lineLogger struct {
	log   *slog.Logger
	attrs []any
	mu    sync.Mutex
	buf   []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := indexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.log.Info("sandbox agent", append([]any{"line", string(l.buf[:i])}, l.attrs...)...)
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 4096 {
		l.log.Info("sandbox agent", append([]any{"line", string(l.buf)}, l.attrs...)...)
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
