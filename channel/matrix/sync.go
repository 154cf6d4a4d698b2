package matrix

import (
	"context"
	"fmt"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"conch"
	"conch/internal/backoff"
)

// longPoll is how long the homeserver may hold a sync request open.
const longPoll = 30 * time.Second

// syncRound is the state of processing one sync response.
type syncRound struct {
	// catchUp: the first sync after start; invites are joined without a greeting.
	catchUp bool
	// historical: the first sync without a stored token; its timelines are
	// history, not new messages, and are not handled.
	historical bool
	// err: an event could not be handed over; the token is not advanced and
	// the same response is fetched again.
	err    error
	joined map[id.RoomID]bool
	closed map[id.RoomID]bool
}

func (r *syncRound) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// syncLoop is mautrix's sync loop with two differences: the token is saved
// only after the response was processed (mautrix saves it before, which
// can lose events on a crash), and failures back off exponentially until
// MaxReconnectAttempts, after which the loop gives up with an error.
func (c *Channel) syncLoop(ctx context.Context) error {
	cli := c.cli
	since, err := c.syncStore.LoadNextBatch(ctx, cli.UserID)
	if err != nil {
		return err
	}
	filterID, err := c.syncStore.LoadFilterID(ctx, cli.UserID)
	if err != nil {
		return err
	}
	first, failing := true, true
	failures := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		err := c.syncOnce(ctx, &filterID, &since, first, failing)
		if err == nil {
			first, failing, failures = false, false, 0
			c.noteSync(nil)
			c.syncedOnce.Do(func() { close(c.synced) })
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		failing = true
		failures++
		c.noteSync(err)
		if isAuthError(err) {
			return &conch.Error{Kind: conch.KindAuth, User: "Matrix refused conch's credentials", Err: fmt.Errorf("matrix sync: %w", err)}
		}
		if failures >= c.opts.MaxReconnectAttempts {
			return &conch.Error{Kind: conch.KindUnavailable, User: "Matrix homeserver " + c.opts.Homeserver + " is unreachable",
				Err: fmt.Errorf("matrix sync: failed %d times in a row, giving up: %w", failures, err)}
		}
		wait := c.backoffPolicy().Delay(failures)
		c.log.Warn("matrix sync failed, retrying", "attempt", failures, "max", c.opts.MaxReconnectAttempts, "wait", wait, "err", err)
		if backoff.Sleep(ctx, wait) != nil {
			return nil
		}
	}
}

// syncOnce fetches and processes one sync response and then stores its token.
func (c *Channel) syncOnce(ctx context.Context, filterID, since *string, first, failing bool) error {
	cli := c.cli
	if *filterID == "" {
		resp, err := cli.CreateFilter(ctx, c.syncer.GetFilterJSON(cli.UserID))
		if err != nil {
			return fmt.Errorf("create sync filter: %w", err)
		}
		if err := c.syncStore.SaveFilterID(ctx, cli.UserID, resp.FilterID); err != nil {
			return err
		}
		*filterID = resp.FilterID
	}
	timeout := longPoll
	if first || failing {
		timeout = 0
	}
	resp, err := cli.FullSyncRequest(ctx, mautrix.ReqSync{
		Timeout:  int(timeout.Milliseconds()),
		Since:    *since,
		FilterID: *filterID,
	})
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	round := &syncRound{
		catchUp:    first,
		historical: first && *since == "",
		joined:     make(map[id.RoomID]bool),
		closed:     make(map[id.RoomID]bool),
	}
	if round.historical {
		c.log.Info("matrix first sync: existing messages are history and are not handled")
	}
	c.round = round
	err = c.syncer.ProcessResponse(ctx, resp, *since)
	c.round = nil
	if err != nil {
		return fmt.Errorf("process sync: %w", err)
	}
	if round.err != nil {
		return fmt.Errorf("process sync: %w", round.err)
	}
	// Every event was handed over: store the token even if ctx ended just
	// now, or a restart would deliver the last events again.
	saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.syncStore.SaveNextBatch(saveCtx, cli.UserID, resp.NextBatch); err != nil {
		return err
	}
	*since = resp.NextBatch
	return nil
}

func (c *Channel) noteSync(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.syncErr = nil
	case c.syncErr == nil:
		c.syncErr, c.syncErrAt = err, time.Now()
	default:
		c.syncErr = err
	}
}
