package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"conch"
)

var _ conch.ScheduleStore = (*DB)(nil)

const (
	sqlAddSchedule = `INSERT INTO schedules (id, conversation, kind, spec, message, next_at, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`
	sqlSchedulesOf = `SELECT id, conversation, kind, spec, message, next_at, created_at FROM schedules
		WHERE conversation = ? ORDER BY created_at, id`
	sqlAllSchedules = `SELECT id, conversation, kind, spec, message, next_at, created_at FROM schedules
		ORDER BY created_at, id`
	sqlDeleteSchedule  = `DELETE FROM schedules WHERE id = ?`
	sqlSetScheduleNext = `UPDATE schedules SET next_at = ? WHERE id = ?`
)

// AddSchedule implements conch.ScheduleStore.
func (d *DB) AddSchedule(ctx context.Context, e conch.ScheduleEntry) error {
	var next any
	if !e.Next.IsZero() {
		next = millis(e.Next)
	}
	if _, err := d.execSQL(ctx, sqlAddSchedule, e.ID, e.Key.String(), string(e.Kind), e.Spec, e.Message, next, millis(e.CreatedAt)); err != nil {
		return fmt.Errorf("add schedule %s: %w", e.ID, err)
	}
	return nil
}

// Schedules implements conch.ScheduleStore.
func (d *DB) Schedules(ctx context.Context, key conch.ConversationKey) ([]conch.ScheduleEntry, error) {
	var rows *sql.Rows
	var err error
	if key.IsZero() {
		rows, err = d.r.QueryContext(ctx, sqlAllSchedules)
	} else {
		rows, err = d.r.QueryContext(ctx, sqlSchedulesOf, key.String())
	}
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	defer rows.Close()
	var out []conch.ScheduleEntry
	for rows.Next() {
		var e conch.ScheduleEntry
		var conv, kind string
		var next sql.NullInt64
		var created int64
		if err := rows.Scan(&e.ID, &conv, &kind, &e.Spec, &e.Message, &next, &created); err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		if e.Key, err = conch.ParseConversationKey(conv); err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		e.Kind = conch.ScheduleKind(kind)
		if next.Valid {
			e.Next = fromMillis(next.Int64)
		}
		e.CreatedAt = fromMillis(created)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// DeleteSchedule implements conch.ScheduleStore.
func (d *DB) DeleteSchedule(ctx context.Context, id string) (bool, error) {
	res, err := d.execSQL(ctx, sqlDeleteSchedule, id)
	if err != nil {
		return false, fmt.Errorf("delete schedule %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// SetScheduleNext implements conch.ScheduleStore.
func (d *DB) SetScheduleNext(ctx context.Context, id string, next time.Time) error {
	if _, err := d.execSQL(ctx, sqlSetScheduleNext, millis(next), id); err != nil {
		return fmt.Errorf("move schedule %s: %w", id, err)
	}
	return nil
}
