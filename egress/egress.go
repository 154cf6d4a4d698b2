// Package egress is how a coding-agent CLI in a network-less sandbox
// reaches its API. The sandbox stays on network none: a Bridge carries
// connections made to a port on the sandbox's loopback to a server on the
// host, over the sandbox's Exec streams.
//
// The server the coding agent's bridge leads to is an Injector: a reverse
// proxy for one API that takes plain HTTP from the CLI (which holds only
// PlaceholderKey), puts the real key on each request and forwards it over
// HTTPS, so the key never enters the sandbox. Proxy is the older
// allowlisting CONNECT proxy (TLS end to end, the key inside the sandbox).
//
// Both serve any connection (ConnServer), so the transport that carries a
// sandbox connection to the host is independent of them.
package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options configures a Proxy.
type Options struct {
	// Hosts are the allowed host names: exact ("api.openai.com") or a
	// wildcard for subdomains ("*.googleapis.com").
	Hosts []string
	// Ports are the allowed ports; empty means 443 only.
	Ports []int
	// AllowPrivate lets tunnels reach loopback, private, link-local and
	// other non-public addresses (tests); by default a host that resolves
	// to one is refused, also when it changes its answer (DNS rebinding),
	// because the check is made on the address actually dialled.
	AllowPrivate bool
	// DialTimeout bounds connecting upstream; 0 means 10 s.
	DialTimeout time.Duration
	// RequestTimeout closes a client stream that has not sent its CONNECT
	// request in time; 0 means 30 s.
	RequestTimeout time.Duration
	// IdleTimeout closes a tunnel with no traffic either way; 0 means 5 min.
	IdleTimeout time.Duration
	// OnTunnel, if set, is told about every request: allowed or refused.
	OnTunnel func(Event)
	Logger   *slog.Logger
}

// Event describes one request: a Proxy's CONNECT, or one request to an
// Injector.
type Event struct {
	// Target is what was asked for: host:port for a CONNECT, host and path
	// (never the query) for a request to an Injector.
	Target  string
	Method  string // an Injector's request method
	Allowed bool
	Reason  string // why it was refused, or how forwarding failed
	Status  int    // the status an Injector answered with
	Up      int64  // bytes client → upstream
	Down    int64  // bytes upstream → client
	Elapsed time.Duration
}

// Proxy is an allowlisting CONNECT proxy.
type Proxy struct {
	o     Options
	exact map[string]bool
	wild  []string // ".googleapis.com"
	ports map[int]bool
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)
}

// New returns a Proxy.
func New(o Options) *Proxy {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 5 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	p := &Proxy{o: o, exact: map[string]bool{}, ports: map[int]bool{}}
	for _, h := range o.Hosts {
		h = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(h), "."))
		if rest, ok := strings.CutPrefix(h, "*."); ok {
			p.wild = append(p.wild, "."+rest)
		} else if h != "" {
			p.exact[h] = true
		}
	}
	if len(o.Ports) == 0 {
		p.ports[443] = true
	}
	for _, port := range o.Ports {
		p.ports[port] = true
	}
	d := &net.Dialer{Timeout: o.DialTimeout}
	if !o.AllowPrivate {
		d.Control = refusePrivate
	}
	p.dial = d.DialContext
	return p
}

// errPrivate is returned when a host resolves to a non-public address.
var errPrivate = errors.New("resolves to a non-public address")

func refusePrivate(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("egress: dial %s: %w", address, err)
	}
	a := ap.Addr().Unmap()
	if !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(a) || netip.MustParsePrefix("fc00::/7").Contains(a) {
		return fmt.Errorf("egress: %s: %w", a, errPrivate)
	}
	return nil
}

// allowed tells whether host:port may be reached, and if not, why.
func (p *Proxy) allowed(host string, port int) (bool, string) {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if !p.ports[port] {
		return false, fmt.Sprintf("port %d is not allowed", port)
	}
	if _, err := netip.ParseAddr(h); err == nil && !p.exact[h] {
		return false, "an address instead of a host name"
	}
	if p.exact[h] {
		return true, ""
	}
	for _, w := range p.wild {
		if strings.HasSuffix(h, w) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("host %s is not allowed", h)
}

// Serve accepts connections on ln until ctx ends or ln fails.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("egress: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.ServeConn(ctx, c); err != nil {
				p.o.Logger.Debug("egress: connection", "err", err)
			}
		}()
	}
}

var _ ConnServer = (*Proxy)(nil)

// ServeConn serves one client connection: one CONNECT request, then the
// tunnel. It closes c.
func (p *Proxy) ServeConn(ctx context.Context, c net.Conn) error {
	defer c.Close()
	br := bufio.NewReader(c)
	// A client that never sends its request must not hold the stream: close
	// it after RequestTimeout (works for any stream, not only a net.Conn).
	timer := time.AfterFunc(p.o.RequestTimeout, func() { c.Close() })
	req, err := http.ReadRequest(br)
	if !timer.Stop() {
		return fmt.Errorf("egress: no request within %s", p.o.RequestTimeout)
	}
	if err != nil {
		refuse(c, http.StatusBadRequest, "bad request")
		return fmt.Errorf("egress: read request: %w", err)
	}
	ev := Event{Target: req.Host}
	begin := time.Now()
	defer func() {
		ev.Elapsed = time.Since(begin)
		if p.o.OnTunnel != nil {
			p.o.OnTunnel(ev)
		}
	}()
	if req.Method != http.MethodConnect {
		ev.Reason = "only CONNECT tunnels are allowed"
		refuse(c, http.StatusMethodNotAllowed, ev.Reason)
		return nil
	}
	host, portStr, err := net.SplitHostPort(req.Host)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil || host == "" {
		ev.Reason = "target is not host:port"
		refuse(c, http.StatusBadRequest, ev.Reason)
		return nil
	}
	if ok, why := p.allowed(host, port); !ok {
		ev.Reason = why
		refuse(c, http.StatusForbidden, why)
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, p.o.DialTimeout)
	up, err := p.dial(dctx, "tcp", net.JoinHostPort(host, portStr))
	cancel()
	if err != nil {
		ev.Reason = "connect failed: " + err.Error()
		status := http.StatusBadGateway
		if errors.Is(err, errPrivate) {
			status = http.StatusForbidden
			ev.Reason = "host " + errPrivate.Error()
		}
		refuse(c, status, ev.Reason)
		return nil
	}
	defer up.Close()
	ev.Allowed = true
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	ev.Up, ev.Down = p.splice(ctx, c, br, up)
	return nil
}

// splice copies both ways until either side ends, ctx ends, or the tunnel
// is idle for IdleTimeout.
func (p *Proxy) splice(ctx context.Context, c io.ReadWriteCloser, br *bufio.Reader, up net.Conn) (upN, downN int64) {
	var mu sync.Mutex
	last := time.Now()
	touch := func() { mu.Lock(); last = time.Now(); mu.Unlock() }
	done := make(chan struct{}, 2)
	go func() {
		upN, _ = io.Copy(up, &touchReader{br, touch})
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		downN, _ = io.Copy(c, &touchReader{up, touch})
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	tick := time.NewTicker(min(p.o.IdleTimeout/4, 10*time.Second))
	defer tick.Stop()
	for finished := 0; finished < 2; {
		select {
		case <-done:
			finished++
			continue
		case <-ctx.Done():
		case <-tick.C:
			mu.Lock()
			idle := time.Since(last)
			mu.Unlock()
			if idle < p.o.IdleTimeout {
				continue
			}
		}
		c.Close()
		up.Close()
		for ; finished < 2; finished++ {
			<-done
		}
	}
	return upN, downN
}

type touchReader struct {
	r     io.Reader
	touch func()
}

func (t *touchReader) Read(b []byte) (int, error) {
	n, err := t.r.Read(b)
	if n > 0 {
		t.touch()
	}
	return n, err
}

func refuse(w io.Writer, status int, why string) {
	body := "conch egress: " + why + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}
