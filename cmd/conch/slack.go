package main

import (
	"context"
	"fmt"

	"conch"
	slackch "conch/channel/slack"
	"conch/config"
	"conch/gateway"
)

// slackChannel builds the Slack channel when a bot token is configured.
//
// The allowlist holds slack.allow_from as given: member ids (U…) and
// workspace:member pairs (T…:U…). The channel passes every message on with
// Sender = the member id and the alias team:member; the gateway's
// admission decides who is served.
func slackChannel(_ context.Context, _ *app, d *deps) (conch.Channel, gateway.Allowlist, error) {
	sc := d.cfg.Slack
	if !sc.Enabled() {
		return nil, gateway.Allowlist{}, nil
	}
	if err := sc.LoadSecrets(); err != nil {
		return nil, gateway.Allowlist{}, fmt.Errorf("slack: %w", err)
	}
	if sc.Mode == slackch.ModeEvents && d.http == nil {
		return nil, gateway.Allowlist{}, fmt.Errorf("slack: mode = events needs conch's HTTP host (gateway.listen) for %s", slackch.EventsPath)
	}
	ch, err := slackch.New(slackch.Options{
		BotToken: sc.BotToken, AppToken: sc.AppToken, Mode: sc.Mode, SigningSecret: sc.SigningSecret,
		APIURL: sc.APIURL, ChannelPolicy: sc.ChannelPolicy,
		MaxFileBytes: sc.MaxFileBytes, WorkingReaction: sc.WorkingReaction, Cursors: d.db, Logger: d.log,
	})
	if err != nil {
		return nil, gateway.Allowlist{}, fmt.Errorf("slack: %w", err)
	}
	if sc.Mode == slackch.ModeEvents {
		ch.Register(d.http.Mux)
	}
	return ch, gateway.NewAllowlist(sc.AllowFrom...), nil
}

// doctorSlack checks both tokens: auth.test and apps.connections.open.
func (a *app) doctorSlack(ctx context.Context, cfg *config.Config, check func(string, error, string)) {
	sc := cfg.Slack
	if err := sc.LoadSecrets(); err != nil {
		check("slack app", err, "")
		return
	}
	if sc.Mode == slackch.ModeEvents {
		name, err := slackch.CheckApp(ctx, sc.APIURL, sc.BotToken, "")
		check("slack app", err, name+", events at "+slackch.EventsPath)
		return
	}
	name, err := slackch.CheckApp(ctx, sc.APIURL, sc.BotToken, sc.AppToken)
	check("slack app", err, name+", socket mode allowed")
}
