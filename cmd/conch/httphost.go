package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// httpHost is conch up's one HTTP server on gateway.listen. Channels (the
// web chat) and operator endpoints (health, dashboard, metrics) register
// their routes on Mux before Serve.
type httpHost struct {
	Mux *http.ServeMux
	srv *http.Server
	ln  net.Listener
	log *slog.Logger
	// done is closed when Serve returned.
	done chan struct{}
	err  error
}

// newHTTPHost listens on addr at once, so a port in use stops conch up
// before anything else starts.
func newHTTPHost(addr string, log *slog.Logger) (*httpHost, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	h := &httpHost{Mux: mux, ln: ln, log: log, done: make(chan struct{})}
	h.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       time.Minute,
		// No WriteTimeout: event streams and WebSockets stay open; their
		// handlers bound their own writes.
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return h, nil
}

// Addr is the address the host listens on.
func (h *httpHost) Addr() string { return h.ln.Addr().String() }

// Serve serves in the background until Shutdown.
func (h *httpHost) Serve() {
	go func() {
		defer close(h.done)
		if err := h.srv.Serve(h.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.err = err
			h.log.Error("http server failed", "addr", h.Addr(), "err", err)
		}
	}()
}

// Shutdown stops accepting, lets requests in flight finish for a bounded
// time, then closes what is left (long-lived streams).
func (h *httpHost) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := h.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, h.srv.Close())
	}
	select {
	case <-h.done:
	case <-ctx.Done():
	}
	return err
}
