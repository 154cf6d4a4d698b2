package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"conch"
)

// The event log: the kept events of each conversation in Seq order (see
// conch.Event). The gateway's hub assigns Seq and appends in order.

const (
	sqlAppendEvent = `INSERT INTO events (conversation, seq, turn_id, type, data, at) VALUES (?, ?, ?, ?, ?, ?)`
	sqlEventsSince = `SELECT seq, turn_id, type, data, at FROM events
		WHERE conversation = ? AND seq > ? ORDER BY seq LIMIT ?`
	sqlLastEventSeq = `SELECT coalesce(max(seq), 0) FROM events WHERE conversation = ?`
)

// AppendEvent stores a kept event. Seq must be the conversation's next.
func (d *DB) AppendEvent(ctx context.Context, ev conch.Event) error {
	args, err := d.eventArgs(ev)
	if err != nil {
		return err
	}
	if _, err := d.exec(ctx, d.ws.appendEvent, args...); err != nil {
		return fmt.Errorf("append %s event %d of %s: %w", ev.Data.Type(), ev.Seq, ev.Key, err)
	}
	return nil
}

// AppendEventAsync queues ev to be kept and returns at once; done receives
// the outcome when its write group is written (on the goroutine that wrote
// it: done must not block; groups may report out of order). ev is in the
// one queue of every change, so a change queued after it is never on disk
// before it. An event that cannot be queued (no data, no Seq, a bad key) is
// the returned error and done is not called.
func (d *DB) AppendEventAsync(ev conch.Event, done func(error)) error {
	args, err := d.eventArgs(ev)
	if err != nil {
		return err
	}
	st := d.ws.appendEvent
	d.enqueueAsync(&writeReq{ctx: context.Background(), single: true,
		fn: func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.StmtContext(ctx, st).ExecContext(ctx, args...)
			return err
		},
		auto: func(ctx context.Context) error {
			_, err := st.ExecContext(ctx, args...)
			return err
		},
		done: func(err error) {
			if err != nil {
				err = fmt.Errorf("append %s event %d of %s: %w", ev.Data.Type(), ev.Seq, ev.Key, d.diskFull(err))
			}
			done(err)
		}})
	return nil
}

// eventArgs are the appendEvent statement's arguments for ev.
func (d *DB) eventArgs(ev conch.Event) ([]any, error) {
	if err := validKey(ev.Key); err != nil {
		return nil, fmt.Errorf("append event: %w", err)
	}
	if ev.Data == nil || ev.Seq <= 0 {
		return nil, fmt.Errorf("append event: %w", conch.Errorf(conch.KindInvalid, "event of %s without data or seq", ev.Key))
	}
	b, err := json.Marshal(ev.Data)
	if err != nil {
		return nil, fmt.Errorf("append %s event: %w", ev.Data.Type(), err)
	}
	at := ev.At
	if at.IsZero() {
		at = d.now()
	}
	return []any{ev.Key.String(), ev.Seq, ev.Turn, ev.Data.Type(), string(b), millis(at)}, nil
}

// EventsSince returns the conversation's kept events with Seq > after,
// oldest first, at most limit.
func (d *DB) EventsSince(ctx context.Context, key conch.ConversationKey, after int64, limit int) ([]conch.Event, error) {
	if err := validKey(key); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	if limit <= 0 {
		limit = 1000
	}
	rows, err := d.rs.eventsSince.QueryContext(ctx, key.String(), after, limit)
	if err != nil {
		return nil, fmt.Errorf("events of %s: %w", key, err)
	}
	defer rows.Close()
	var evs []conch.Event
	for rows.Next() {
		ev := conch.Event{Key: key}
		var typ, data string
		var at int64
		if err := rows.Scan(&ev.Seq, &ev.Turn, &typ, &data, &at); err != nil {
			return nil, fmt.Errorf("events of %s: %w", key, err)
		}
		if ev.Data, err = conch.DecodeEventData(typ, json.RawMessage(data)); err != nil {
			return nil, fmt.Errorf("events of %s, seq %d: %w", key, ev.Seq, err)
		}
		ev.At = fromMillis(at)
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events of %s: %w", key, err)
	}
	return evs, nil
}

// LastEventSeq is the Seq of the conversation's newest kept event, 0 for none.
func (d *DB) LastEventSeq(ctx context.Context, key conch.ConversationKey) (int64, error) {
	var seq int64
	if err := d.rs.lastEventSeq.QueryRowContext(ctx, key.String()).Scan(&seq); err != nil {
		return 0, fmt.Errorf("last event of %s: %w", key, err)
	}
	return seq, nil
}
