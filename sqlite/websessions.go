package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The web chat's sessions (channel/web.Sessions): hashes only.
const (
	sqlCreateWebSession = `INSERT INTO web_sessions (id, secret_hash, token_hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`
	sqlWebSession       = `SELECT secret_hash, token_hash, expires_at FROM web_sessions WHERE id = ?`
	sqlDeleteWebSession = `DELETE FROM web_sessions WHERE id = ?`
	sqlDeleteAllWeb     = `DELETE FROM web_sessions`
	sqlPruneWebSessions = `DELETE FROM web_sessions WHERE expires_at <= ?`
)

// CreateWebSession stores a new web session.
func (d *DB) CreateWebSession(ctx context.Context, id, secretHash, tokenHash string, expires time.Time) error {
	if _, err := d.w.ExecContext(ctx, sqlCreateWebSession, id, secretHash, tokenHash, millis(d.now()), millis(expires)); err != nil {
		return fmt.Errorf("create web session: %w", err)
	}
	return nil
}

// WebSession returns a web session's hashes and expiry; empty hashes when
// there is none.
func (d *DB) WebSession(ctx context.Context, id string) (secretHash, tokenHash string, expires time.Time, err error) {
	var exp int64
	err = d.r.QueryRowContext(ctx, sqlWebSession, id).Scan(&secretHash, &tokenHash, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", time.Time{}, nil
	}
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("web session: %w", err)
	}
	return secretHash, tokenHash, fromMillis(exp), nil
}

// DeleteWebSession ends one web session.
func (d *DB) DeleteWebSession(ctx context.Context, id string) error {
	if _, err := d.w.ExecContext(ctx, sqlDeleteWebSession, id); err != nil {
		return fmt.Errorf("delete web session: %w", err)
	}
	return nil
}

// DeleteWebSessions ends every web session.
func (d *DB) DeleteWebSessions(ctx context.Context) error {
	if _, err := d.w.ExecContext(ctx, sqlDeleteAllWeb); err != nil {
		return fmt.Errorf("delete web sessions: %w", err)
	}
	return nil
}

// PruneWebSessions deletes the web sessions expired at now.
func (d *DB) PruneWebSessions(ctx context.Context, now time.Time) error {
	if _, err := d.w.ExecContext(ctx, sqlPruneWebSessions, millis(now)); err != nil {
		return fmt.Errorf("prune web sessions: %w", err)
	}
	return nil
}
