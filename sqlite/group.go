package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"conch"
)

// Grouped commits: every change the Store makes on the conversation path
// (AddInbound, StartTurn, AppendMessage, RecordStep, AppendEvent,
// FinishTurn, markers, cursors, usage, …) is a member of a write group.
// Changes that arrive while a group is being written wait; the next group
// writes them all in one SQLite transaction, each member inside its own
// SAVEPOINT, and commits once. A member's own error rolls back its savepoint
// only: it is that member's error, the others commit. An error that ends the
// transaction (BEGIN, COMMIT, a full disk, an I/O error) is every member's
// error: none of the group is stored.
//
// A group with a durable member (AddInbound) is made durable under
// SyncInbound by an fsync of the WAL file after its commit, outside the
// writer (durable.go): the next groups are written meanwhile, and one fsync
// covers every group committed before it. The durable members return only
// after it (StageInbound's caller waits later, itself); the others return
// at the commit. So a channel acknowledges a message only after an fsync
// that covers it, and a change another caller made before it is never
// behind it on disk (the WAL is one ordered file).
//
// Leadership passes from caller to caller: the first caller to find no
// group being written writes the next one (its own among them) and hands
// the lead to the first caller still queued. No goroutine runs when nothing
// is queued, and Close has nothing to stop.
//
// Order: a caller's changes are committed in the order it made them (it
// waits for each); changes of different callers are committed in the order
// they were queued. Reads (the reader pool) see a change once its group has
// committed, which is before its caller returns.

// maxGroup bounds how many changes share one transaction.
const maxGroup = 256

type writeQueue struct {
	mu      sync.Mutex
	pending []*writeReq
	leading bool // a caller is writing a group
	// requests, groups and synced count what went through, for tests.
	requests, groups, synced int
	// idle, on mu, is signalled when no group is being written (Close
	// waits for queued changes nobody waits for: AppendEventAsync's).
	idle sync.Cond
	// armed says leadAsync will run: asynchronous changes are queued and
	// nobody was writing.
	armed bool
	// sync makes the commits of durable groups durable (durable.go).
	sync syncer
}

type writeReq struct {
	// ctx is the caller's: a change whose ctx ended before its group ran is
	// not made. Statements run without it (see writeGroup).
	ctx     context.Context
	durable bool
	fn      func(ctx context.Context, tx *sql.Tx) error
	// auto, when set, makes the same change as fn as one statement in
	// its own (autocommit) transaction: a group of this change alone runs
	// it, which saves the BEGIN and COMMIT round trips.
	auto func(ctx context.Context) error
	// single says fn runs one statement that changes something (and
	// returns its error): the statement's own atomicity stands in for a
	// savepoint.
	single bool
	// wake receives true when this caller is to write the next group, false
	// when its result is ready.
	wake chan bool
	err  error
	// synced is, for a durable change committed under SyncInbound, the
	// commit to wait for on disk (0: nothing to wait for); the caller waits
	// after its result, unless stage says it waits itself, later.
	synced uint64
	stage  bool
	// done, when set, makes the change asynchronous: nobody waits on
	// wake; done receives the result once the group is written, on the
	// goroutine that wrote it (it must not block).
	done func(error)
}

// write runs fn as one member of a write group; it returns after the
// group committed (or failed). fn must use the ctx it is given, not the
// caller's: a caller that gives up must not interrupt the others' transaction.
func (d *DB) write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return d.enqueueReq(&writeReq{ctx: ctx, fn: fn})
}

func (d *DB) enqueueReq(r *writeReq) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	r.wake = make(chan bool, 1)
	q := &d.writes
	q.mu.Lock()
	q.pending = append(q.pending, r)
	q.requests++
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	// A caller waits even when its ctx ends: its change may be in the group
	// being written, and it may be handed the lead. A caller led a group
	// without its own change in it when asynchronous changes filled it: it
	// is then handed the lead again.
	if !lead {
		lead = <-r.wake
	}
	for lead {
		d.writeGroup()
		lead = <-r.wake // false: own result, delivered by a group written
	}
	if r.err == nil && r.synced > 0 && !r.stage {
		r.err = d.waitSynced(r.synced)
	}
	return r.err
}

// asyncWait is how long a change nobody waits for (AppendEventAsync's)
// waits for a caller to write it with its own change: a turn's events are
// published between its other writes, and each in a group of its own was
// a commit in series on the turn's path. Past it a goroutine writes them.
const asyncWait = time.Millisecond

// enqueueAsync queues r, whose done receives its result; it returns at
// once. The next caller to write a group writes r with it; when none comes
// within asyncWait, a goroutine does.
func (d *DB) enqueueAsync(r *writeReq) {
	q := &d.writes
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(q.pending, r)
	q.requests++
	if !q.leading && !q.armed {
		q.armed = true
		time.AfterFunc(asyncWait, d.leadAsync)
	}
}

// leadAsync writes the queued changes when nobody else does.
func (d *DB) leadAsync() {
	q := &d.writes
	q.mu.Lock()
	q.armed = false
	if q.leading || len(q.pending) == 0 {
		q.mu.Unlock()
		return
	}
	q.leading = true
	q.mu.Unlock()
	d.writeGroup()
}

// writeGroup takes the queued changes (the leader's among them), writes
// them, wakes their callers and hands the lead to the next queued caller
// (to a new goroutine when that change is asynchronous).
func (d *DB) writeGroup() {
	q := &d.writes
	q.mu.Lock()
	n := min(len(q.pending), maxGroup)
	group := q.pending[:n:n]
	q.pending = q.pending[n:]
	q.groups++
	durable := false
	for _, r := range group {
		durable = durable || r.durable
	}
	durable = durable && d.syncInbound
	if durable {
		q.synced++
	}
	q.mu.Unlock()

	// After a failed fsync nothing is written: what the disk holds is
	// unknown (durable.go). That error is not "disk full" even when the
	// fsync said ENOSPC: freeing space does not bring the pages back.
	if err := q.sync.broken(); err != nil {
		for _, r := range group {
			r.err = err
		}
	} else {
		var n uint64
		if durable {
			n = q.sync.noteStart()
		}
		err := d.runGroup(group, durable)
		if durable {
			q.sync.noteEnd(n)
		}
		if err := d.diskFull(err); err != nil {
			for _, r := range group {
				r.err = err
			}
		} else {
			if durable {
				// The fsync starts now, not when a caller first waits:
				// the caller has other work before it waits (the
				// gateway queues the turn and keeps its events).
				go d.waitSynced(n)
			}
			for _, r := range group {
				r.err = d.diskFull(r.err)
				if r.durable && r.err == nil {
					r.synced = n
				}
			}
		}
	}

	// The lead goes to the first caller waiting: it writes the queued
	// changes from the front, asynchronous ones before its own among them;
	// when only asynchronous ones are queued, to a goroutine.
	q.mu.Lock()
	spawn := false
	if i := slices.IndexFunc(q.pending, func(r *writeReq) bool { return r.done == nil }); i >= 0 {
		q.pending[i].wake <- true
	} else if len(q.pending) > 0 {
		spawn = true
	} else {
		q.leading = false
		q.idle.Broadcast()
	}
	q.mu.Unlock()
	if spawn {
		go d.writeGroup()
	}
	// The callers waiting first; then the asynchronous members' callbacks.
	for _, r := range group {
		if r.done == nil {
			r.wake <- false
		}
	}
	for _, r := range group {
		if r.done != nil {
			r.done(r.err)
		}
	}
}

// drainWrites waits until no group is queued or being written.
func (d *DB) drainWrites() {
	q := &d.writes
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.leading || len(q.pending) > 0 {
		q.idle.Wait()
	}
}

// runGroup writes group and returns the error that ended its transaction.
// A panic in a member's change (a bug) rolls the transaction back and is
// every member's error, with its stack for the log: the hand-off and the
// wake-ups after it must run, or every writer after would wait forever.
func (d *DB) runGroup(group []*writeReq, durable bool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store write panicked (nothing of its group is stored): %v\n%s", p, debug.Stack())
		}
	}()
	if r := group[0]; len(group) == 1 && r.auto != nil && !durable {
		if r.err = r.ctx.Err(); r.err == nil {
			r.err = r.auto(context.Background())
		}
		return nil
	}
	return d.commitGroup(group)
}

// commitGroup writes group in one transaction. It sets the members' own
// errors and returns the error that ended the transaction, if any.
func (d *DB) commitGroup(group []*writeReq) error {
	// Not the ctx of any one caller: cancelling a statement's ctx interrupts
	// the connection, which may roll back the whole transaction.
	ctx := context.Background()
	conn, err := d.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	alone := len(group) == 1
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		if alone {
			// Its error is the transaction's: nothing else to keep.
			if r.err = r.fn(ctx, tx); r.err != nil {
				return nil
			}
			continue
		}
		if r.single {
			// A refused statement is undone by SQLite and the transaction
			// goes on; any other error may have ended it: everybody's.
			if r.err = r.fn(ctx, tx); r.err != nil && !statementOnly(r.err) {
				return r.err
			}
			continue
		}
		if _, err := tx.StmtContext(ctx, d.ws.savepoint).ExecContext(ctx); err != nil {
			return err
		}
		if r.err = r.fn(ctx, tx); r.err != nil {
			// Some errors (a full disk, I/O) end the whole transaction;
			// then the savepoint is gone and so is everybody's change.
			if _, err := tx.StmtContext(ctx, d.ws.rollbackTo).ExecContext(ctx); err != nil {
				return errors.Join(r.err, fmt.Errorf("roll back one change of a group: %w", err))
			}
		}
		if _, err := tx.StmtContext(ctx, d.ws.release).ExecContext(ctx); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// exec runs one prepared statement of the writer as a member of a write group.
func (d *DB) exec(ctx context.Context, st *sql.Stmt, args ...any) (res sql.Result, err error) {
	err = d.enqueueReq(&writeReq{ctx: ctx, single: true,
		fn: func(ctx context.Context, tx *sql.Tx) error {
			res, err = tx.StmtContext(ctx, st).ExecContext(ctx, args...)
			return err
		},
		auto: func(ctx context.Context) error {
			res, err = st.ExecContext(ctx, args...)
			return err
		}})
	return res, err
}

// execSQL runs one statement as a member of a write group.
func (d *DB) execSQL(ctx context.Context, query string, args ...any) (res sql.Result, err error) {
	err = d.enqueueReq(&writeReq{ctx: ctx, single: true,
		fn: func(ctx context.Context, tx *sql.Tx) error {
			res, err = tx.ExecContext(ctx, query, args...)
			return err
		},
		auto: func(ctx context.Context) error {
			res, err = d.w.ExecContext(ctx, query, args...)
			return err
		}})
	return res, err
}

// write1 is write for an fn that runs one statement changing something and
// returns its error (or an error of its own only when the statement changed
// nothing): it needs no savepoint in a group.
func (d *DB) write1(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return d.enqueueReq(&writeReq{ctx: ctx, fn: fn, single: true})
}

// statementOnly reports whether err, from a member that ran one statement,
// left the group's transaction as it was: the statement was refused (a
// constraint: SQLite undid it) or changed nothing (no row, not found).
// Other errors (a full disk, I/O, no memory) may have ended the transaction.
func statementOnly(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
	}
	return errors.Is(err, sql.ErrNoRows) || conch.KindOf(err) == conch.KindNotFound
}
