package matrix

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Encrypted events that cannot be decrypted yet are kept in the store: by a
// build with encryption while the room key has not arrived, by a build
// without it until a build with it runs. Both builds share this table, so
// switching builds loses nothing.

// upgrades holds the schema of conch's own Matrix tables, versioned by
// dbutil in conch_matrix_version like mautrix's crypto_ and mx_ tables.
//
//go:embed upgrades/*.sql
var upgrades embed.FS

// maxPendingAge is how long an event waits for its room key across restarts.
const maxPendingAge = 7 * 24 * time.Hour

const (
	sqlAddPending = `INSERT INTO conch_matrix_pending (event_id, room_id, session_id, event, added_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (event_id) DO NOTHING`
	sqlDeletePending    = `DELETE FROM conch_matrix_pending WHERE event_id = $1`
	sqlPendingBySession = `SELECT event, added_at FROM conch_matrix_pending WHERE session_id = $1 ORDER BY added_at`
	sqlAllPending       = `SELECT event, added_at FROM conch_matrix_pending ORDER BY added_at`
)

// pendingStore is the table of encrypted events waiting to be decrypted.
type pendingStore struct {
	db  *dbutil.Database
	log zerolog.Logger
}

func openPending(ctx context.Context, wrapped *dbutil.Database, log, mlog zerolog.Logger) (*pendingStore, error) {
	db := wrapped.Child("conch_matrix_version",
		dbutil.BuildUpgradeTable().WithFSPath(upgrades, "upgrades").Finish(),
		dbutil.ZeroLogger(log.With().Str("db_section", "conch_matrix").Logger()))
	if err := db.Upgrade(ctx); err != nil {
		return nil, fmt.Errorf("matrix pending events: upgrade: %w", err)
	}
	return &pendingStore{db: db, log: mlog}, nil
}

func (p *pendingStore) add(ctx context.Context, evt *event.Event) error {
	raw, err := json.Marshal(evt)
	if err != nil {
		return fmt.Errorf("store pending event %s: %w", evt.ID, err)
	}
	content := evt.Content.AsEncrypted()
	if _, err := p.db.Exec(ctx, sqlAddPending, evt.ID, evt.RoomID, content.SessionID, string(raw), time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("store pending event %s: %w", evt.ID, err)
	}
	return nil
}

func (p *pendingStore) remove(ctx context.Context, eventID id.EventID) {
	if _, err := p.db.Exec(context.WithoutCancel(ctx), sqlDeletePending, eventID); err != nil {
		p.log.Warn().Err(err).Stringer("event_id", eventID).Msg("Failed to forget pending event")
	}
}

func (p *pendingStore) load(ctx context.Context, query string, args ...any) ([]*event.Event, error) {
	rows, err := p.db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("load pending events: %w", err)
	}
	defer rows.Close()
	var evts []*event.Event
	for rows.Next() {
		var raw string
		var added int64
		if err := rows.Scan(&raw, &added); err != nil {
			return nil, fmt.Errorf("load pending events: %w", err)
		}
		var evt event.Event
		if err := json.Unmarshal([]byte(raw), &evt); err != nil {
			p.log.Warn().Err(err).Msg("Dropping unreadable pending event")
			continue
		}
		if time.Since(time.UnixMilli(added)) > maxPendingAge {
			p.log.Warn().Stringer("event_id", evt.ID).Msg("Giving up on an event whose room key never arrived")
			p.remove(ctx, evt.ID)
			continue
		}
		evt.Type.Class = event.MessageEventType
		if err := evt.Content.ParseRaw(evt.Type); err != nil && !errors.Is(err, event.ErrContentAlreadyParsed) {
			p.log.Warn().Err(err).Stringer("event_id", evt.ID).Msg("Dropping unparsable pending event")
			p.remove(ctx, evt.ID)
			continue
		}
		evt.Mautrix.EventSource = event.SourceJoin | event.SourceTimeline
		evts = append(evts, &evt)
	}
	return evts, rows.Err()
}
