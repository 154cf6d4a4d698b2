package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"conch"
)

var _ conch.ContextStore = (*DB)(nil)

const (
	// sqlHistoryHead: the conversation, its generation and its newest
	// summary of that generation (id 0 and zeros when none).
	sqlHistoryHead = `SELECT c.id, c.generation, COALESCE(s.id, 0), COALESCE(s.summary, ''),
		COALESCE(s.through_turn, 0), COALESCE(s.through_message, 0), COALESCE(s.messages, 0)
		FROM conversations c
		LEFT JOIN context_summaries s ON s.id = (SELECT max(x.id) FROM context_summaries x
			WHERE x.conversation_id = c.id AND x.generation = c.generation)
		WHERE c.channel = ? AND c.key_id = ?`

	// sqlModelHistory is sqlHistory of one conversation and generation after
	// a position (turn, message) and through a turn: a turn's view never
	// holds a later turn's messages. Pending turns' messages come with their
	// status: ModelHistory leaves them out (they are queued, not yet part of
	// the conversation) and reads from them again next time.
	sqlModelHistory = `SELECT m.role, m.text, m.tool_calls, m.tool_result,
		CASE WHEN m.role = 'user' AND m.note = 0 THEN t.attachments ELSE '' END, m.note, m.turn_id, m.id, t.status
		FROM messages m
		JOIN turns t ON t.id = m.turn_id
		WHERE m.conversation_id = ? AND m.generation = ? AND (m.turn_id, m.id) > (?, ?) AND m.turn_id <= ?
		ORDER BY m.turn_id, m.id`

	sqlAddSummary = `INSERT INTO context_summaries (conversation_id, generation, through_turn, through_message,
		summary, messages, created_at)
		SELECT id, generation, ?, ?, ?, ?, ? FROM conversations WHERE channel = ? AND key_id = ?`

	// WHERE true: an upsert's SELECT needs a WHERE before ON CONFLICT.
	sqlSetContextUse = `INSERT INTO context_use (conversation_id, generation, tokens, context_window, updated_at)
		SELECT id, generation, ?, ?, ? FROM conversations WHERE channel = ? AND key_id = ? AND true
		ON CONFLICT (conversation_id) DO UPDATE SET generation = excluded.generation,
			tokens = excluded.tokens, context_window = excluded.context_window, updated_at = excluded.updated_at`

	sqlContextStatus = `SELECT
		COALESCE((SELECT u.tokens FROM context_use u WHERE u.conversation_id = c.id AND u.generation = c.generation), 0),
		COALESCE((SELECT u.context_window FROM context_use u WHERE u.conversation_id = c.id AND u.generation = c.generation), 0),
		(SELECT COUNT(*) FROM context_summaries s WHERE s.conversation_id = c.id AND s.generation = c.generation)
		FROM conversations c WHERE c.channel = ? AND c.key_id = ?`
)

// ModelHistory returns what the model sees of a conversation in turn
// through: its newest summary since the last reset and the started turns'
// messages after it, up to and including through's (0: every turn). Without
// a summary and with through 0 it holds the same messages as History.
//
// The turns that had ended when a view was read are kept (historyCache):
// the next call reads only from the first turn that had not, so turn N does
// not cost O(N). The caller owns what it gets.
func (d *DB) ModelHistory(ctx context.Context, key conch.ConversationKey, through conch.TurnID) (conch.ModelHistory, error) {
	var h conch.ModelHistory
	if err := validKey(key); err != nil {
		return h, fmt.Errorf("model history: %w", err)
	}
	var conv, gen, summary int64
	s := &h.Summary
	err := d.rs.historyHead.QueryRowContext(ctx, key.Channel, key.ID).Scan(&conv, &gen, &summary,
		&s.Text, &s.Through.Turn, &s.Through.Message, &s.Messages)
	if errors.Is(err, sql.ErrNoRows) {
		return h, nil // an unknown conversation has no history
	}
	if err != nil {
		return h, fmt.Errorf("model history of %s: %w", key, err)
	}
	last := int64(through)
	if last <= 0 {
		last = math.MaxInt64
	}
	msgs, pos, from, tok, cached := d.history.begin(conv, gen, summary, last)
	keep := false
	stable := int64(math.MaxInt64)
	defer func() { d.history.end(tok, keep, conv, gen, summary, last, stable, h.Messages, h.Pos) }()
	// Read after the summary, and from the first turn not kept.
	after := s.Through
	if cached && conch.TurnID(from) > after.Turn {
		after = conch.HistoryPos{Turn: conch.TurnID(from)}
	}
	rows, err := d.rs.modelHistory.QueryContext(ctx, conv, gen, after.Turn, after.Message, last)
	if err != nil {
		return h, fmt.Errorf("model history of %s: %w", key, err)
	}
	defer rows.Close()
	var lastTurn int64
	if n := len(pos); n > 0 {
		lastTurn = int64(pos[n-1].Turn)
	}
	for rows.Next() {
		var m conch.Message
		var p conch.HistoryPos
		var calls, result sql.NullString
		var atts, status string
		if err := rows.Scan(&m.Role, &m.Text, &calls, &result, &atts, &m.Note, &p.Turn, &p.Message, &status); err != nil {
			return h, fmt.Errorf("model history of %s: %w", key, err)
		}
		lastTurn = max(lastTurn, int64(p.Turn))
		switch conch.TurnStatus(status) {
		case conch.TurnPending:
			// Queued behind the turn that asks: not part of the view yet.
			stable = min(stable, int64(p.Turn))
			continue
		case conch.TurnRunning:
			stable = min(stable, int64(p.Turn))
		}
		if atts != "" {
			as, err := decodeAttachments(atts)
			if err != nil {
				return h, fmt.Errorf("model history of %s: %w", key, err)
			}
			m.Text = joinText(m.Text, conch.DescribeAttachments(as))
			m.Images = attachmentImages(as)
		}
		if err := decodeMessage(&m, calls, result); err != nil {
			return h, fmt.Errorf("model history of %s: %w", key, err)
		}
		msgs = append(msgs, m)
		pos = append(pos, p)
	}
	if err := rows.Err(); err != nil {
		return h, fmt.Errorf("model history of %s: %w", key, err)
	}
	// A turn after the newest seen may still come (ids only grow).
	stable = min(stable, lastTurn+1)
	if !cached && len(pos) == 0 {
		stable = 0
	}
	h.Messages, h.Pos = msgs, pos
	keep = true
	return h, nil
}

// AddSummary stores a summary of the conversation's history through
// s.Through, in one statement: either it is there with its range or not at
// all. An unknown conversation is KindNotFound.
func (d *DB) AddSummary(ctx context.Context, key conch.ConversationKey, s conch.Summary) error {
	if err := validKey(key); err != nil {
		return fmt.Errorf("add summary: %w", err)
	}
	if s.Text == "" || s.Through.Message <= 0 {
		return fmt.Errorf("add summary to %s: %w", key, conch.Errorf(conch.KindInvalid, "a summary needs text and the message it runs through"))
	}
	res, err := d.exec(ctx, d.ws.addSummary, s.Through.Turn, s.Through.Message, s.Text, s.Messages, millis(d.now()), key.Channel, key.ID)
	err = d.diskFull(err)
	if err != nil {
		return fmt.Errorf("add summary to %s: %w", key, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("add summary to %s: %w", key, err)
	} else if n == 0 {
		return fmt.Errorf("add summary to %s: %w", key, conch.Errorf(conch.KindNotFound, "conversation %s does not exist", key))
	}
	return nil
}

// RecordContextUse keeps the size of the conversation's newest request plus
// its answer. An unknown conversation is ignored.
func (d *DB) RecordContextUse(ctx context.Context, key conch.ConversationKey, u conch.ContextUse) error {
	args, err := d.contextUseArgs(key, u)
	if err != nil {
		return err
	}
	if _, err := d.exec(ctx, d.ws.setContextUse, args...); err != nil {
		return fmt.Errorf("record context use of %s: %w", key, err)
	}
	return nil
}

// contextUseArgs are the setContextUse statement's arguments.
func (d *DB) contextUseArgs(key conch.ConversationKey, u conch.ContextUse) ([]any, error) {
	if err := validKey(key); err != nil {
		return nil, fmt.Errorf("record context use: %w", err)
	}
	return []any{u.InputTokens + u.OutputTokens, u.Window, millis(d.now()), key.Channel, key.ID}, nil
}

// ContextStatus reports the newest request's size and the compactions since
// the last reset; zero for an unknown conversation.
func (d *DB) ContextStatus(ctx context.Context, key conch.ConversationKey) (conch.ContextStatus, error) {
	var s conch.ContextStatus
	if err := validKey(key); err != nil {
		return s, fmt.Errorf("context status: %w", err)
	}
	err := d.rs.contextStatus.QueryRowContext(ctx, key.Channel, key.ID).Scan(&s.Tokens, &s.Window, &s.Compactions)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return s, fmt.Errorf("context status of %s: %w", key, err)
	}
	return s, nil
}
