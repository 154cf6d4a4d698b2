package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"conch"
	"conch/agent"
)

const (
	// deliveryTimeout bounds delivering an answer and recording its turn.
	deliveryTimeout = time.Minute
	// cancelWait is how long /stop and /reset wait for the turn to end.
	cancelWait = 2 * time.Second
	// progressTimeout bounds one progress message.
	progressTimeout = 10 * time.Second
)

// Causes of a cancelled turn.
var (
	errStopped = conch.ErrStopped
	errReset   = errors.New("conversation reset")
	errClosed  = errors.New("conversation closed")
)

// conversation owns one conversation's queue and its running turn. Its
// fields are guarded by the gateway's mutex; its goroutine exists only while
// there is work.
type conversation struct {
	g   *Gateway
	key conch.ConversationKey

	queue []conch.Turn
	busy  bool
	// holding is a queued turn whose pending state is being announced
	// (enqueue): the worker does not take it before.
	holding conch.TurnID
	// started is a queued turn stored already started (StagedStore):
	// its worker does not start it again.
	started conch.TurnID
	cur     *running
	// full counts the turns in a row that waited for room in the store
	// (the worker's own; it paces the next wait).
	full int
}

// running is the turn being worked on.
type running struct {
	turn conch.Turn
	// attempt is the turn's attempt being made (1: its first).
	attempt int
	started time.Time
	cancel  context.CancelCauseFunc
	done    chan struct{}
	// answered is set once the reply is being delivered.
	answered bool
}

// start runs the conversation's worker; the caller holds g.mu.
func (c *conversation) start() {
	c.busy = true
	c.g.wg.Add(1)
	go c.work(c.g.ctx)
}

// work runs queued turns one after the other until the queue is empty.
func (c *conversation) work(ctx context.Context) {
	g := c.g
	defer g.wg.Done()
	for {
		g.mu.Lock()
		if len(c.queue) == 0 || ctx.Err() != nil || c.queue[0].ID == c.holding {
			// A held turn is started by enqueue once it is announced.
			c.busy = false
			g.idle.Broadcast()
			g.mu.Unlock()
			return
		}
		t := c.queue[0]
		c.queue = c.queue[1:]
		// A turn stored started is on its first attempt already.
		stored := c.started == t.ID
		if stored {
			c.started = 0
		}
		attempt := t.Attempts + 1
		if stored {
			attempt = t.Attempts
		}
		tctx, cancel := context.WithCancelCause(ctx)
		r := &running{turn: t, attempt: attempt, started: g.opts.Now(), cancel: cancel, done: make(chan struct{})}
		c.cur = r
		g.mu.Unlock()

		t, wait := c.process(tctx, t, stored)
		cancel(nil)

		g.mu.Lock()
		c.cur = nil
		close(r.done)
		if wait {
			// The store's disk is full: the turn goes back to the head
			// of the queue (a reset or close drops it as any other) and
			// runs again once there may be room.
			c.queue = slices.Insert(c.queue, 0, t)
		}
		g.mu.Unlock()
		if !wait {
			c.full = 0
			continue
		}
		c.full++
		_ = g.opts.StoreRetry.Sleep(ctx, g.opts.StoreRetry.Delay(c.full)) // a shutdown ends the loop above
	}
}

// cancelCurrent cancels the running turn with cause and waits (bounded)
// for it to end. It reports whether a turn was running.
func (c *conversation) cancelCurrent(ctx context.Context, cause error) bool {
	c.g.mu.Lock()
	r := c.cur
	c.g.mu.Unlock()
	if r == nil {
		return false
	}
	r.cancel(cause)
	// Wait briefly so the answer to /stop is true in the common case, but
	// never hold up the channel that delivered the command for long: the
	// turn ends on its own once its tools see the cancellation.
	wait, cancel := context.WithTimeout(ctx, cancelWait)
	defer cancel()
	select {
	case <-r.done:
	case <-wait.Done():
		c.g.log.Info("cancelled turn still winding down", "conversation", c.key, "turn", r.turn.ID)
	}
	return true
}

// close drops queued turns and cancels the running one.
func (c *conversation) close(cause error) {
	c.g.mu.Lock()
	c.queue = nil
	c.started = 0
	c.g.mu.Unlock()
	c.cancelCurrent(context.Background(), cause)
}

// process runs one turn to its end and delivers the answer. It reports
// wait (with the turn as it stands) when the store's disk was full: the
// turn has not ended and must run again once there is room.
//
// stored says the turn was stored started with its message (its first
// attempt, StagedStore): it is not started again.
func (c *conversation) process(ctx context.Context, t conch.Turn, stored bool) (_ conch.Turn, wait bool) {
	g := c.g
	defer g.submits.forget(t.ID)
	log := g.log.With("conversation", c.key, "turn", t.ID)
	if !stored && t.Attempts >= g.opts.MaxAttempts {
		c.abandon(ctx, t, log)
		return t, false
	}
	started := t
	var err error
	if !stored {
		started, err = g.opts.Store.StartTurn(ctx, t.ID)
	}
	if errors.Is(err, conch.ErrStoreFull) {
		log.Warn("the store's disk is full; the turn waits for room", "err", err)
		return t, true
	}
	if err != nil {
		log.Error("start turn", "err", err)
		return t, false
	}
	t = started
	if t.Attempts > 1 {
		log.Info("resuming interrupted turn", "attempt", t.Attempts)
	}
	// The turn's typing, progress and post-turn hooks follow its events on
	// the hub (turnview.go); the previous turn's post-turn hooks end first.
	g.view.waitHooks(ctx, c.key)
	g.hub.Publish(ctx, c.key, t.ID, conch.TurnState{Status: conch.TurnRunning, Attempt: t.Attempts})
	c.deliverFiles(ctx, t, log)
	t = c.prepareMedia(ctx, t, log)
	if g.opts.Hooks != nil {
		if ran := g.opts.Hooks.BeforeTurn(ctx, t); ran.Hooks > 0 {
			g.hub.Publish(ctx, c.key, t.ID, ran)
		}
	}
	res, err := g.opts.Agent.Run(ctx, agent.Input{
		Turn: t.ID,
		Env: conch.ToolEnv{
			Conversation: c.key,
			User:         conch.UserKey{Channel: c.key.Channel, ID: t.Inbound.Sender},
			Sandboxes:    g.sandboxes(),
			Facts:        g.opts.Facts,
			Approvals:    g.approver(t),
		},
		Events: func(d conch.EventData) { g.hub.Publish(ctx, c.key, t.ID, d) },
	})
	return t, c.settle(ctx, t, log, res, err)
}

// abandon gives up on a turn that was attempted too often: it is recorded as
// abandoned and the person is told to send the message again.
func (c *conversation) abandon(ctx context.Context, t conch.Turn, log *slog.Logger) {
	g := c.g
	log.Warn("turn abandoned after too many attempts", "attempts", t.Attempts)
	if err := g.opts.Store.FinishTurn(ctx, t.ID, conch.TurnAbandoned, "too_many_attempts"); err != nil {
		log.Error("record abandoned turn", "err", err)
	}
	g.hub.Publish(ctx, c.key, t.ID, conch.TurnState{Status: conch.TurnAbandoned, Reason: "too_many_attempts"})
	g.send(ctx, t.ID, c.reply(t, conch.OutboundNotice, fmt.Sprintf(
		"I could not finish your message (“%s”) after %d attempts, so I gave up on it. Send it again if you still need it.",
		clip(t.Inbound.Text, 80), t.Attempts)))
}

// settle ends a turn after the agent ran: it delivers the answer and finishes
// the turn, or records a stop, a cancellation, an interruption by shutdown
// or a failure, by the context's cause and the agent's error. It reports
// wait when the store's disk was full: the turn stays running in the store
// and runs again (the person is not told to send the message again: it is
// stored).
func (c *conversation) settle(ctx context.Context, t conch.Turn, log *slog.Logger, res agent.Result, err error) (wait bool) {
	g := c.g
	switch cause := context.Cause(ctx); {
	case err == nil:
		// The answer is already stored with the turn; a crash before
		// FinishTurn re-delivers it on resume without asking the model again.
		g.mu.Lock()
		if c.cur != nil {
			c.cur.answered = true
		}
		g.mu.Unlock()
		// The answer waits for its message's submission (durable, and
		// acknowledged to the channel) without the delivery's deadline: a
		// disk that is slow to sync must not turn into an answer dropped
		// and a turn marked done. Only shutdown ends this wait; the turn
		// then resumes at the next start.
		if err := g.submits.wait(g.ctx, t.ID); err != nil {
			// The turn stays running in the store and resumes at the next
			// start (its message was not acknowledged: the channel
			// delivers it again); its watchers learn that it stopped.
			log.Error("answer held back: its message was not stored durably; the turn resumes at the next start", "err", err)
			g.hub.Publish(context.WithoutCancel(ctx), c.key, t.ID, conch.TurnState{Status: conch.TurnStopped, Reason: conch.ReasonInterrupted, Resumes: true})
			return false
		}
		// A /stop or shutdown from here on must not lose the answer.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliveryTimeout)
		defer cancel()
		// A resumed turn may have kept its answer's event before the crash.
		kept := false
		if t.Attempts > 1 {
			var err error
			if kept, err = g.hub.answerKept(dctx, c.key, t.ID, res.Text); err != nil {
				log.Warn("look for the answer in the event log; keeping it (again)", "err", err)
			}
		}
		out := c.reply(t, conch.OutboundReply, res.Text)
		out.Attachments = g.outgoingFiles(res.Attachments)
		g.sendKept(dctx, t.ID, out, kept)
		status, reason := conch.TurnDone, ""
		if res.Stopped != agent.StopNone {
			status, reason = conch.TurnStopped, string(res.Stopped)
		}
		c.finish(dctx, t, log, status, reason)
	case errors.Is(cause, errStopped):
		log.Info("turn stopped by the user")
		c.finish(context.WithoutCancel(ctx), t, log, conch.TurnStopped, "stopped_by_user")
	case errors.Is(cause, errReset), errors.Is(cause, errClosed):
		log.Info("turn cancelled", "cause", cause)
		g.hub.Publish(context.WithoutCancel(ctx), c.key, t.ID, conch.TurnState{Status: conch.TurnStopped, Reason: cause.Error()})
	case ctx.Err() != nil:
		// Shutdown: the turn stays running in the store and resumes at the
		// next start; its watchers learn that it is stopped, not done.
		log.Info("turn interrupted by shutdown; it resumes at the next start")
		g.hub.Publish(context.WithoutCancel(ctx), c.key, t.ID, conch.TurnState{Status: conch.TurnStopped, Reason: conch.ReasonInterrupted, Resumes: true})
	case errors.Is(err, conch.ErrStoreFull):
		log.Warn("the store's disk is full; the turn waits for room and runs again", "err", err)
		g.hub.Publish(ctx, c.key, t.ID, conch.TurnState{Status: conch.TurnStopped, Reason: conch.ReasonInterrupted, Resumes: true})
		return true
	default:
		c.fail(ctx, t, log, err)
	}
	return false
}

// fail ends a turn with an error the user is told about in safe words.
func (c *conversation) fail(ctx context.Context, t conch.Turn, log interface {
	Error(string, ...any)
}, err error) {
	log.Error("turn failed", "kind", conch.KindOf(err), "err", err)
	c.g.send(ctx, t.ID, c.reply(t, conch.OutboundReply, conch.UserMessage(err)))
	c.finish(ctx, t, log, conch.TurnStopped, "error_"+string(conch.KindOf(err)))
}

// finish records the end of a turn and tells subscribers.
func (c *conversation) finish(ctx context.Context, t conch.Turn, log interface {
	Error(string, ...any)
}, status conch.TurnStatus, reason string) {
	err := c.g.opts.Store.FinishTurn(ctx, t.ID, status, reason)
	if errors.Is(err, conch.ErrStoreFull) {
		// What the turn sent is out: wait for room to record its end
		// (bounded, and not past shutdown) rather than leave it running,
		// to be delivered again at the next start.
		rctx, cancel := context.WithTimeout(ctx, deliveryTimeout)
		defer cancel()
		defer context.AfterFunc(c.g.ctx, cancel)()
		for n := 1; errors.Is(err, conch.ErrStoreFull); n++ {
			if c.g.opts.StoreRetry.Sleep(rctx, c.g.opts.StoreRetry.Delay(n)) != nil {
				break
			}
			err = c.g.opts.Store.FinishTurn(rctx, t.ID, status, reason)
		}
	}
	if err != nil {
		log.Error("finish turn", "err", err)
	}
	c.g.hub.Publish(ctx, c.key, t.ID, conch.TurnState{Status: status, Reason: reason})
}

// deliverFiles copies the turn's received files from the spool into the
// conversation's workspace. A file that cannot be copied is logged and
// reported as progress; the turn goes on (the model finds it missing).
func (c *conversation) deliverFiles(ctx context.Context, t conch.Turn, log interface {
	Warn(string, ...any)
}) {
	g := c.g
	if len(t.Inbound.Attachments) == 0 || g.opts.Runtime == nil || g.opts.Attachments == nil {
		return
	}
	sb, err := g.opts.Runtime.Sandbox(ctx, c.key)
	if err != nil {
		log.Warn("received files not copied: no sandbox", "err", err)
		return
	}
	for _, a := range t.Inbound.Attachments {
		if a.Ref == "" || a.Path == "" {
			continue
		}
		if err := copyFile(ctx, g.opts.Attachments, sb, a); err != nil {
			log.Warn("received file not copied", "file", a.Path, "err", err)
		}
	}
}

// reply is a turn's answer or notice. Its ID is the same each time the turn
// is delivered, so a re-delivery after a crash is idempotent on channels
// that deduplicate.
func (c *conversation) reply(t conch.Turn, kind conch.OutboundKind, text string) conch.Outbound {
	return conch.Outbound{Key: c.key, Kind: kind, Text: text, InReplyTo: t.Inbound.ExternalID, Thread: t.Inbound.Thread,
		ID: c.g.outboundID(t.ID, kind)}
}

// sandboxes returns the runtime as a provider, or nil (not a typed nil).
func (g *Gateway) sandboxes() conch.SandboxProvider {
	if g.opts.Runtime == nil {
		return nil
	}
	return g.opts.Runtime
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
