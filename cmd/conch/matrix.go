package main

import (
	"context"
	"fmt"

	"conch"
	"conch/channel/matrix"
	"conch/gateway"
)

// matrixChannel builds the Matrix channel when [matrix] is configured.
func matrixChannel(_ context.Context, _ *app, d *deps) (conch.Channel, gateway.Allowlist, error) {
	mc := d.cfg.Matrix
	if !mc.Enabled() {
		return nil, gateway.Allowlist{}, nil
	}
	if err := mc.LoadSecrets(); err != nil {
		return nil, gateway.Allowlist{}, fmt.Errorf("matrix: %w", err)
	}
	key, err := matrix.LoadOrCreatePickleKey(mc.PickleKey, mc.PickleKeyFile, d.cfg.DataDir)
	if err != nil {
		return nil, gateway.Allowlist{}, fmt.Errorf("matrix: %w", err)
	}
	if !matrix.E2EEAvailable() {
		d.log.Warn("this conch was built with -tags noe2ee: encrypted Matrix rooms cannot be read or answered")
	}
	ch, err := matrix.New(matrix.Options{
		Homeserver: mc.Homeserver, UserID: mc.UserID, AccessToken: mc.AccessToken, Password: mc.Password,
		DeviceID: mc.DeviceID, AllowFrom: mc.AllowFrom, GroupPolicy: mc.GroupPolicy, MentionOnly: mc.MentionOnly,
		Greeting: mc.Greeting, DB: d.db.SQL(), Cursors: d.db, PickleKey: key, Logger: d.log,
		MaxReconnectAttempts: mc.MaxReconnectAttempts,
	})
	if err != nil {
		return nil, gateway.Allowlist{}, fmt.Errorf("matrix: %w", err)
	}
	return ch, gateway.NewAllowlist(mc.AllowFrom...), nil
}
