package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"conch"
)

// Queued is the store as a turn's agent and meter use it: the bookkeeping a
// turn need not wait for — its steps, its model calls' usage, its context
// use — returns once the change is queued. The change is written with the
// next change anyone makes (the turn's answer, a moment later), or by the
// store itself within a millisecond when nobody writes: one transaction
// instead of one each, off the turn's path. Everything else is the DB's.
//
// What holds: a queued change is on disk no later than any change made
// after it (the store has one queue), so a turn's answer, and the turn's
// end, are never stored before the usage and steps that led to them. A
// read made after a later change returned sees it (a budget check after
// the answer of a tool call was stored). A failure to write is logged, as
// the callers did with the error: nothing waits for it.
type Queued struct {
	*DB
	lg *slog.Logger
}

// Queued returns the DB whose bookkeeping writes do not wait (see Queued);
// their failures go to lg.
func (d *DB) Queued(lg *slog.Logger) Queued {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return Queued{DB: d, lg: lg}
}

// queue queues one statement's change; its error, if any, is logged as
// what (the change's words) with the statement's own words.
func (q Queued) queue(what string, st *sql.Stmt, args []any, check func(sql.Result) error) {
	var res sql.Result
	q.enqueueAsync(&writeReq{ctx: context.Background(), single: true,
		fn: func(ctx context.Context, tx *sql.Tx) (err error) {
			res, err = tx.StmtContext(ctx, st).ExecContext(ctx, args...)
			return err
		},
		auto: func(ctx context.Context) (err error) {
			res, err = st.ExecContext(ctx, args...)
			return err
		},
		done: func(err error) {
			if err == nil && check != nil {
				err = check(res)
			}
			if err != nil {
				q.lg.Error("not stored", "what", what, "err", q.diskFull(err))
			}
		}})
}

// RecordStep queues the step (see Queued).
func (q Queued) RecordStep(_ context.Context, s conch.Step) error {
	args, err := q.stepArgs(s)
	if err != nil {
		return err
	}
	q.queue(fmt.Sprintf("%s step of turn %d", s.Kind, s.Turn), q.ws.recordStep, args, nil)
	return nil
}

// RecordUsage queues the model call (see Queued).
func (q Queued) RecordUsage(_ context.Context, c conch.ModelCall) error {
	args, err := q.usageArgs(c)
	if err != nil {
		return err
	}
	q.queue(fmt.Sprintf("usage of a %s call of %s", c.Model, c.Key), q.ws.recordUsage, args, func(res sql.Result) error {
		if n, _ := res.RowsAffected(); n == 0 {
			return conch.Errorf(conch.KindNotFound, "no conversation %s", c.Key)
		}
		return nil
	})
	return nil
}

// RecordContextUse queues the context use (see Queued).
func (q Queued) RecordContextUse(_ context.Context, key conch.ConversationKey, u conch.ContextUse) error {
	args, err := q.contextUseArgs(key, u)
	if err != nil {
		return err
	}
	q.queue("context use of "+key.String(), q.ws.setContextUse, args, nil)
	return nil
}
