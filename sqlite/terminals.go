package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"conch"
)

var _ conch.TerminalRegistry = (*DB)(nil)

const (
	sqlSaveTerminal = `INSERT INTO terminals (scope, tty, session, command, shell, nonce, opened_at, mark, seen, observed, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (scope, tty) DO UPDATE SET session = excluded.session, command = excluded.command,
			shell = excluded.shell, nonce = excluded.nonce, opened_at = excluded.opened_at, mark = excluded.mark, seen = excluded.seen,
			observed = excluded.observed, updated_at = excluded.updated_at`
	sqlLoadTerminals = `SELECT tty, session, command, shell, nonce, opened_at, mark, seen, observed FROM terminals
		WHERE scope = ? ORDER BY tty`
	sqlDeleteTerminal = `DELETE FROM terminals WHERE scope = ? AND tty = ?`
)

// SaveTerminal implements conch.TerminalRegistry.
func (d *DB) SaveTerminal(ctx context.Context, scope string, r conch.TerminalRecord) error {
	if scope == "" {
		return fmt.Errorf("save terminal: %w", conch.Errorf(conch.KindInvalid, "terminal scope is empty"))
	}
	seen := r.Seen
	if seen == nil {
		seen = []string{}
	}
	js, err := json.Marshal(seen)
	if err != nil {
		return fmt.Errorf("save terminal %d: %w", r.TTY, err)
	}
	if _, err := d.execSQL(ctx, sqlSaveTerminal, scope, r.TTY, r.Session, r.Command, boolInt(r.Shell), r.Nonce,
		millis(r.OpenedAt), r.Mark, string(js), boolInt(r.Observed), millis(d.now())); err != nil {
		return fmt.Errorf("save terminal %d: %w", r.TTY, err)
	}
	return nil
}

// LoadTerminals implements conch.TerminalRegistry: the scope's records in TTY order.
func (d *DB) LoadTerminals(ctx context.Context, scope string) ([]conch.TerminalRecord, error) {
	rows, err := d.r.QueryContext(ctx, sqlLoadTerminals, scope)
	if err != nil {
		return nil, fmt.Errorf("load terminals: %w", err)
	}
	defer rows.Close()
	var out []conch.TerminalRecord
	for rows.Next() {
		var r conch.TerminalRecord
		var shell, observed int
		var opened int64
		var seen string
		if err := rows.Scan(&r.TTY, &r.Session, &r.Command, &shell, &r.Nonce, &opened, &r.Mark, &seen, &observed); err != nil {
			return nil, fmt.Errorf("load terminals: %w", err)
		}
		r.Shell, r.Observed = shell != 0, observed != 0
		r.OpenedAt = fromMillis(opened)
		if err := json.Unmarshal([]byte(seen), &r.Seen); err != nil {
			return nil, fmt.Errorf("load terminal %d: seen: %w", r.TTY, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load terminals: %w", err)
	}
	return out, nil
}

// DeleteTerminal implements conch.TerminalRegistry.
func (d *DB) DeleteTerminal(ctx context.Context, scope string, tty int) error {
	if _, err := d.execSQL(ctx, sqlDeleteTerminal, scope, tty); err != nil {
		return fmt.Errorf("delete terminal %d: %w", tty, err)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
