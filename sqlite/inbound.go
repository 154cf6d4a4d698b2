package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"conch"
)

type inboundReq struct {
	in   conch.Inbound
	refs string // JSON of in.Thread.References, "" when none
	atts string // JSON of in.Attachments, "" when none
	now  time.Time
	// start stores the turn started (running, its first attempt), as
	// StartTurn would right after.
	start bool
	conv  int64 // the conversation's row, set by addInboundTx
	t     conch.Turn
	dup   bool
}

// AddInbound stores the message and a pending turn for it, durably: when it
// returns nil the message survives a crash (and, under SyncInbound or
// SyncFull, a power loss). A message whose (channel, ExternalID) is already
// stored returns the existing turn and dup = true. A zero ReceivedAt is
// stored as the current time. Concurrent calls are committed together.
func (d *DB) AddInbound(ctx context.Context, in conch.Inbound) (conch.Turn, bool, error) {
	t, dup, durable, err := d.StageInbound(ctx, in, false)
	if err == nil {
		err = durable(ctx)
	}
	if err != nil {
		return conch.Turn{}, false, err
	}
	return t, dup, nil
}

// StageInbound is AddInbound in two steps. When it returns, the message
// and its turn are stored: visible to every reader and ordered before every
// later change, and safe against a crash of the process. durable returns
// once they survive a power loss too, as AddInbound's do when it returns.
// The caller must not acknowledge the message, nor answer it, before
// durable returned nil: the gateway queues the turn meanwhile, so the
// turn's first steps overlap the fsync (durable.go). For a redelivered
// message (dup), durable also waits for the commit that stored it, should
// its fsync still be under way. durable does not give up when its ctx
// ends: the fsync it waits for is short and under way.
//
// With start the turn is stored started (running, its first attempt) in the
// message's own transaction, as StartTurn would store it right after: one
// commit fewer before the turn's work. Only for a conversation with no
// other turn waiting or running (the gateway knows): a started turn's
// messages are part of the model's view at once. A redelivered message
// (dup) returns its turn as it stands.
func (d *DB) StageInbound(ctx context.Context, in conch.Inbound, start bool) (t conch.Turn, dup bool, durable func(context.Context) error, err error) {
	if err := validKey(in.Key); err != nil {
		return conch.Turn{}, false, nil, fmt.Errorf("add inbound: %w", err)
	}
	if in.Sender == "" {
		return conch.Turn{}, false, nil, fmt.Errorf("add inbound: %w", conch.Errorf(conch.KindInvalid, "message in %s has no sender", in.Key))
	}
	if err := ctx.Err(); err != nil {
		return conch.Turn{}, false, nil, fmt.Errorf("add inbound to %s: %w", in.Key, err)
	}
	r := &inboundReq{in: in, now: d.now(), start: start}
	if len(in.Thread.References) > 0 {
		b, err := json.Marshal(in.Thread.References)
		if err != nil {
			return conch.Turn{}, false, nil, fmt.Errorf("add inbound: %w", err)
		}
		r.refs = string(b)
	}
	if r.in.ReceivedAt.IsZero() {
		r.in.ReceivedAt = r.now
	}
	atts, err := encodeAttachments(in.Attachments)
	if err != nil {
		return conch.Turn{}, false, nil, fmt.Errorf("add inbound: %w", err)
	}
	r.atts = atts

	// Concurrent calls (and other changes) share one transaction and one
	// fsync: see group.go. A duplicate is a durable member too, so its
	// fsync covers the commit of the message it found.
	w := &writeReq{ctx: ctx, durable: true, stage: true, fn: func(ctx context.Context, tx *sql.Tx) error { return d.addInboundTx(ctx, tx, r) }}
	if err := d.enqueueReq(w); err != nil {
		return conch.Turn{}, false, nil, fmt.Errorf("add inbound to %s: %w", in.Key, err)
	}
	if r.start && !r.dup {
		d.history.written(r.conv, r.t.ID) // its messages are part of the view now (StartTurn)
	}
	durable = func(context.Context) error {
		if w.synced == 0 {
			return nil // SyncFull (synced at the commit) or SyncNormal (never)
		}
		if err := d.waitSynced(w.synced); err != nil {
			return fmt.Errorf("add inbound to %s: %w", in.Key, err)
		}
		return nil
	}
	return r.t, r.dup, durable, nil
}

// addInboundTx stores one inbound in tx and sets r's result.
func (d *DB) addInboundTx(ctx context.Context, tx *sql.Tx, r *inboundReq) error {
	r.t, r.dup = conch.Turn{}, false
	in := r.in
	if in.ExternalID != "" {
		t, err := scanTurn(tx.StmtContext(ctx, d.ws.turnByExternalID).QueryRowContext(ctx, in.Key.Channel, in.ExternalID))
		if err == nil {
			r.t, r.dup = t, true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	}
	var convID, gen int64
	err := tx.StmtContext(ctx, d.ws.findConversation).QueryRowContext(ctx, in.Key.Channel, in.Key.ID).Scan(&convID, &gen)
	if errors.Is(err, sql.ErrNoRows) {
		err = tx.StmtContext(ctx, d.ws.addConversation).QueryRowContext(ctx, in.Key.Channel, in.Key.ID, millis(r.now)).Scan(&convID, &gen)
	}
	if err != nil {
		return err
	}
	// A turn started at once is stored running: no update after the insert.
	status, attempts, started := conch.TurnPending, 0, sql.NullInt64{}
	if r.start {
		status, attempts, started = conch.TurnRunning, 1, sql.NullInt64{Int64: millis(r.now), Valid: true}
	}
	var id int64
	if err := tx.StmtContext(ctx, d.ws.addTurn).QueryRowContext(ctx, convID, gen, in.Key.Channel, in.ExternalID, in.Sender, in.SenderName,
		in.Thread.Subject, r.refs, nullMillis(in.ReceivedAt), status, attempts, started, millis(r.now), in.Origin.Kind, in.Origin.Ref, r.atts).Scan(&id); err != nil {
		return err
	}
	if _, err := tx.StmtContext(ctx, d.ws.addUserMessage).ExecContext(ctx, convID, id, gen, in.Text, millis(r.now)); err != nil {
		return err
	}
	r.conv = convID
	in.ReceivedAt = normTime(in.ReceivedAt)
	if len(in.Thread.References) == 0 {
		in.Thread.References = nil
	}
	if len(in.Attachments) == 0 {
		in.Attachments = nil
	} else {
		// What a stored turn reads back: no Open, which belongs to the channel.
		in.Attachments, _ = decodeAttachments(r.atts)
	}
	r.t = conch.Turn{ID: conch.TurnID(id), Key: in.Key, Inbound: in, Status: status, Attempts: attempts, CreatedAt: normTime(r.now)}
	return nil
}
