package main

import (
	"context"
	"fmt"

	"conch"
	"conch/channel/telegram"
	"conch/config"
	"conch/gateway"
)

// telegramChannel builds the Telegram channel when a bot token is configured.
//
// The allowlist holds telegram.allow_from as given: numeric user ids and
// @usernames. The channel passes every message on with Sender = the
// numeric user id and SenderName = @username; the gateway's admission
// decides who is served.
func telegramChannel(_ context.Context, _ *app, d *deps) (conch.Channel, gateway.Allowlist, error) {
	tc := d.cfg.Telegram
	if !tc.Enabled() {
		return nil, gateway.Allowlist{}, nil
	}
	if err := tc.LoadSecrets(); err != nil {
		return nil, gateway.Allowlist{}, fmt.Errorf("telegram: %w", err)
	}
	ch, err := telegram.New(telegram.Options{
		Token: tc.BotToken, APIURL: tc.APIURL, GroupPolicy: tc.GroupPolicy, MaxFileBytes: tc.MaxFileBytes,
		Cursors: d.db, Logger: d.log,
	})
	if err != nil {
		return nil, gateway.Allowlist{}, fmt.Errorf("telegram: %w", err)
	}
	return ch, gateway.NewAllowlist(tc.AllowFrom...), nil
}

// doctorTelegram checks the bot token with getMe.
func (a *app) doctorTelegram(ctx context.Context, cfg *config.Config, check func(string, error, string)) {
	tc := cfg.Telegram
	if err := tc.LoadSecrets(); err != nil {
		check("telegram bot", err, "")
		return
	}
	name, err := telegram.CheckBot(ctx, tc.APIURL, tc.BotToken)
	check("telegram bot", err, name+" at "+tc.APIURL)
}
