package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"conch"
)

const (
	sqlAudit = `INSERT INTO audit (at, kind, conversation_channel, conversation_id, detail) VALUES (?, ?, ?, ?, ?)`
	// sqlAuditSince returns the oldest events at or after a time first.
	sqlAuditSince = `SELECT at, kind, conversation_channel, conversation_id, detail FROM audit
		WHERE at >= ? ORDER BY at, id LIMIT ?`
)

// Audit records an audit event. Detail must be a JSON object (empty means
// {}); a zero At is the current time; the conversation may be zero.
func (d *DB) Audit(ctx context.Context, ev conch.AuditEvent) error {
	if ev.Kind == "" {
		return fmt.Errorf("audit: %w", conch.Errorf(conch.KindInvalid, "audit event has no kind"))
	}
	detail, err := jsonObject("audit detail", ev.Detail)
	if err != nil {
		return fmt.Errorf("audit %s: %w", ev.Kind, err)
	}
	if ev.At.IsZero() {
		ev.At = d.now()
	}
	if _, err := d.exec(ctx, d.ws.audit, millis(ev.At), ev.Kind, ev.Conversation.Channel, ev.Conversation.ID, detail); err != nil {
		return fmt.Errorf("audit %s: %w", ev.Kind, err)
	}
	return nil
}

// AuditEvents returns up to limit events at or after since, oldest first.
func (d *DB) AuditEvents(ctx context.Context, since time.Time, limit int) ([]conch.AuditEvent, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("audit events: %w", conch.Errorf(conch.KindInvalid, "limit must be positive, got %d", limit))
	}
	var from int64
	if !since.IsZero() {
		from = millis(since)
	}
	rows, err := d.rs.auditSince.QueryContext(ctx, from, limit)
	if err != nil {
		return nil, fmt.Errorf("audit events: %w", err)
	}
	defer rows.Close()
	var evs []conch.AuditEvent
	for rows.Next() {
		var ev conch.AuditEvent
		var at int64
		var detail string
		if err := rows.Scan(&at, &ev.Kind, &ev.Conversation.Channel, &ev.Conversation.ID, &detail); err != nil {
			return nil, fmt.Errorf("audit events: %w", err)
		}
		ev.At, ev.Detail = fromMillis(at), json.RawMessage(detail)
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit events: %w", err)
	}
	return evs, nil
}
