package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"conch"
	"conch/channel/web"
	"conch/config"
	"conch/gateway"
	"conch/obs/metrics"
)

// webCmd is `conch web url` and `conch web logout-all`.
func (a *app) webCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "web", Short: "Log in to the web chat and dashboard"}
	var dashboard bool
	urlCmd := &cobra.Command{
		Use:   "url",
		Short: "Print a single-use login link for the web chat (works once, for web.login_ttl)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadOperatorConfig()
			if err != nil {
				return err
			}
			if err := webAvailable(cfg); err != nil {
				return err
			}
			d, err := a.build(cmd.Context(), cfg, io.Discard)
			if err != nil {
				return err
			}
			defer d.Close()
			auth := web.NewAuth(d.db, d.db, cfg.Web.LoginTTL.D(), cfg.Web.SessionTTL.D(), nil)
			link, err := loginLink(cmd.Context(), cfg, auth, dashboard)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, link)
			fmt.Fprintf(a.stderr, "Open it in a browser: it works once, for %s. `conch up` must be running.\n", cfg.Web.LoginTTL.D())
			return nil
		},
	}
	urlCmd.Flags().BoolVar(&dashboard, "dashboard", false, "land on the dashboard instead of the chat")
	logoutCmd := &cobra.Command{
		Use:   "logout-all",
		Short: "End every web session (every browser must log in again with a new link)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadOperatorConfig()
			if err != nil {
				return err
			}
			d, err := a.build(cmd.Context(), cfg, io.Discard)
			if err != nil {
				return err
			}
			defer d.Close()
			if err := web.NewAuth(d.db, d.db, cfg.Web.LoginTTL.D(), cfg.Web.SessionTTL.D(), nil).LogoutAll(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, "Every web session has ended; open sockets close within a minute.")
			return nil
		},
	}
	cmd.AddCommand(urlCmd, logoutCmd)
	return cmd
}

// webAvailable says why there is no web chat, if there is none.
func webAvailable(cfg *config.Config) error {
	switch {
	case !cfg.Web.Enabled:
		return errors.New("web.enabled is false: set it to true (or CONCH_WEB_ENABLED=true) to use the web chat")
	case cfg.Gateway.Listen == "":
		return errors.New(`gateway.listen is empty: set it (e.g. "127.0.0.1:8484") to serve the web chat`)
	}
	return nil
}

// webSecure says whether people reach the web chat over HTTPS: conch's own
// TLS, or a TLS reverse proxy named by web.public_url. The session cookie is
// then Secure and HSTS is sent.
func webSecure(cfg *config.Config) bool {
	return cfg.Web.TLS() || strings.HasPrefix(strings.ToLower(cfg.Web.PublicURL), "https://")
}

// baseURL is where people reach the web chat: web.public_url, or the
// listener's own address (a wildcard listen names this machine).
func baseURL(cfg *config.Config) string {
	if cfg.Web.PublicURL != "" {
		return strings.TrimRight(cfg.Web.PublicURL, "/")
	}
	scheme := "http"
	if cfg.Web.TLS() {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(cfg.Gateway.Listen)
	if err != nil {
		return scheme + "://" + cfg.Gateway.Listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
		if h, err := os.Hostname(); err == nil && h != "" && !config.IsLoopback(cfg.Gateway.Listen) {
			host = h
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// loginLink creates a login token and returns its link.
func loginLink(ctx context.Context, cfg *config.Config, auth *web.Auth, dashboard bool) (string, error) {
	tok, err := auth.NewLoginToken(ctx)
	if err != nil {
		return "", err
	}
	q := url.Values{"token": {tok}}
	if dashboard {
		q.Set("next", "/dashboard")
	}
	return baseURL(cfg) + "/login?" + q.Encode(), nil
}

// webChannel builds the web chat and dashboard on conch up's HTTP host, with
// /metrics behind the login (and on metrics.listen without it).
func webChannel(ctx context.Context, _ *app, d *deps) (conch.Channel, gateway.Allowlist, error) {
	cfg := d.cfg
	if !cfg.Web.Enabled || d.http == nil {
		if cfg.Web.Enabled {
			d.log.Warn("gateway.listen is empty: no web chat, dashboard or metrics")
		}
		return nil, gateway.Allowlist{}, nil
	}
	if cfg.Web.TLS() {
		if err := serveTLS(d.http, cfg); err != nil {
			return nil, gateway.Allowlist{}, err
		}
	} else if !config.IsLoopback(cfg.Gateway.Listen) {
		d.log.Warn("the web chat is served over plain HTTP on a non-loopback address (web.allow_insecure = true): logins and conversations can be read on the network", "addr", cfg.Gateway.Listen)
	}
	mo := metrics.Options{Events: d.gw.Events(), Models: modelLabels(cfg), Logger: d.log}
	opts := web.Options{
		Events: d.gw.Events(), Control: d.gw, Store: d.db, Sessions: d.db, Conversations: d.db, Read: d.db, History: d.db,
		MaxMessageBytes: cfg.Web.MaxMessageBytes,
		LoginTTL:        cfg.Web.LoginTTL.D(), SessionTTL: cfg.Web.SessionTTL.D(),
		Secure: webSecure(cfg), Logger: d.log, Files: d.spool,
	}
	if d.runtime != nil { // a nil *Runtime must not become a non-nil interface
		opts.Sandboxes, mo.Sandboxes = d.runtime, d.runtime
		opts.Terminals, mo.Terminals = d.terminals, d.terminals.Count
	}
	if d.mcp != nil {
		opts.MCP = d.mcp.Overview
	}
	m := metrics.New(mo)
	d.metrics = m // newAgent names its tools (the only tool label values)
	registerMCPMetrics(d, m.Registry())
	opts.Metrics = m.Handler()
	if cfg.Web.PublicURL != "" {
		if u, err := url.Parse(cfg.Web.PublicURL); err == nil {
			opts.OriginPatterns = []string{u.Host}
		}
	}
	ch, err := web.New(opts)
	if err != nil {
		return nil, gateway.Allowlist{}, err
	}
	ch.Register(d.http.Mux)
	go func() { _ = m.Run(ctx) }()
	if cfg.Metrics.Listen != "" {
		if err := serveMetrics(ctx, cfg.Metrics.Listen, m.Handler(), d); err != nil {
			return nil, gateway.Allowlist{}, err
		}
	}
	d.web = ch
	return ch, gateway.NewAllowlist(string(ch.Owner())), nil
}

// serveTLS makes the HTTP host serve HTTPS.
func serveTLS(h *httpHost, cfg *config.Config) error {
	cert, err := tls.LoadX509KeyPair(cfg.Web.TLSCert, cfg.Web.TLSKey)
	if err != nil {
		return fmt.Errorf("web.tls_cert/web.tls_key: %w (point them at a PEM certificate and its key)", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	h.srv.TLSConfig = tc
	h.ln = tls.NewListener(h.ln, tc)
	return nil
}

// serveMetrics serves /metrics without login on its own address.
func serveMetrics(ctx context.Context, addr string, h http.Handler, d *deps) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics.listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	if d.cfg.Metrics.Pprof { // Validate holds it to a loopback metrics.listen
		servePprof(mux)
		d.log.Warn("metrics.pprof: Go runtime profiles served without login", "addr", addr, "path", "/debug/pprof/")
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("metrics listener failed", "addr", addr, "err", err)
		}
	}()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	d.log.Info("metrics listening", "addr", addr)
	return nil
}

// announceWeb prints a login link when conch up has started, so a person
// can open the web chat at once.
func (a *app) announceWeb(ctx context.Context, d *deps) {
	if d.web == nil {
		return
	}
	link, err := loginLink(ctx, d.cfg, d.web.Auth(), false)
	if err != nil {
		d.log.Warn("login link", "err", err)
		return
	}
	// Straight to the terminal, not into the log: the link is a secret
	// (single use, short-lived).
	fmt.Fprintf(a.stderr, "\nWeb chat: open %s\n  (works once, for %s; `conch web url` prints a new one; dashboard at %s/dashboard)\n\n",
		link, d.cfg.Web.LoginTTL.D(), baseURL(d.cfg))
}
