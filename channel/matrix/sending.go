package matrix

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Exactly once on Matrix. A message with a stable id (conch.Outbound.ID) is
// sent with a transaction id derived from it, but a homeserver's transaction
// cache is not enough: dendrite keys it by access token, keeps it in memory,
// checks it before creating the event and fills it after, so a re-send
// after a restart (a new token with a password login, or a request cut off
// by the crash) can make a second event. So conch keeps its own record in
// conch_matrix_sending: a row for each part before its first attempt, given
// the event id once the homeserver answered. A part sent again whose row has
// an event id is not sent: that id is returned. A part whose row has none (a
// resume after a crash during the send, or a retry after an error) is first
// looked for in the room: every part carries its transaction id in its
// content (outboundIDKey, inside the ciphertext in encrypted rooms), and the
// bot's latest events are searched for it (decrypted with the bot's own copy
// of its group session). Only when none carries it is it sent again. Normal
// sends pay one insert and one update, no lookup.

// outboundIDKey is the content key carrying a part's transaction id.
const outboundIDKey = "org.conch.outbound_id"

const (
	// sendingSettle is how long after the last attempt a resumed part is
	// looked up: a request of the killed process may still be in flight at
	// the homeserver, and its event must be visible before we look.
	sendingSettle = 3 * time.Second
	// sendingLookupPages and sendingLookupLimit bound the search of the
	// bot's own events (newest first) for a part's transaction id.
	sendingLookupPages = 4
	sendingLookupLimit = 50
	// sendingClockSkew allows for the homeserver's clock being behind ours
	// when the search stops at events older than the first attempt.
	sendingClockSkew = 10 * time.Minute
	// maxSendingAge is how long a part's row is kept: a turn resumed later
	// than that could send its answer twice.
	maxSendingAge = 30 * 24 * time.Hour
)

const (
	sqlBeginSending = `INSERT INTO conch_matrix_sending (txn_id, room_id, started_at, attempted_at)
		VALUES ($1, $2, $3, $3) ON CONFLICT (txn_id) DO NOTHING`
	sqlGetSending   = `SELECT started_at, attempted_at, COALESCE(event_id, '') FROM conch_matrix_sending WHERE txn_id = $1`
	sqlRetrySending = `UPDATE conch_matrix_sending SET attempted_at = $2 WHERE txn_id = $1`
	sqlDoneSending  = `UPDATE conch_matrix_sending SET event_id = $2 WHERE txn_id = $1`
	sqlPruneSending = `DELETE FROM conch_matrix_sending WHERE started_at < $1`
)

// sendingStore is the table of parts by transaction id, in progress or sent.
type sendingStore struct {
	db  *dbutil.Database
	log zerolog.Logger
}

// openSending opens (creating or upgrading) conch's Matrix tables and drops
// rows older than maxSendingAge.
func openSending(ctx context.Context, db *sql.DB, log zerolog.Logger) (*sendingStore, error) {
	wrapped, err := dbutil.NewWithDB(db, "sqlite3")
	if err != nil {
		return nil, fmt.Errorf("matrix store: %w", err)
	}
	child := wrapped.Child("conch_matrix_version",
		dbutil.BuildUpgradeTable().WithFSPath(upgrades, "upgrades").Finish(),
		dbutil.ZeroLogger(log.With().Str("db_section", "conch_matrix").Logger()))
	if err := child.Upgrade(ctx); err != nil {
		return nil, fmt.Errorf("matrix store: upgrade: %w", err)
	}
	if _, err := child.Exec(ctx, sqlPruneSending, time.Now().Add(-maxSendingAge).UnixMilli()); err != nil {
		return nil, fmt.Errorf("matrix store: prune sends: %w", err)
	}
	return &sendingStore{db: child, log: log}, nil
}

// sendAttempt is what the store knows of a part about to be sent.
type sendAttempt struct {
	// sent is the event of an earlier attempt that finished.
	sent id.EventID
	// resumed is true when an earlier attempt began and did not finish.
	resumed bool
	// started and last are the times of the first and the latest earlier attempt.
	started, last time.Time
}

// begin records that txn is about to be sent to room. When an earlier
// attempt is on record it reports it: its event when it finished, else its
// times (and records this one's).
func (s *sendingStore) begin(ctx context.Context, txn string, room id.RoomID) (sendAttempt, error) {
	now := time.Now()
	res, err := s.db.Exec(ctx, sqlBeginSending, txn, room, now.UnixMilli())
	if err != nil {
		return sendAttempt{}, fmt.Errorf("record send %s: %w", txn, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return sendAttempt{}, fmt.Errorf("record send %s: %w", txn, err)
	} else if n == 1 {
		return sendAttempt{}, nil
	}
	var started, last int64
	var sent string
	if err := s.db.QueryRow(ctx, sqlGetSending, txn).Scan(&started, &last, &sent); err != nil {
		return sendAttempt{}, fmt.Errorf("read send %s: %w", txn, err)
	}
	if sent != "" {
		return sendAttempt{sent: id.EventID(sent)}, nil
	}
	if _, err := s.db.Exec(ctx, sqlRetrySending, txn, now.UnixMilli()); err != nil {
		return sendAttempt{}, fmt.Errorf("record send %s: %w", txn, err)
	}
	return sendAttempt{resumed: true, started: time.UnixMilli(started), last: time.UnixMilli(last)}, nil
}

// done records txn's event: the homeserver has it. A failure is only
// logged: the next send of txn (if any) looks the event up first.
func (s *sendingStore) done(ctx context.Context, txn string, evtID id.EventID) {
	if _, err := s.db.Exec(context.WithoutCancel(ctx), sqlDoneSending, txn, evtID); err != nil {
		s.log.Warn().Err(err).Str("txn_id", txn).Msg("Failed to record a finished send")
	}
}

// findSent looks among the bot's latest events in room for the one sent
// with transaction id txn (first attempted at since). It returns "" when
// none carries it. It waits until sendingSettle after the last attempt.
func (c *Channel) findSent(ctx context.Context, cli *mautrix.Client, room id.RoomID, txn string, at sendAttempt) (id.EventID, error) {
	if wait := time.Until(at.last.Add(sendingSettle)); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	oldest := at.started.Add(-sendingClockSkew).UnixMilli()
	filter := &mautrix.FilterPart{Senders: []id.UserID{cli.UserID}, Types: []event.Type{event.EventMessage, event.EventEncrypted}}
	from := ""
	warned := false
	for range sendingLookupPages {
		resp, err := cli.Messages(ctx, room, from, "", mautrix.DirectionBackward, filter, sendingLookupLimit)
		if err != nil {
			return "", fmt.Errorf("look for an earlier send of %s: %w", txn, err)
		}
		for _, evt := range resp.Chunk {
			if evt.Sender != cli.UserID {
				continue
			}
			ok, err := c.carries(ctx, room, evt, txn)
			if ok {
				return evt.ID, nil
			}
			if err != nil && !warned {
				warned = true
				c.log.Warn("matrix: cannot read the bot's own event while looking for an earlier send", "room", room, "event", evt.ID, "txn", txn, "err", err)
			}
			if evt.Timestamp < oldest {
				return "", nil
			}
		}
		if resp.End == "" || len(resp.Chunk) == 0 {
			return "", nil
		}
		from = resp.End
	}
	return "", nil
}

// carries reports whether evt's content (decrypted if need be) carries
// txn; the error says why an event could not be read.
func (c *Channel) carries(ctx context.Context, room id.RoomID, evt *event.Event, txn string) (bool, error) {
	switch evt.Type {
	case event.EventMessage:
		v, _ := evt.Content.Raw[outboundIDKey].(string)
		return v == txn, nil
	case event.EventEncrypted:
		evt.RoomID = room
		evt.Type.Class = event.MessageEventType
		if err := evt.Content.ParseRaw(evt.Type); err != nil && !errors.Is(err, event.ErrContentAlreadyParsed) {
			return false, err
		}
		decrypted, err := c.crypto.decrypt(ctx, evt)
		if err != nil {
			return false, err
		}
		v, _ := decrypted.Content.Raw[outboundIDKey].(string)
		return v == txn, nil
	}
	return false, nil
}
