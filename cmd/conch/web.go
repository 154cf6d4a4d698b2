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

	"conch/channel/web"
	"conch/config"
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
			cfg, err := a.loadConfig()
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
			auth := web.NewAuth(d.db, cfg.Web.LoginTTL.D(), cfg.Web.SessionTTL.D(), nil)
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
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			d, err := a.build(cmd.Context(), cfg, io.Discard)
			if err != nil {
				return err
			}
			defer d.Close()
			if err := web.NewAuth(d.db, 0, 0, nil).LogoutAll(cmd.Context()); err != nil {
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

// httpHost is the one HTTP server on gateway.listen (health, web chat,
// dashboard, /metrics) and the optional metrics listener.
type httpHost struct {
	servers []*http.Server
	done    chan error
}

// startHTTP listens on gateway.listen with mux (TLS when configured) and,
// with metrics.listen set, serves metrics there without login.
func startHTTP(cfg *config.Config, mux *http.ServeMux, metrics http.Handler) (*httpHost, error) {
	h := &httpHost{done: make(chan error, 2)}
	ln, err := net.Listen("tcp", cfg.Gateway.Listen)
	if err != nil {
		return nil, fmt.Errorf("gateway.listen %s: %w", cfg.Gateway.Listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	if cfg.Web.TLS() {
		cert, err := tls.LoadX509KeyPair(cfg.Web.TLSCert, cfg.Web.TLSKey)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("web.tls_cert/web.tls_key: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	h.serve(srv, ln)
	if cfg.Metrics.Listen != "" && metrics != nil {
		mln, err := net.Listen("tcp", cfg.Metrics.Listen)
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("metrics.listen %s: %w", cfg.Metrics.Listen, err)
		}
		m := http.NewServeMux()
		m.Handle("GET /metrics", metrics)
		h.serve(&http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}, mln)
	}
	return h, nil
}

func (h *httpHost) serve(srv *http.Server, ln net.Listener) {
	h.servers = append(h.servers, srv)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.done <- err
		}
	}()
}

// Close stops the servers, giving open requests a moment.
func (h *httpHost) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for _, s := range h.servers {
		if err := s.Shutdown(ctx); err != nil {
			s.Close()
		}
	}
	return nil
}

// healthMux is the mux with /healthz.
func healthMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	return mux
}
