package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"conch"
)

// Handled markers and sent ids (migration 0011): rows that expire, deleted
// by the janitor (RunJanitor) with the expired web login tokens.
const (
	// An expired marker not yet pruned counts as absent: marking it again
	// renews it and reports first.
	sqlMark = `INSERT INTO markers (scope, id, marked_at, expires_at) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (scope, id) DO UPDATE SET marked_at = excluded.marked_at, expires_at = excluded.expires_at
		WHERE markers.expires_at <= excluded.marked_at`
	sqlRecordSent = `INSERT INTO sent_ids (channel, id, conversation, sent_at, expires_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (channel, id) DO UPDATE SET conversation = excluded.conversation,
			sent_at = excluded.sent_at, expires_at = excluded.expires_at`
	sqlSentConversation = `SELECT conversation FROM sent_ids WHERE channel = ? AND id = ? AND expires_at > ?`
	sqlPruneMarkers     = `DELETE FROM markers WHERE expires_at <= ?`
	sqlPruneSent        = `DELETE FROM sent_ids WHERE expires_at <= ?`
)

// Mark implements conch.MarkerStore.
func (d *DB) Mark(ctx context.Context, scope, id string) (bool, error) {
	if scope == "" || id == "" {
		return false, fmt.Errorf("mark: %w", conch.Errorf(conch.KindInvalid, "marker scope and id must not be empty"))
	}
	now := d.now()
	res, err := d.execSQL(ctx, sqlMark, scope, id, millis(now), millis(now.Add(conch.MarkerTTL)))
	if err != nil {
		return false, fmt.Errorf("mark %s %q: %w", scope, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("mark %s %q: %w", scope, id, err)
	}
	return n == 1, nil
}

// RecordSent implements conch.SentStore.
func (d *DB) RecordSent(ctx context.Context, key conch.ConversationKey, id string) error {
	if key.Channel == "" || id == "" {
		return fmt.Errorf("record sent: %w", conch.Errorf(conch.KindInvalid, "channel and id must not be empty"))
	}
	now := d.now()
	if _, err := d.execSQL(ctx, sqlRecordSent, string(key.Channel), id, key.ID, millis(now), millis(now.Add(conch.SentTTL))); err != nil {
		return fmt.Errorf("record sent %q: %w", id, err)
	}
	return nil
}

// SentConversation implements conch.SentStore.
func (d *DB) SentConversation(ctx context.Context, channel conch.ChannelName, id string) (conch.ConversationKey, bool, error) {
	var conv string
	err := d.r.QueryRowContext(ctx, sqlSentConversation, string(channel), id, millis(d.now())).Scan(&conv)
	if errors.Is(err, sql.ErrNoRows) {
		return conch.ConversationKey{}, false, nil
	}
	if err != nil {
		return conch.ConversationKey{}, false, fmt.Errorf("sent %q: %w", id, err)
	}
	return conch.ConversationKey{Channel: channel, ID: conv}, true, nil
}

// Prune deletes the markers, sent ids, web login tokens and MCP tokens
// expired at now and reports how many rows went.
func (d *DB) Prune(ctx context.Context, now time.Time) (int64, error) {
	var total int64
	for _, q := range []string{sqlPruneMarkers, sqlPruneSent, sqlPruneWebLogins, sqlPruneMCP} {
		res, err := d.execSQL(ctx, q, millis(now))
		if err != nil {
			return total, fmt.Errorf("prune: %w", err)
		}
		n, _ := res.RowsAffected() // modernc always knows it
		total += n
	}
	return total, nil
}

// JanitorInterval is how often RunJanitor prunes.
const JanitorInterval = time.Hour

// RunJanitor prunes expired rows now and then every interval until ctx
// ends. Failures are logged: the next round tries again.
func (d *DB) RunJanitor(ctx context.Context, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		interval = JanitorInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := d.Prune(ctx, d.now())
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("store janitor: prune failed", "err", err)
		case n > 0:
			log.Debug("store janitor: pruned expired rows", "rows", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

var (
	_ conch.MarkerStore = (*DB)(nil)
	_ conch.SentStore   = (*DB)(nil)
)
