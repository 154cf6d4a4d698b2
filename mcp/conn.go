package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"conch"
	"conch/netpolicy"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"
)

// conn is one server's connection: a remote server's for all
// conversations, or a stdio server's in one conversation's sandbox.
type conn struct {
	c         *Client
	srv       *Server
	key       conch.ConversationKey
	sandboxes conch.SandboxProvider

	// start serialises starts; mu guards the fields below.
	start sync.Mutex
	mu    sync.Mutex
	sess  *mcpsdk.ClientSession
	stop  context.CancelFunc
	// gone is closed when sess stops being the live session.
	gone     chan struct{}
	lastErr  error
	failures int
	retryAt  time.Time
	restarts int
	started  bool
	closed   bool
	// inflight counts the calls using sess; idle is the timer that ends
	// an unused stdio server (Options.IdleStop), re-armed by each call.
	inflight int
	idle     *time.Timer
}

// DownError says a server is not running and when it is tried again.
type DownError struct {
	Server string
	Err    error
	Retry  time.Time
}

func (e *DownError) Error() string {
	return fmt.Sprintf("MCP server %s is down (%v); it is started again after %s", e.Server, e.Err, e.Retry.Format(time.TimeOnly))
}

func (e *DownError) Unwrap() error { return e.Err }

// session returns the live session, starting the server when it has none
// and its backoff has passed.
func (cn *conn) session(ctx context.Context) (*mcpsdk.ClientSession, error) {
	if s := cn.live(); s != nil {
		return s, nil
	}
	cn.start.Lock()
	defer cn.start.Unlock()
	if s := cn.live(); s != nil {
		return s, nil
	}
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		return nil, errors.New("the conversation's MCP servers were ended")
	}
	if cn.lastErr != nil && cn.c.o.Now().Before(cn.retryAt) {
		err := &DownError{Server: cn.srv.Name, Err: cn.lastErr, Retry: cn.retryAt}
		cn.mu.Unlock()
		return nil, err
	}
	restart := cn.started
	cn.started = true
	cn.mu.Unlock()

	sess, stop, cat, err := cn.connect(ctx)
	if cn.c.o.OnStart != nil {
		cn.c.o.OnStart(cn.srv.Name, restart, err)
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if err != nil {
		cn.fail(err)
		cn.c.o.Logger.Warn("mcp server did not start", "server", cn.srv.Name, "conversation", cn.key, "err", err, "retry_in", cn.retryAt.Sub(cn.c.o.Now()).Round(time.Millisecond))
		return nil, err
	}
	if cn.closed {
		stop()
		_ = sess.Close()
		return nil, errors.New("the conversation's MCP servers were ended")
	}
	if restart {
		cn.restarts++
	}
	cn.sess, cn.stop, cn.lastErr, cn.failures = sess, stop, nil, 0
	cn.gone = make(chan struct{})
	cn.c.setCatalog(cn.srv.Name, cat)
	cn.c.o.Logger.Info("mcp server started", "server", cn.srv.Name, "conversation", cn.key, "tools", len(cat.tools), "restart", restart)
	go cn.watch(sess)
	cn.armIdle()
	return sess, nil
}

// use marks a call on the session (it cannot be stopped as idle while the
// call runs); done ends it and re-arms the idle timer.
func (cn *conn) use() (done func()) {
	cn.mu.Lock()
	cn.inflight++
	if cn.idle != nil {
		cn.idle.Stop()
	}
	cn.mu.Unlock()
	return func() {
		cn.mu.Lock()
		defer cn.mu.Unlock()
		cn.inflight--
		cn.armIdle()
	}
}

// armIdle starts the idle timer of a stdio server without calls; under mu.
func (cn *conn) armIdle() {
	d := cn.c.o.IdleStop
	if d <= 0 || !cn.srv.Stdio() || cn.inflight > 0 || cn.sess == nil {
		return
	}
	if cn.idle != nil {
		cn.idle.Stop()
	}
	sess := cn.sess
	cn.idle = time.AfterFunc(d, func() { cn.idleStop(sess) })
}

// idleStop ends sess if it is still the live one and unused. It is not a
// failure: the next call starts the server again at once, not after a
// backoff, and that start is not counted as a restart.
func (cn *conn) idleStop(sess *mcpsdk.ClientSession) {
	cn.mu.Lock()
	if cn.sess != sess || cn.inflight > 0 || cn.closed {
		cn.mu.Unlock()
		return
	}
	stop := cn.stop
	cn.endLocked()
	cn.started = false
	cn.mu.Unlock()
	cn.c.o.Logger.Info("mcp server stopped while idle", "server", cn.srv.Name, "conversation", cn.key, "after", cn.c.o.IdleStop)
	_ = sess.Close()
	if stop != nil {
		stop()
	}
}

// endLocked ends the live session's time as such: no session, and its
// gone closed; under mu.
func (cn *conn) endLocked() {
	cn.sess, cn.stop = nil, nil
	if cn.gone != nil {
		close(cn.gone)
		cn.gone = nil
	}
}

// goneOf is closed once sess is no longer the live session.
func (cn *conn) goneOf(sess *mcpsdk.ClientSession) <-chan struct{} {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.sess != sess || cn.gone == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	return cn.gone
}

func (cn *conn) live() *mcpsdk.ClientSession {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.sess
}

// fail records a failure and the time of the next start; under mu.
func (cn *conn) fail(err error) {
	cn.failures++
	cn.lastErr = err
	cn.retryAt = cn.c.o.Now().Add(cn.c.o.Backoff.Delay(cn.failures))
}

// watch notices the session's end: a server that exited or broke the
// protocol is marked down, to be started again after the backoff.
func (cn *conn) watch(sess *mcpsdk.ClientSession) {
	err := sess.Wait()
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.sess != sess {
		return
	}
	if cn.stop != nil {
		cn.stop()
	}
	cn.endLocked()
	if cn.closed {
		return
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = errors.New("the server ended")
	}
	cn.fail(fmt.Errorf("connection lost: %w", err))
	cn.c.o.Logger.Warn("mcp server died", "server", cn.srv.Name, "conversation", cn.key, "err", err)
}

// broken marks sess down after a request failed in a way that leaves it
// unusable (the server exited, or its output was not JSON-RPC).
func (cn *conn) broken(sess *mcpsdk.ClientSession, err error) {
	cn.mu.Lock()
	if cn.sess != sess {
		cn.mu.Unlock()
		return
	}
	if cn.stop != nil {
		cn.stop()
	}
	cn.fail(err)
	cn.endLocked()
	cn.mu.Unlock()
	_ = sess.Close()
}

func (cn *conn) close() {
	cn.mu.Lock()
	cn.closed = true
	if cn.idle != nil {
		cn.idle.Stop()
	}
	sess, stop := cn.sess, cn.stop
	cn.endLocked()
	cn.mu.Unlock()
	if sess != nil {
		_ = sess.Close()
	}
	if stop != nil {
		stop()
	}
}

// connect starts the server and reads what it offers. The session lives
// on a context of its own (an SSE stream or a sandbox program outlives the
// call that started it), which the returned stop ends; the start itself is
// bounded by the server's timeout.
func (cn *conn) connect(ctx context.Context) (*mcpsdk.ClientSession, context.CancelFunc, *catalog, error) {
	lifetime, stop := context.WithCancel(context.WithoutCancel(ctx))
	timed, cancel := context.WithTimeout(ctx, cn.srv.timeout())
	defer cancel()
	var started atomic.Bool
	unwatch := context.AfterFunc(timed, func() {
		if !started.Load() {
			stop()
		}
	})
	defer unwatch()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "conch", Version: "1"}, &mcpsdk.ClientOptions{
		ToolListChangedHandler: func(ctx context.Context, _ *mcpsdk.ToolListChangedRequest) { cn.refresh() },
	})
	var sess *mcpsdk.ClientSession
	var err error
	if cn.srv.Stdio() {
		sess, err = cn.connectStdio(lifetime, client)
	} else {
		sess, err = cn.connectRemote(lifetime, client)
	}
	if err != nil {
		stop()
		if timed.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("not started within %s: %w", cn.srv.timeout(), err)
		}
		return nil, nil, nil, err
	}
	cat, err := listCatalog(timed, sess, cn.srv, cn.c.o.Logger)
	started.Store(true)
	if err != nil {
		_ = sess.Close()
		stop()
		return nil, nil, nil, err
	}
	return sess, stop, cat, nil
}

// refresh reads the tool list again after the server said it changed.
func (cn *conn) refresh() {
	sess := cn.live()
	if sess == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), cn.srv.timeout())
		defer cancel()
		cat, err := listCatalog(ctx, sess, cn.srv, cn.c.o.Logger)
		if err != nil {
			cn.c.o.Logger.Warn("mcp tool list not refreshed", "server", cn.srv.Name, "err", err)
			return
		}
		cn.c.setCatalog(cn.srv.Name, cat)
	}()
}

// listCatalog reads the server's tools (filtered, schemas cleaned),
// prompts and resources.
func listCatalog(ctx context.Context, sess *mcpsdk.ClientSession, srv *Server, log interface {
	Warn(string, ...any)
}) (*catalog, error) {
	cat := &catalog{skipped: map[string]string{}}
	caps := sess.InitializeResult().Capabilities
	if caps == nil || caps.Tools != nil {
		seen := map[string]bool{}
		for t, err := range sess.Tools(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("list tools: %w", err)
			}
			if t == nil || !srv.wants(t.Name) {
				continue
			}
			name := ToolName(srv.Name, t.Name)
			if seen[name] {
				cat.skipped[t.Name] = "listed twice"
				continue
			}
			seen[name] = true
			cat.tools = append(cat.tools, t)
		}
	}
	if caps != nil && caps.Prompts != nil {
		for p, err := range sess.Prompts(ctx, nil) {
			if err != nil {
				log.Warn("mcp prompts not listed", "server", srv.Name, "err", err)
				break
			}
			cat.prompts = append(cat.prompts, p)
		}
	}
	if caps != nil && caps.Resources != nil {
		for r, err := range sess.Resources(ctx, nil) {
			if err != nil {
				log.Warn("mcp resources not listed", "server", srv.Name, "err", err)
				break
			}
			cat.resources = append(cat.resources, r)
			if len(cat.resources) >= maxListedResources {
				break
			}
		}
	}
	return cat, nil
}

// maxListedResources bounds the resources named in the resource tool's
// description.
const maxListedResources = 50

// connectRemote connects over streamable HTTP, or SSE: "auto" tries
// streamable HTTP first and falls back to SSE for older servers.
func (cn *conn) connectRemote(ctx context.Context, client *mcpsdk.Client) (*mcpsdk.ClientSession, error) {
	hc := cn.c.http[cn.srv.Name]
	streamable := &mcpsdk.StreamableClientTransport{Endpoint: cn.srv.URL, HTTPClient: hc, MaxRetries: -1, MaxEventSize: cn.c.o.MaxMessageBytes}
	sse := &mcpsdk.SSEClientTransport{Endpoint: cn.srv.URL, HTTPClient: hc, MaxEventSize: cn.c.o.MaxMessageBytes}
	switch cn.srv.Transport {
	case "streamable":
		return client.Connect(ctx, streamable, nil)
	case "sse":
		return client.Connect(ctx, sse, nil)
	}
	sess, err := client.Connect(ctx, streamable, nil)
	if err == nil {
		return sess, nil
	}
	var refused *netpolicy.RefusedError
	if errors.As(err, &refused) || ctx.Err() != nil {
		return nil, err
	}
	sess, err2 := client.Connect(ctx, sse, nil)
	if err2 == nil {
		cn.c.o.Logger.Info("mcp server speaks the older SSE transport", "server", cn.srv.Name)
		return sess, nil
	}
	return nil, fmt.Errorf("streamable HTTP: %w; SSE: %v", err, err2)
}

// httpClient is a remote server's HTTP client: dialled through the
// address policy, its token added for its own host only, no proxy from
// the environment.
func (c *Client) httpClient(s *Server, ts oauth2.TokenSource) *http.Client {
	d := &netpolicy.Dialer{Policy: s.Policy, DialAddr: c.o.DialAddr}
	tr := &http.Transport{
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: s.timeout() + 10*time.Second, // the call's own timeout ends it first
	}
	host := ""
	if i := strings.Index(s.URL, "://"); i >= 0 {
		host = strings.SplitN(s.URL[i+3:], "/", 2)[0]
	}
	tt := &tokenTransport{base: tr, token: s.Token, ts: ts, host: host}
	if ts != nil {
		c.oauthTokens[s.Name] = tt
	}
	return &http.Client{Transport: tt}
}

// tokenTransport adds the bearer token (a fixed one, or the OAuth sign-in's)
// to requests to the server's host.
type tokenTransport struct {
	base  http.RoundTripper
	token string
	ts    oauth2.TokenSource
	host  string
	// last is the OAuth access token last sent, scrubbed from results.
	last atomic.Pointer[string]
}

func (t *tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.EqualFold(r.URL.Host, t.host) {
		return t.base.RoundTrip(r)
	}
	token := t.token
	if t.ts != nil {
		tok, err := t.ts.Token()
		if err != nil {
			if r.Body != nil {
				r.Body.Close()
			}
			return nil, err
		}
		token = tok.AccessToken
		t.last.Store(&token)
	}
	if token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return t.base.RoundTrip(r)
}
