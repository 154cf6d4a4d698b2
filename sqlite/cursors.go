package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"conch"
)

const (
	sqlCursor    = `SELECT value FROM cursors WHERE name = ?`
	sqlSetCursor = `INSERT INTO cursors (name, value, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`
	sqlDeleteCursor = `DELETE FROM cursors WHERE name = ?`
)

// Cursor returns the named channel position, "" when none is stored.
func (d *DB) Cursor(ctx context.Context, name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("cursor: %w", conch.Errorf(conch.KindInvalid, "cursor name is empty"))
	}
	var v string
	err := d.rs.cursor.QueryRowContext(ctx, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("cursor %q: %w", name, err)
	}
	return v, nil
}

// SetCursor stores the named channel position. Storing "" is the same as
// having none: the row is deleted.
func (d *DB) SetCursor(ctx context.Context, name, value string) error {
	if name == "" {
		return fmt.Errorf("set cursor: %w", conch.Errorf(conch.KindInvalid, "cursor name is empty"))
	}
	if value == "" {
		if _, err := d.exec(ctx, d.ws.deleteCursor, name); err != nil {
			return fmt.Errorf("delete cursor %q: %w", name, err)
		}
		return nil
	}
	if _, err := d.exec(ctx, d.ws.setCursor, name, value, millis(d.now())); err != nil {
		return fmt.Errorf("set cursor %q: %w", name, d.diskFull(err))
	}
	return nil
}

const sqlCursorsWithPrefix = `SELECT name, value FROM cursors WHERE substr(name, 1, length(?1)) = ?1 ORDER BY name`

// CursorsWithPrefix returns every cursor whose name starts with prefix.
func (d *DB) CursorsWithPrefix(ctx context.Context, prefix string) (map[string]string, error) {
	rows, err := d.r.QueryContext(ctx, sqlCursorsWithPrefix, prefix)
	if err != nil {
		return nil, fmt.Errorf("cursors %q…: %w", prefix, err)
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("cursors %q…: %w", prefix, err)
		}
		m[k] = v
	}
	return m, rows.Err()
}
