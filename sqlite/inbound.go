package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"conch"
)

// maxInboundBatch bounds how many AddInbound calls share one transaction.
const maxInboundBatch = 128

// inboundQueue is group commit for AddInbound: calls that arrive while one
// batch is being written wait, and the next batch writes them all in one
// transaction with one fsync. Leadership passes from caller to caller; no
// goroutine runs when nothing is queued.
type inboundQueue struct {
	mu      sync.Mutex
	pending []*inboundReq
	leading bool // a caller is writing a batch
	// requests and batches count what went through, for tests.
	requests, batches int
}

type inboundReq struct {
	ctx  context.Context
	in   conch.Inbound
	refs string // JSON of in.Thread.References, "" when none
	atts string // JSON of in.Attachments, "" when none
	now  time.Time
	// wake receives true when this caller is to write the next batch, false
	// when its result is ready.
	wake chan bool
	t    conch.Turn
	dup  bool
	err  error
}

// AddInbound stores the message and a pending turn for it, durably: when it
// returns nil the message survives a crash (and, under SyncInbound or
// SyncFull, a power loss). A message whose (channel, ExternalID) is already
// stored returns the existing turn and dup = true. A zero ReceivedAt is
// stored as the current time. Concurrent calls are committed together.
func (d *DB) AddInbound(ctx context.Context, in conch.Inbound) (conch.Turn, bool, error) {
	if err := validKey(in.Key); err != nil {
		return conch.Turn{}, false, fmt.Errorf("add inbound: %w", err)
	}
	if in.Sender == "" {
		return conch.Turn{}, false, fmt.Errorf("add inbound: %w", conch.Errorf(conch.KindInvalid, "message in %s has no sender", in.Key))
	}
	if err := ctx.Err(); err != nil {
		return conch.Turn{}, false, fmt.Errorf("add inbound to %s: %w", in.Key, err)
	}
	r := &inboundReq{ctx: ctx, in: in, now: d.now(), wake: make(chan bool, 1)}
	if len(in.Thread.References) > 0 {
		b, err := json.Marshal(in.Thread.References)
		if err != nil {
			return conch.Turn{}, false, fmt.Errorf("add inbound: %w", err)
		}
		r.refs = string(b)
	}
	if r.in.ReceivedAt.IsZero() {
		r.in.ReceivedAt = r.now
	}
	atts, err := encodeAttachments(in.Attachments)
	if err != nil {
		return conch.Turn{}, false, fmt.Errorf("add inbound: %w", err)
	}
	r.atts = atts

	q := &d.inbound
	q.mu.Lock()
	q.pending = append(q.pending, r)
	q.requests++
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	// A caller waits even when its ctx ends: its request may be in the batch
	// being written, and it may be handed the lead. The batch skips requests
	// whose ctx ended before their turn.
	if lead || <-r.wake {
		d.writeInboundBatch()
		<-r.wake // own result, delivered by the batch just written
	}
	if r.err != nil {
		return conch.Turn{}, false, fmt.Errorf("add inbound to %s: %w", in.Key, r.err)
	}
	return r.t, r.dup, nil
}

// writeInboundBatch takes the queued requests (the leader's among them),
// writes them, wakes their callers and hands the lead to the next queued
// caller, if any.
func (d *DB) writeInboundBatch() {
	q := &d.inbound
	q.mu.Lock()
	n := min(len(q.pending), maxInboundBatch)
	batch := q.pending[:n:n]
	q.pending = q.pending[n:]
	q.batches++
	q.mu.Unlock()

	d.addInbounds(batch)

	q.mu.Lock()
	if len(q.pending) > 0 {
		q.pending[0].wake <- true
	} else {
		q.leading = false
	}
	q.mu.Unlock()
	for _, r := range batch {
		r.wake <- false
	}
}

// addInbounds writes reqs in one durable transaction. Should that fail, each
// is written alone, so an error belongs to its own request only.
func (d *DB) addInbounds(reqs []*inboundReq) {
	// Not the ctx of any one caller: a caller that gives up must not fail the
	// others. Each request's own ctx is checked before it is written.
	ctx := context.WithoutCancel(reqs[0].ctx)
	if len(reqs) > 1 {
		err := d.writeDurable(ctx, func(tx *sql.Tx) error {
			for _, r := range reqs {
				if err := d.addInboundTx(ctx, tx, r); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			return
		}
	}
	for _, r := range reqs {
		r.t, r.dup, r.err = conch.Turn{}, false, nil
		if err := d.writeDurable(ctx, func(tx *sql.Tx) error { return d.addInboundTx(ctx, tx, r) }); err != nil {
			r.err = err
		}
	}
}

// addInboundTx stores one inbound in tx and sets r's result. A request whose
// ctx has ended is skipped with its ctx's error.
func (d *DB) addInboundTx(ctx context.Context, tx *sql.Tx, r *inboundReq) error {
	if err := r.ctx.Err(); err != nil {
		r.err = err
		return nil
	}
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
	var id int64
	if err := tx.StmtContext(ctx, d.ws.addTurn).QueryRowContext(ctx, convID, gen, in.Key.Channel, in.ExternalID, in.Sender, in.SenderName,
		in.Thread.Subject, r.refs, nullMillis(in.ReceivedAt), millis(r.now), in.Origin.Kind, in.Origin.Ref, r.atts).Scan(&id); err != nil {
		return err
	}
	if _, err := tx.StmtContext(ctx, d.ws.addUserMessage).ExecContext(ctx, convID, id, gen, in.Text, millis(r.now)); err != nil {
		return err
	}
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
	r.t = conch.Turn{ID: conch.TurnID(id), Key: in.Key, Inbound: in, Status: conch.TurnPending, CreatedAt: normTime(r.now)}
	return nil
}
