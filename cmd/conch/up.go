package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"conch"
	"conch/gateway"
	"conch/internal/idletrim"
	"conch/sqlite"
)

func (a *app) upCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the gateway with every configured channel",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.up(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&a.newStore, "new-store", false, "start with an empty store even though the data dir was used before")
	return cmd
}

func (a *app) up(ctx context.Context) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	d, err := a.build(ctx, cfg, a.stderr)
	if err != nil {
		return err
	}
	defer d.Close()
	log := d.log
	ctx, stop := stopWhenStoreFails(ctx, d.db, log)
	defer stop()
	if err := a.startRuntime(ctx, d, func(s string) { log.Info("sandbox image: " + s) }); err != nil {
		return err
	}
	if d.runtime != nil {
		if err := d.runtime.Reconcile(ctx); err != nil {
			return fmt.Errorf("reconcile sandboxes: %w", err)
		}
	}
	// The HTTP host exists before the channels, so that channels with
	// pages (the web chat) register their routes on it; it serves once the
	// gateway is built.
	if cfg.Gateway.Listen != "" {
		host, err := newHTTPHost(cfg.Gateway.Listen, log)
		if err != nil {
			return fmt.Errorf("gateway.listen %s: %w (set CONCH_GATEWAY_LISTEN to a free address, or \"\" to serve no HTTP)", cfg.Gateway.Listen, err)
		}
		d.http = host
		defer func() {
			if err := host.Shutdown(context.WithoutCancel(ctx)); err != nil {
				log.Warn("http server shutdown", "err", err)
			}
		}()
	}
	// The gateway first, then the channels that reach it (the web chat
	// follows its events), attached when it runs.
	gw, err := newGateway(d)
	if err != nil {
		return err
	}
	d.gw = gw
	channels, err := a.channels(ctx, d)
	if err != nil {
		return err
	}
	if len(channels) == 0 {
		log.Warn("no channel is configured; conch serves only its health endpoint. Configure [matrix] (or CONCH_MATRIX_HOMESERVER) or [email] (CONCH_EMAIL_ADDRESS) to talk to it, or use `conch chat`.")
	}
	if err := mountMCP(d); err != nil { // conch as an MCP server (mcp_server_cmd.go)
		return err
	}
	if d.http != nil {
		d.http.Serve()
		log.Info("http listening", "addr", d.http.Addr())
		a.announceWeb(ctx, d) // prints a login link for the web chat (web.go)
	}
	log.Info("conch is up", "version", currentVersion().Version, "model", cfg.Model.Provider+"/"+cfg.Model.Name, "channels", len(channels), "sandboxes", d.runtime != nil)
	// Scheduled wakes and watches run while the gateway runs and stop with it.
	schedDone := make(chan struct{})
	schedCtx, stopSched := context.WithCancel(ctx)
	go func() {
		defer close(schedDone)
		if d.sched != nil {
			if err := d.sched.Run(schedCtx, gw); err != nil {
				log.Error("scheduler stopped", "err", err)
			}
		}
	}()
	// The store's janitor deletes expired markers and sent ids meanwhile.
	janitorDone := make(chan struct{})
	go func() {
		defer close(janitorDone)
		d.db.RunJanitor(schedCtx, sqlite.JanitorInterval, log)
	}()
	// After a burst of turns the heap's garbage and free pages go back to
	// the system once conch is quiet (internal/idletrim), with the model
	// views the store kept while busy and the program's pages the work
	// touched (they stay in the page cache).
	release := func() {
		if err := d.db.ReleaseMemory(schedCtx); err != nil && schedCtx.Err() == nil {
			log.Warn("idle: the store's caches not released", "err", err)
		}
	}
	go idletrim.Run(schedCtx, idletrim.Options{Logger: log, Release: release, Program: idletrim.ReleaseProgram})
	err = gw.Run(ctx, channels...)
	stopSched()
	<-schedDone
	<-janitorDone
	log.Info("conch is shutting down")
	if cause := context.Cause(ctx); err == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause // the store failed while the gateway was still starting
	}
	if err != nil {
		// A channel that failed for good ends conch non-zero so a
		// supervisor restarts it.
		return err
	}
	return nil
}

// channels builds the configured channels with their allowlists.
func (a *app) channels(ctx context.Context, d *deps) ([]gateway.Attached, error) {
	var chs []gateway.Attached
	for _, build := range channelBuilders {
		ch, al, err := build(ctx, a, d)
		if err != nil {
			return nil, err
		}
		if ch == nil {
			continue
		}
		if p := policies(d.cfg)[ch.Name()]; al.Empty() && (p == "" || p == gateway.PolicyAllowlist) {
			d.log.Warn("channel has an empty allowlist: nobody will be answered", "channel", ch.Name())
		}
		chs = append(chs, gateway.Attached{Channel: ch, Allow: al})
	}
	return chs, nil
}

// channelBuilder returns a configured channel, or nil when it is not configured.
type channelBuilder func(ctx context.Context, a *app, d *deps) (conch.Channel, gateway.Allowlist, error)

// channelBuilders lists the channels conch up can run, in start order.
var channelBuilders = []channelBuilder{matrixChannel, telegramChannel, emailChannel, webChannel, slackChannel, discordChannel}

// stopWhenStoreFails returns ctx ended, with the failure as its cause, once
// the store's disk failed an fsync. Such a store writes nothing more (the
// kernel may have dropped the pages it could not write), so conch stops,
// non-zero, for the service manager to start it again, rather than stay up
// answering nobody: at the next start SQLite recovers what the disk holds
// and the channels deliver again what was not acknowledged.
func stopWhenStoreFails(ctx context.Context, db *sqlite.DB, log *slog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-db.Failed():
			err := fmt.Errorf("the store's disk failed: %w; conch stops so that it is started again, and recovers what the disk holds", db.Err())
			log.Error("stopping: the store can no longer make anything durable", "err", db.Err())
			cancel(err)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}
