package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"conch"
)

// sqlTurnMessages: one turn's messages in order, through messages_history
// (conversation, generation and turn taken from the turn).
const sqlTurnMessages = `SELECT m.role, m.text, m.tool_calls, m.tool_result, m.note, m.created_at
	FROM turns t
	CROSS JOIN messages m ON m.conversation_id = t.conversation_id AND m.generation = t.generation AND m.turn_id = t.id
	WHERE t.id = ?
	ORDER BY m.id`

// TurnMessages returns one turn's messages in order, the user message first,
// whatever the conversation's generation (for transcripts).
func (d *DB) TurnMessages(ctx context.Context, id conch.TurnID) ([]conch.TurnMessage, error) {
	rows, err := d.rs.turnMessages.QueryContext(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("messages of turn %d: %w", id, err)
	}
	defer rows.Close()
	var ms []conch.TurnMessage
	for rows.Next() {
		var m conch.TurnMessage
		var calls, result sql.NullString
		var at int64
		if err := rows.Scan(&m.Role, &m.Text, &calls, &result, &m.Note, &at); err != nil {
			return nil, fmt.Errorf("messages of turn %d: %w", id, err)
		}
		if err := decodeMessage(&m.Message, calls, result); err != nil {
			return nil, fmt.Errorf("messages of turn %d: %w", id, err)
		}
		m.At = fromMillis(at)
		ms = append(ms, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("messages of turn %d: %w", id, err)
	}
	return ms, nil
}
