package main

import (
	"context"
	"fmt"

	"conch"
	discordch "conch/channel/discord"
	"conch/config"
	"conch/gateway"
)

// discordChannel builds the Discord channel when a bot token is configured.
//
// The allowlist holds discord.allow_from as given: user ids and
// server:user pairs. The channel passes every message on with Sender = the
// user id and, in servers, the alias <server id>:<user id>; the gateway's
// admission decides who is served.
func discordChannel(_ context.Context, _ *app, d *deps) (conch.Channel, gateway.Allowlist, error) {
	dc := d.cfg.Discord
	if !dc.Enabled() {
		return nil, gateway.Allowlist{}, nil
	}
	if err := dc.LoadSecrets(); err != nil {
		return nil, gateway.Allowlist{}, fmt.Errorf("discord: %w", err)
	}
	ch, err := discordch.New(discordch.Options{
		Token: dc.BotToken, APIURL: dc.APIURL, GuildPolicy: dc.GuildPolicy, MaxFileBytes: dc.MaxFileBytes,
		Cursors: d.db, Logger: d.log,
	})
	if err != nil {
		return nil, gateway.Allowlist{}, fmt.Errorf("discord: %w", err)
	}
	return ch, gateway.NewAllowlist(dc.AllowFrom...), nil
}

// doctorDiscord checks the token (GET /users/@me, /gateway/bot).
func (a *app) doctorDiscord(ctx context.Context, cfg *config.Config, check func(string, error, string)) {
	dc := cfg.Discord
	if err := dc.LoadSecrets(); err != nil {
		check("discord bot", err, "")
		return
	}
	name, err := discordch.CheckBot(ctx, dc.APIURL, dc.BotToken)
	check("discord bot", err, name+"; the Message Content intent must be on in the Developer Portal")
}
