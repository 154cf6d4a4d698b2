package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"conch"
)

// The MCP server's tokens (conch.MCPTokenStore): hashes only.
const (
	sqlCreateMCPToken = `INSERT INTO mcp_tokens (id, secret_hash, channel, key_id, label, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`
	sqlMCPTokenCols = `id, secret_hash, channel, key_id, label, created_at, expires_at, last_used_at`
	sqlMCPToken     = `SELECT ` + sqlMCPTokenCols + ` FROM mcp_tokens WHERE id = ?`
	sqlMCPTokens    = `SELECT ` + sqlMCPTokenCols + ` FROM mcp_tokens ORDER BY created_at, id`
	sqlRevokeMCP    = `DELETE FROM mcp_tokens WHERE id = ?`
	sqlTouchMCP     = `UPDATE mcp_tokens SET last_used_at = ? WHERE id = ?`
	sqlPruneMCP     = `DELETE FROM mcp_tokens WHERE expires_at IS NOT NULL AND expires_at <= ?`
)

var _ conch.MCPTokenStore = (*DB)(nil)

// CreateMCPToken implements conch.MCPTokenStore.
func (d *DB) CreateMCPToken(ctx context.Context, t conch.MCPToken) error {
	if t.ID == "" || t.SecretHash == "" || t.Conversation.Channel == "" || t.Conversation.ID == "" {
		return fmt.Errorf("create mcp token: %w", conch.Errorf(conch.KindInvalid, "an MCP token needs an id, a hash and a conversation"))
	}
	created := t.CreatedAt
	if created.IsZero() {
		created = d.now()
	}
	if _, err := d.execSQL(ctx, sqlCreateMCPToken, t.ID, t.SecretHash, string(t.Conversation.Channel), t.Conversation.ID,
		t.Label, millis(created), nullMillis(t.ExpiresAt)); err != nil {
		return fmt.Errorf("create mcp token: %w", err)
	}
	return nil
}

func scanMCPToken(row scanner) (conch.MCPToken, error) {
	var t conch.MCPToken
	var created int64
	var expires, used sql.NullInt64
	if err := row.Scan(&t.ID, &t.SecretHash, &t.Conversation.Channel, &t.Conversation.ID, &t.Label, &created, &expires, &used); err != nil {
		return t, err
	}
	t.CreatedAt, t.ExpiresAt, t.LastUsed = fromMillis(created), fromNullMillis(expires), fromNullMillis(used)
	return t, nil
}

// MCPToken implements conch.MCPTokenStore.
func (d *DB) MCPToken(ctx context.Context, id string) (conch.MCPToken, bool, error) {
	t, err := scanMCPToken(d.r.QueryRowContext(ctx, sqlMCPToken, id))
	if errors.Is(err, sql.ErrNoRows) {
		return conch.MCPToken{}, false, nil
	}
	if err != nil {
		return conch.MCPToken{}, false, fmt.Errorf("mcp token: %w", err)
	}
	return t, true, nil
}

// MCPTokens implements conch.MCPTokenStore.
func (d *DB) MCPTokens(ctx context.Context) ([]conch.MCPToken, error) {
	rows, err := d.r.QueryContext(ctx, sqlMCPTokens)
	if err != nil {
		return nil, fmt.Errorf("mcp tokens: %w", err)
	}
	defer rows.Close()
	var out []conch.MCPToken
	for rows.Next() {
		t, err := scanMCPToken(rows)
		if err != nil {
			return nil, fmt.Errorf("mcp tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mcp tokens: %w", err)
	}
	return out, nil
}

// RevokeMCPToken implements conch.MCPTokenStore.
func (d *DB) RevokeMCPToken(ctx context.Context, id string) (bool, error) {
	res, err := d.execSQL(ctx, sqlRevokeMCP, id)
	if err != nil {
		return false, fmt.Errorf("revoke mcp token: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("revoke mcp token: %w", err)
	}
	return n == 1, nil
}

// TouchMCPToken implements conch.MCPTokenStore.
func (d *DB) TouchMCPToken(ctx context.Context, id string, now time.Time) error {
	if _, err := d.execSQL(ctx, sqlTouchMCP, millis(now), id); err != nil {
		return fmt.Errorf("touch mcp token: %w", err)
	}
	return nil
}
