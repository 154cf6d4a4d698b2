package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"conch"
	"conch/gateway"
)

func (a *app) upCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "up",
		Short: "Run the gateway with every configured channel",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.up(cmd.Context())
		},
	}
}

func (a *app) up(ctx context.Context) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	d, err := a.build(ctx, cfg, a.stderr)
	if err != nil {
		return err
	}
	defer d.Close()
	log := d.log
	if err := a.startRuntime(ctx, d, func(s string) { log.Info("sandbox image: " + s) }); err != nil {
		return err
	}
	if d.runtime != nil {
		if err := d.runtime.Reconcile(ctx); err != nil {
			return fmt.Errorf("reconcile sandboxes: %w", err)
		}
	}
	channels, allow, err := a.channels(ctx, d)
	if err != nil {
		return err
	}
	if len(channels) == 0 {
		log.Warn("no channel is configured; conch serves only its health endpoint. Configure [matrix] (or CONCH_MATRIX_HOMESERVER) or [email] (CONCH_EMAIL_ADDRESS) to talk to it, or use `conch chat`.")
	}
	gw, err := newGateway(d, channels, allow)
	if err != nil {
		return err
	}
	if cfg.Gateway.Listen != "" {
		srv, err := serveHealth(cfg.Gateway.Listen)
		if err != nil {
			return fmt.Errorf("gateway.listen: %w", err)
		}
		defer srv.Close()
		log.Info("health endpoint listening", "addr", cfg.Gateway.Listen)
	}
	log.Info("conch is up", "model", cfg.Model.Provider+"/"+cfg.Model.Name, "channels", len(channels), "sandboxes", d.runtime != nil)
	err = gw.Run(ctx)
	log.Info("conch is shutting down")
	if err != nil {
		// A channel that failed for good ends conch non-zero so a
		// supervisor restarts it.
		return err
	}
	return nil
}

// channels builds the configured channels and their allowlists.
func (a *app) channels(ctx context.Context, d *deps) ([]conch.Channel, map[conch.ChannelName]gateway.Allowlist, error) {
	var chs []conch.Channel
	allow := map[conch.ChannelName]gateway.Allowlist{}
	for _, build := range channelBuilders {
		ch, al, err := build(ctx, a, d)
		if err != nil {
			return nil, nil, err
		}
		if ch == nil {
			continue
		}
		if al.Empty() {
			d.log.Warn("channel has an empty allowlist: nobody will be answered", "channel", ch.Name())
		}
		chs = append(chs, ch)
		allow[ch.Name()] = al
	}
	return chs, allow, nil
}

// channelBuilder returns a configured channel, or nil when it is not configured.
type channelBuilder func(ctx context.Context, a *app, d *deps) (conch.Channel, gateway.Allowlist, error)

// channelBuilders lists the channels conch up can run, in start order.
var channelBuilders = []channelBuilder{matrixChannel, emailChannel}

// serveHealth serves /healthz on addr.
func serveHealth(addr string) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the listener is closed on shutdown
		}
	}()
	return srv, nil
}
