package egress

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/idna"

	"conch"
	"conch/coders"
	"conch/netpolicy"
)

// PlaceholderKey is the API key a coding-agent CLI in the sandbox is given
// in place of the real one. It is NOT a secret: it only satisfies the
// CLI's check that a key is set. The Injector removes it from every request
// and adds the real key on the host.
const PlaceholderKey = "conch-placeholder-key-not-a-secret"

// Vendor is the API an Injector forwards to; it decides the credential
// header and the default upstream. The vendors are those of the coding
// CLIs' table (coders).
type Vendor = coders.Vendor

// The vendors an Injector knows (coders' constants).
const (
	Anthropic = coders.Anthropic
	OpenAI    = coders.OpenAI
	Gemini    = coders.Gemini
)

// credentialHeaders are removed from every request before the real key is
// added: whatever credential the client sent (the placeholder, or anything
// else) never reaches the upstream.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "X-Api-Key", "X-Goog-Api-Key", "Api-Key", "Cookie"}

// InjectorOptions configures an Injector.
type InjectorOptions struct {
	// Vendor decides the credential header; "" with Header set is any
	// other API (an MCP server's), which needs a BaseURL.
	Vendor Vendor
	// Header and Prefix, with no Vendor, put the key on requests as
	// "<Header>: <Prefix><Key>" (Authorization, "Bearer ").
	Header, Prefix string
	// Key is the real API key. It is put on forwarded requests only: never
	// logged, never sent back to the client.
	Key string
	// BaseURL is the operator's upstream (coder.base_url), with whatever
	// scheme it has; its host:port is dialled even when it is loopback or
	// private (the operator's choice). "" means the vendor's default, which
	// may reach public addresses only (checked on the address dialled, so
	// DNS rebinding is covered too).
	BaseURL string
	// Resolver resolves the upstream's name; nil means the system's. Tests
	// point a vendor's host at a test address with it.
	Resolver netpolicy.Resolver
	// DialTimeout bounds connecting upstream; 0 means 10 s.
	DialTimeout time.Duration
	// OnRequest, if set, is told about every request: forwarded or refused.
	OnRequest func(Event)
	Logger    *slog.Logger
}

// Injector is a reverse proxy for one API that adds the real credential:
// the CLI in the sandbox sends plain HTTP with PlaceholderKey to its
// bridge; the Injector, on the host, removes every credential it sent, adds
// the real one for its vendor and forwards the request to the upstream.
// Responses stream through unbuffered (server-sent events); request bodies
// stream too.
//
// It serves only requests for its own address (the bridge's
// 127.0.0.1:port, or localhost:port) under its upstream's base path: in
// origin form, in absolute form, or inside a CONNECT tunnel to that same
// address (clients that send everything through HTTPS_PROXY). CONNECT to
// anything else, requests for any other host, protocol upgrades (WebSocket)
// and paths with dot segments are refused with 403 and a short plain-text
// reason, and reported (OnRequest and a log line).
type Injector struct {
	o        InjectorOptions
	name     string // the API, in messages: its vendor or base URL
	up       *url.URL
	basePath string // the upstream's path without a trailing slash: "" or "/v1"
	private  bool   // the operator's upstream (reached whatever its address)
	rp       *httputil.ReverseProxy
	tr       *http.Transport
}

var _ ConnServer = (*Injector)(nil)

// NewInjector checks o and returns an Injector.
func NewInjector(o InjectorOptions) (*Injector, error) {
	def := o.Vendor.DefaultBaseURL()
	switch {
	case o.Vendor == "" && o.Header != "":
		if o.BaseURL == "" {
			return nil, conch.Errorf(conch.KindInvalid, "egress injector: a %s header needs the API's base URL", o.Header)
		}
	case def == "":
		return nil, conch.Errorf(conch.KindInvalid, "egress injector: unknown vendor %q (want anthropic, openai or gemini)", o.Vendor)
	}
	if o.Key == "" {
		return nil, conch.Errorf(conch.KindInvalid, "egress injector: no API key for %s", cmp.Or(string(o.Vendor), o.BaseURL))
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	in := &Injector{o: o, name: string(o.Vendor)}
	if o.Vendor == "" {
		in.name = o.BaseURL
	}
	base := def
	if o.BaseURL != "" {
		base, in.private = o.BaseURL, true
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, conch.Errorf(conch.KindInvalid, "egress injector: base URL %q: %v", base, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, conch.Errorf(conch.KindInvalid, "egress injector: base URL %q: the scheme must be http or https", base)
	case u.Host == "" || u.Hostname() == "":
		return nil, conch.Errorf(conch.KindInvalid, "egress injector: base URL %q has no host", base)
	case u.User != nil:
		return nil, conch.Errorf(conch.KindInvalid, "egress injector: base URL %q: put the key in coder.api_key, not in the URL", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		return nil, conch.Errorf(conch.KindInvalid, "egress injector: base URL %q: no query or fragment", base)
	}
	in.up = &url.URL{Scheme: u.Scheme, Host: u.Host}
	in.basePath = strings.TrimRight(u.EscapedPath(), "/")

	d := &netpolicy.Dialer{Resolver: o.Resolver, Timeout: o.DialTimeout}
	if in.private {
		// Exactly the operator's host:port, in the form http.Transport
		// dials it (IDNA host, the scheme's port when none is given).
		host := u.Hostname()
		if ascii, err := idna.Lookup.ToASCII(host); err == nil {
			host = ascii
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		d.Exempt = net.JoinHostPort(host, port)
	}
	in.tr = &http.Transport{
		DialContext:         d.DialContext,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConnsPerHost: 8,
		// Bodies come back as sent (no transparent gzip), and the request
		// asks for identity (rewrite), so the response scrub reads text.
		DisableCompression: true,
	}
	in.rp = &httputil.ReverseProxy{
		Rewrite:        in.rewrite,
		Transport:      in.tr,
		FlushInterval:  -1, // every write reaches the client at once (SSE)
		ModifyResponse: in.modifyResponse,
		ErrorHandler:   in.proxyError,
		ErrorLog:       slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
	}
	return in, nil
}

// ClientBaseURL is the base URL to give the CLI when its connections reach
// the Injector at origin (a Bridge's URL, "http://127.0.0.1:<port>"): the
// origin with the upstream's base path, so that the path the CLI appends
// is forwarded as it is. For OpenAI's default that is origin+"/v1" (the CLI
// sends /v1/responses); for coder.base_url "http://host:4000/v1" the same;
// for Anthropic and Gemini the origin alone.
func (in *Injector) ClientBaseURL(origin string) string {
	return strings.TrimRight(origin, "/") + in.basePath
}

// Upstream is where requests go: the upstream's origin and base path
// (never a credential).
func (in *Injector) Upstream() string { return in.up.String() + in.basePath }

// Close closes idle upstream connections.
func (in *Injector) Close() error {
	in.tr.CloseIdleConnections()
	return nil
}

// ServeConn serves HTTP on one client connection until the client closes
// it, it idles out, or ctx ends. It closes c.
func (in *Injector) ServeConn(ctx context.Context, c net.Conn) error {
	ln := newOneConnListener(c)
	srv := &http.Server{
		Handler:           in,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(in.o.Logger.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithValue(ctx, serveCtxKey{}, ctx) },
	}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	err := srv.Serve(ln)
	if errors.Is(err, errConnDone) || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("egress injector: %w", err)
}

// serveCtxKey holds the context ServeConn was given, in the requests it
// serves (for a tunnel, which outlives its CONNECT request's context).
type serveCtxKey struct{}

// ServeHTTP refuses what the Injector does not serve and forwards the rest.
func (in *Injector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	begin := time.Now()
	ev := Event{Method: r.Method, Target: r.Host + r.URL.EscapedPath()}
	if r.Method == http.MethodConnect {
		ev.Target = r.Host
	}
	var up, down atomic.Int64
	defer func() {
		ev.Up, ev.Down, ev.Elapsed = up.Load(), down.Load(), time.Since(begin)
		if in.o.OnRequest != nil {
			in.o.OnRequest(ev)
		}
	}()
	if r.Method == http.MethodConnect && in.ownHost(r) {
		ev.Allowed, ev.Status = true, http.StatusOK
		in.tunnelToSelf(w, r)
		return
	}
	if why := in.refusal(r); why != "" {
		ev.Reason, ev.Status = why, http.StatusForbidden
		in.o.Logger.Warn("egress injector: request refused", "method", r.Method, "target", ev.Target, "reason", why, "remote", r.RemoteAddr)
		body := "conch egress: " + why + "\n"
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, body)
		return
	}
	ev.Allowed = true
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &countingBody{ReadCloser: r.Body, n: &up}
	}
	rec := &recorder{ResponseWriter: w}
	ctx := context.WithValue(r.Context(), injectKey{}, &injectState{down: &down, failure: &ev.Reason})
	in.rp.ServeHTTP(rec, r.WithContext(ctx))
	ev.Status = rec.status
	in.o.Logger.Debug("egress injector: forwarded", "method", r.Method, "target", ev.Target, "status", rec.status, "elapsed", time.Since(begin))
}

// tunnelToSelf answers a CONNECT for the Injector's own address (what a
// client that sends everything through its HTTPS_PROXY does, when that is
// the bridge) and serves the HTTP inside the tunnel like any other.
func (in *Injector) tunnelToSelf(w http.ResponseWriter, r *http.Request) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "conch egress: cannot tunnel on this connection", http.StatusInternalServerError)
		return
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		in.o.Logger.Debug("egress injector: hijack for CONNECT", "err", err)
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		c.Close()
		return
	}
	// brw.Reader reads through to c and holds what the client sent early.
	// The request's context ends with the hijack; the tunnel lives as long
	// as the connection it came on.
	ctx, _ := r.Context().Value(serveCtxKey{}).(context.Context)
	if ctx == nil {
		ctx = context.WithoutCancel(r.Context())
	}
	_ = in.ServeConn(ctx, &bufferedConn{Conn: c, r: brw.Reader})
}

// bufferedConn reads through a bufio.Reader over its Conn.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// refusal returns why r is not served, or "".
func (in *Injector) refusal(r *http.Request) string {
	if r.Method == http.MethodConnect {
		return fmt.Sprintf("CONNECT to %s is not allowed: this endpoint forwards only to %s's API", r.Host, in.name)
	}
	if !in.ownHost(r) {
		return fmt.Sprintf("host %q is not allowed: this endpoint forwards only to %s's API", r.Host, in.name)
	}
	if r.Header.Get("Upgrade") != "" || headerHasToken(r.Header, "Connection", "upgrade") {
		return "protocol upgrades (WebSocket) are not supported: turn the CLI's websockets off"
	}
	p := r.URL.Path
	if !strings.HasPrefix(p, "/") {
		return "only origin-form request targets (/path) are allowed"
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return "paths with . or .. segments are not allowed"
		}
	}
	if in.basePath != "" && p != in.basePath && !strings.HasPrefix(p, in.basePath+"/") {
		return fmt.Sprintf("path %q is outside the API's base path %s", p, in.basePath)
	}
	return ""
}

// ownHost tells whether r was addressed to the address its client
// connected to (the bridge's 127.0.0.1:port in the sandbox): by that
// address or as localhost with the same port. Absolute-form requests carry
// their own host in r.Host, so one naming another host is refused here too.
func (in *Injector) ownHost(r *http.Request) bool {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	tcp, ok := la.(*net.TCPAddr)
	if !ok || !tcp.IP.IsLoopback() {
		return false
	}
	if r.URL.IsAbs() && r.URL.Scheme != "http" {
		return false
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil || port != strconv.Itoa(tcp.Port) {
		return false
	}
	return strings.EqualFold(host, "localhost") || host == tcp.IP.String()
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// rewrite points the outgoing request at the upstream and replaces its
// credentials. The path is kept: the CLI's base URL carries the upstream's
// base path (ClientBaseURL). httputil.ReverseProxy has already removed
// hop-by-hop and X-Forwarded-* headers.
func (in *Injector) rewrite(pr *httputil.ProxyRequest) {
	out := pr.Out
	out.URL.Scheme, out.URL.Host = in.up.Scheme, in.up.Host
	out.Host = ""
	if q := out.URL.Query(); q.Has("key") {
		q.Del("key")
		out.URL.RawQuery = q.Encode()
	}
	for _, h := range credentialHeaders {
		out.Header.Del(h)
	}
	out.Header.Del("Accept-Encoding")
	switch in.o.Vendor {
	case Anthropic:
		out.Header.Set("X-Api-Key", in.o.Key)
	case OpenAI:
		out.Header.Set("Authorization", "Bearer "+in.o.Key)
	case Gemini:
		out.Header.Set("X-Goog-Api-Key", in.o.Key)
	default:
		out.Header.Set(in.o.Header, in.o.Prefix+in.o.Key)
	}
}

type injectKey struct{}

// injectState is what one request's proxying reports back to ServeHTTP.
type injectState struct {
	down    *atomic.Int64
	failure *string
}

// modifyResponse keeps the key out of the response: a header that holds it
// is dropped; the body is scrubbed as it streams.
func (in *Injector) modifyResponse(resp *http.Response) error {
	key := in.o.Key
	for name, vs := range resp.Header {
		for _, v := range vs {
			if strings.Contains(v, key) {
				in.o.Logger.Warn("egress injector: the upstream's response header held the API key; removed", "header", name)
				resp.Header.Del(name)
				break
			}
		}
	}
	var down *atomic.Int64
	if st, ok := resp.Request.Context().Value(injectKey{}).(*injectState); ok {
		down = st.down
	}
	resp.Body = &scrubBody{r: resp.Body, key: []byte(key), mask: bytes.Repeat([]byte("*"), len(key)), n: down}
	return nil
}

// proxyError answers a request that could not be forwarded. The text is
// scrubbed of the key (it never holds it: the key is only in a header).
func (in *Injector) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusBadGateway
	msg := "upstream " + in.up.Host + " unreachable: " + err.Error()
	var re *netpolicy.RefusedError
	if errors.As(err, &re) {
		status = http.StatusForbidden
		msg = fmt.Sprintf("upstream %s is not a public address (%s); a private endpoint can be configured as coder.base_url", in.up.Host, re.Reason)
	}
	msg = strings.ReplaceAll(msg, in.o.Key, "[redacted]")
	if st, ok := r.Context().Value(injectKey{}).(*injectState); ok {
		*st.failure = msg
	}
	if r.Context().Err() == nil {
		in.o.Logger.Warn("egress injector: forwarding failed", "method", r.Method, "path", r.URL.EscapedPath(), "err", msg)
	}
	body := "conch egress: " + msg + "\n"
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// recorder notes the status written, and lets the ReverseProxy flush.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// scrubBody masks every occurrence of key in a streamed body with as many
// asterisks (so lengths stay right). Bytes that might begin an occurrence
// are held back until the next read settles them; nothing else is delayed,
// so events of a stream reach the client as they come.
type scrubBody struct {
	r         io.ReadCloser
	key, mask []byte
	n         *atomic.Int64
	out, hold []byte
	buf       []byte
	err       error
}

func (s *scrubBody) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.err != nil {
			if len(s.hold) == 0 {
				return 0, s.err
			}
			s.out, s.hold = s.hold, nil
			break
		}
		if s.buf == nil {
			s.buf = make([]byte, 32<<10)
		}
		n, err := s.r.Read(s.buf)
		data := append(s.hold, s.buf[:n]...)
		data = bytes.ReplaceAll(data, s.key, s.mask)
		keep := 0
		if err == nil {
			keep = partialSuffix(data, s.key)
		}
		s.out = data[:len(data)-keep]
		s.hold = append([]byte(nil), data[len(data)-keep:]...)
		s.err = err
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	if s.n != nil {
		s.n.Add(int64(n))
	}
	return n, nil
}

func (s *scrubBody) Close() error { return s.r.Close() }

// partialSuffix is the length of the longest end of data that is a proper
// beginning of key.
func partialSuffix(data, key []byte) int {
	for j := min(len(key)-1, len(data)); j > 0; j-- {
		if bytes.HasSuffix(data, key[:j]) {
			return j
		}
	}
	return 0
}

// errConnDone ends an http.Server's Serve once its one connection closed.
var errConnDone = errors.New("connection done")

// oneConnListener hands out one connection, then blocks until it is closed.
type oneConnListener struct {
	c      *notifyConn
	first  chan net.Conn
	closed chan struct{}
	close  sync.Once
}

func newOneConnListener(c net.Conn) *oneConnListener {
	l := &oneConnListener{first: make(chan net.Conn, 1), closed: make(chan struct{})}
	l.c = &notifyConn{Conn: c, done: make(chan struct{})}
	l.first <- l.c
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.first:
		return c, nil
	default:
	}
	select {
	case <-l.c.done:
	case <-l.closed:
	}
	return nil, errConnDone
}

// Close implements net.Listener; the connection itself is closed by the
// server that accepted it (or here, if it never was).
func (l *oneConnListener) Close() error {
	l.close.Do(func() { close(l.closed) })
	select {
	case c := <-l.first:
		c.Close()
	default:
	}
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }

// notifyConn tells its listener when it is closed, and keeps CloseWrite
// (net/http half-closes before it closes).
type notifyConn struct {
	net.Conn
	once sync.Once
	done chan struct{}
}

func (c *notifyConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.done) })
	return err
}

func (c *notifyConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
