package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"conch"
)

const (
	// sqlConversationSummary is one row per conversation: its newest
	// message, the sender of its newest turn, whether a turn runs, how many
	// wait, its newest error (the gateway stops a turn that failed with the
	// reason "error_<kind>"), how many turns it had and what its model calls
	// used (kept on its row by triggers: migration 0015). Every subquery is
	// an index seek on (conversation_id, …). sqlConversationSummaries has
	// every conversation in key order (the walk of the unique index; the
	// caller sorts by last activity, which no index holds);
	// sqlConversationSummaryOf one conversation.
	sqlConversationSummary = `SELECT c.channel, c.key_id, c.created_at,
		coalesce(m.role, ''), coalesce(m.text, ''), m.created_at,
		coalesce((SELECT t.sender FROM turns t WHERE t.conversation_id = c.id ORDER BY t.id DESC LIMIT 1), ''),
		EXISTS (SELECT 1 FROM turns t WHERE t.conversation_id = c.id AND t.status = 'running'),
		(SELECT count(*) FROM turns t WHERE t.conversation_id = c.id AND t.status = 'pending'),
		coalesce((SELECT t.stopped_reason FROM turns t
			WHERE t.conversation_id = c.id AND t.status = 'stopped'
				AND substr(t.stopped_reason, 1, 6) = 'error_'
			ORDER BY t.id DESC LIMIT 1), ''),
		c.turn_count, c.usage_tokens, c.usage_cost_usd
		FROM conversations c
		LEFT JOIN messages m ON m.id = (SELECT max(l.id) FROM messages l WHERE l.conversation_id = c.id)`
	sqlConversationSummaries = sqlConversationSummary + ` ORDER BY c.channel, c.key_id`
	sqlConversationSummaryOf = sqlConversationSummary + ` WHERE c.channel = ? AND c.key_id = ?`

	// sqlConversationTurns: a conversation's turns, newest first, every
	// generation.
	sqlConversationTurns = sqlSelectTurn + ` WHERE t.conversation_id =
		(SELECT id FROM conversations WHERE channel = ? AND key_id = ?)
		ORDER BY t.id DESC LIMIT ?`

	// sqlAuditAfter: audit records after an id, oldest first.
	sqlAuditAfter = `SELECT id, at, kind, conversation_channel, conversation_id, detail FROM audit
		WHERE id > ? ORDER BY id LIMIT ?`
)

var _ conch.ReadModel = (*DB)(nil)

// ConversationSummaries lists every conversation (or, with keys, those of
// them that exist) with its state and last message, most recently active
// first (a conversation without messages is as old as its creation). Turns counts all turns, also those before a
// reset; LastError is the reason of the newest turn stopped by an error.
func (d *DB) ConversationSummaries(ctx context.Context, keys ...conch.ConversationKey) ([]conch.ConversationSummary, error) {
	var ss []conch.ConversationSummary
	read := func(rows *sql.Rows, err error) error {
		if err != nil {
			return fmt.Errorf("conversation summaries: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			s, err := scanSummary(rows)
			if err != nil {
				return fmt.Errorf("conversation summaries: %w", err)
			}
			ss = append(ss, s)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("conversation summaries: %w", err)
		}
		return nil
	}
	if len(keys) == 0 {
		if err := read(d.rs.summaries.QueryContext(ctx)); err != nil {
			return nil, err
		}
	}
	for _, k := range keys {
		if err := read(d.rs.summaryOf.QueryContext(ctx, k.Channel, k.ID)); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(ss, func(a, b conch.ConversationSummary) int {
		if c := b.LastAt.Compare(a.LastAt); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Key.Channel, b.Key.Channel); c != 0 {
			return c
		}
		return cmp.Compare(a.Key.ID, b.Key.ID)
	})
	return ss, nil
}

// scanSummary reads a row of sqlConversationSummary.
func scanSummary(rows *sql.Rows) (conch.ConversationSummary, error) {
	var s conch.ConversationSummary
	var created int64
	var lastAt sql.NullInt64
	var running bool
	if err := rows.Scan(&s.Key.Channel, &s.Key.ID, &created, &s.LastRole, &s.LastMessage, &lastAt,
		&s.LastSender, &running, &s.Pending, &s.LastError, &s.Turns, &s.Tokens, &s.CostUSD); err != nil {
		return s, err
	}
	s.LastAt = fromMillis(created)
	if lastAt.Valid {
		s.LastAt = fromMillis(lastAt.Int64)
	}
	switch {
	case running:
		s.State = conch.ConversationRunning
	case s.Pending > 0:
		s.State = conch.ConversationQueued
	default:
		s.State = conch.ConversationIdle
	}
	return s, nil
}

// Turns returns the conversation's turns, newest first, at most limit, with
// their whole Inbound. An unknown conversation has none.
func (d *DB) Turns(ctx context.Context, key conch.ConversationKey, limit int) ([]conch.Turn, error) {
	if err := validKey(key); err != nil {
		return nil, fmt.Errorf("turns of %s: %w", key, err)
	}
	if limit <= 0 {
		return nil, fmt.Errorf("turns of %s: %w", key, conch.Errorf(conch.KindInvalid, "limit must be positive, got %d", limit))
	}
	rows, err := d.rs.conversationTurns.QueryContext(ctx, key.Channel, key.ID, limit)
	if err != nil {
		return nil, fmt.Errorf("turns of %s: %w", key, err)
	}
	defer rows.Close()
	var ts []conch.Turn
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return nil, fmt.Errorf("turns of %s: %w", key, err)
		}
		ts = append(ts, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("turns of %s: %w", key, err)
	}
	return ts, nil
}

// AuditSince returns up to limit audit records with an id above after,
// oldest first: a reader keeps the last id it saw and asks again.
func (d *DB) AuditSince(ctx context.Context, after int64, limit int) ([]conch.AuditRecord, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("audit since %d: %w", after, conch.Errorf(conch.KindInvalid, "limit must be positive, got %d", limit))
	}
	rows, err := d.rs.auditAfter.QueryContext(ctx, after, limit)
	if err != nil {
		return nil, fmt.Errorf("audit since %d: %w", after, err)
	}
	defer rows.Close()
	var rs []conch.AuditRecord
	for rows.Next() {
		var r conch.AuditRecord
		var at int64
		var detail string
		if err := rows.Scan(&r.ID, &at, &r.Kind, &r.Conversation.Channel, &r.Conversation.ID, &detail); err != nil {
			return nil, fmt.Errorf("audit since %d: %w", after, err)
		}
		r.At, r.Detail = fromMillis(at), json.RawMessage(detail)
		rs = append(rs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit since %d: %w", after, err)
	}
	return rs, nil
}
