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
	if _, err := d.execSQL(ctx, sqlCreateWebSession, id, secretHash, tokenHash, millis(d.now()), millis(expires)); err != nil {
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
	if _, err := d.execSQL(ctx, sqlDeleteWebSession, id); err != nil {
		return fmt.Errorf("delete web session: %w", err)
	}
	return nil
}

// DeleteWebSessions ends every web session.
func (d *DB) DeleteWebSessions(ctx context.Context) error {
	if _, err := d.execSQL(ctx, sqlDeleteAllWeb); err != nil {
		return fmt.Errorf("delete web sessions: %w", err)
	}
	return nil
}

// PruneWebSessions deletes the web sessions expired at now.
func (d *DB) PruneWebSessions(ctx context.Context, now time.Time) error {
	if _, err := d.execSQL(ctx, sqlPruneWebSessions, millis(now)); err != nil {
		return fmt.Errorf("prune web sessions: %w", err)
	}
	return nil
}

// The web chat's single-use login tokens (channel/web.Logins): hashes only,
// deleted when used, pruned by the janitor when expired.
const (
	sqlCreateWebLogin = `INSERT INTO web_logins (token_hash, expires_at) VALUES (?, ?)`
	sqlTakeWebLogin   = `DELETE FROM web_logins WHERE token_hash = ? RETURNING expires_at`
	sqlPruneWebLogins = `DELETE FROM web_logins WHERE expires_at <= ?`
)

// CreateWebLogin stores a new login token's hash.
func (d *DB) CreateWebLogin(ctx context.Context, tokenHash string, expires time.Time) error {
	if _, err := d.execSQL(ctx, sqlCreateWebLogin, tokenHash, millis(expires)); err != nil {
		return fmt.Errorf("create web login: %w", err)
	}
	return nil
}

// TakeWebLogin deletes a login token's hash and returns its expiry; ok is
// false when there was none.
func (d *DB) TakeWebLogin(ctx context.Context, tokenHash string) (time.Time, bool, error) {
	var exp int64
	err := d.w.QueryRowContext(ctx, sqlTakeWebLogin, tokenHash).Scan(&exp)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("take web login: %w", err)
	}
	return fromMillis(exp), true, nil
}
