package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"conch"
)

// EventLog keeps the kept events of each conversation. *sqlite.DB satisfies it.
type EventLog interface {
	AppendEvent(ctx context.Context, ev conch.Event) error
	EventsSince(ctx context.Context, key conch.ConversationKey, after int64, limit int) ([]conch.Event, error)
	LastEventSeq(ctx context.Context, key conch.ConversationKey) (int64, error)
}

// AsyncEventLog is an EventLog that can keep an event without the publisher
// waiting: AppendEventAsync queues ev in the same order as every later
// change of the store (a change made after publishing is never on disk
// before the event) and calls done, without blocking, once ev is written or
// failed. An error it returns means ev was not queued and done is not
// called. *sqlite.DB satisfies it.
type AsyncEventLog interface {
	EventLog
	AppendEventAsync(ev conch.Event, done func(error)) error
}

const (
	// ringSize is how many kept events of a conversation the hub holds in
	// memory for subscribers that resume without reading the log. With a
	// log, only conversations someone subscribes to have a ring (and lose it
	// with their last subscriber): held for every conversation ever seen it
	// was the largest part of conch's heap after a soak (100 conversations ×
	// 256 events), memory no one read.
	ringSize = 256
	// subBuffer is how far a live subscriber may fall behind before it is
	// cut off (it then resubscribes from its last Seq).
	subBuffer = 512
	// backlogLimit bounds the events read from the log for one Subscribe.
	backlogLimit = 10000
)

// Hub numbers each conversation's events and fans them out to subscribers.
//
// A kept event is numbered when it is published and handed to the in-process
// observers at once (typing, progress and hooks must not wait for a disk);
// subscribers get it only once the log holds it, so a Seq a subscriber saw
// is never taken back by a crash and handed out again after a restart, and
// one that resumes misses nothing and sees nothing twice. With an
// AsyncEventLog the publisher does not wait for the write (it was seven of
// a turn's store writes in series): the conversation's events wait in
// publish order, ephemeral ones among them, and go out from the head as
// their writes end. A slow subscriber never holds up a publisher: it is cut
// off and resubscribes.
type Hub struct {
	log   EventLog      // may be nil: events are then held in memory only
	async AsyncEventLog // log, when it keeps events without waiting
	lg    *slog.Logger
	now   func() time.Time

	// observers see every event in the publisher's goroutine, in publish
	// order; set before anything is published (Observe).
	observers []func(conch.Event)

	mu    sync.Mutex
	convs map[conch.ConversationKey]*hubConv
	all   map[*subscriber]struct{} // subscribers of every conversation

	// unsent counts events published but not yet handed to subscribers
	// (their writes under way); Flush waits for none.
	unsentMu sync.Mutex
	unsent   int
	sent     sync.Cond

	// quit ends the writes again of events the disk had no room for
	// (StopRetrying); retryWait is the first wait before one, doubling to
	// a second.
	quit      chan struct{}
	quitOnce  sync.Once
	retryWait time.Duration
}

// hubConv is one conversation's numbering, recent events and subscribers.
// Its mutex orders publishing, delivering and subscribing, so a new
// subscriber's backlog and its live events meet without a gap or an overlap.
type hubConv struct {
	mu     sync.Mutex
	loaded bool
	// seq is the last Seq handed out; delivered the last one subscribers
	// were given (kept in the log). They differ while writes are under way.
	seq, delivered int64
	ring           []conch.Event
	subs           map[*subscriber]struct{}
	// queue holds the events published and not yet delivered, in publish
	// order; the head goes out once it is written (or failed).
	queue []*queued
}

// queued is one event waiting for its write (ephemeral ones wait for the
// kept events before them).
type queued struct {
	ev      conch.Event
	writing bool  // the log has not answered yet
	err     error // the log's answer
}

type subscriber struct {
	c    chan conch.Event
	done bool
	// after is the Seq it resumed after: events up to it that are
	// delivered later (their writes were under way) are not sent again.
	after int64
}

var _ conch.EventSource = (*Hub)(nil)

// NewHub returns a hub over log (nil keeps events in memory only).
func NewHub(log EventLog, lg *slog.Logger, now func() time.Time) *Hub {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	h := &Hub{log: log, lg: lg, now: now, convs: make(map[conch.ConversationKey]*hubConv), all: make(map[*subscriber]struct{}),
		quit: make(chan struct{}), retryWait: 50 * time.Millisecond}
	h.async, _ = log.(AsyncEventLog)
	h.sent.L = &h.unsentMu
	return h
}

func (h *Hub) conv(key conch.ConversationKey) *hubConv {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.convs[key]
	if c == nil {
		c = &hubConv{subs: make(map[*subscriber]struct{})}
		h.convs[key] = c
	}
	return c
}

// loadLocked reads the conversation's last Seq from the log once.
func (h *Hub) loadLocked(ctx context.Context, key conch.ConversationKey, c *hubConv) error {
	if c.loaded {
		return nil
	}
	if h.log != nil {
		seq, err := h.log.LastEventSeq(ctx, key)
		if err != nil {
			return err
		}
		c.seq, c.delivered = seq, seq
	}
	c.loaded = true
	return nil
}

// Observe adds an in-process subscriber that sees every event of every
// conversation synchronously, as it is published, in publish order (a
// conversation's events in Seq order). It must not block: it runs while the
// conversation's publishing is held. Call it before anything is published.
func (h *Hub) Observe(fn func(conch.Event)) {
	h.observers = append(h.observers, fn)
}

// Publish numbers an event, hands it to the observers, keeps it (unless it
// is ephemeral) and hands it to the subscribers once kept. A failure to
// keep it is logged; the event still goes out live, with the Seq of the
// last event kept (as an ephemeral one), and the log has a gap there.
func (h *Hub) Publish(ctx context.Context, key conch.ConversationKey, turn conch.TurnID, data conch.EventData) conch.Event {
	ev := conch.Event{Key: key, Turn: turn, At: h.now(), Data: data}
	c := h.conv(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := h.loadLocked(ctx, key, c); err != nil {
		h.lg.Warn("event log unreadable; numbering from memory", "conversation", key, "err", err)
		c.loaded = true
	}
	ev.Seq = c.seq
	q := &queued{ev: ev}
	if !conch.Ephemeral(data) {
		ev.Seq = c.seq + 1
		q.ev.Seq = ev.Seq
		switch {
		case h.async != nil:
			q.writing = true
			if err := h.appendAsync(c, q, h.retryWait); err != nil {
				q.writing, q.err = false, err
			}
		case h.log != nil:
			q.err = h.log.AppendEvent(context.WithoutCancel(ctx), ev)
		}
		if q.err != nil {
			ev.Seq = c.seq // numbered as it goes out: the next event takes its Seq
		} else {
			c.seq = ev.Seq
		}
	}
	for _, fn := range h.observers {
		fn(ev)
	}
	if q.writing || len(c.queue) > 0 {
		if len(c.queue) == 0 {
			h.unsentMu.Lock()
			h.unsent++
			h.unsentMu.Unlock()
		}
		c.queue = append(c.queue, q)
		h.sendLocked(c)
	} else {
		h.deliverLocked(c, q)
	}
	h.trimRingLocked(c)
	return ev
}

// appendAsync has the log keep q's event. The answer comes on the store's
// writer, which must not wait for this conversation's lock (a Subscribe may
// hold it across a read of the log): delivered from a goroutine of its own;
// the queue keeps the order. When the disk has no room, the event is
// written again after wait (doubling to a second) until it is kept or the
// hub stops retrying, as a turn waits for room: meanwhile the
// conversation's later events wait behind it, and readers of the log see
// nothing past it (backlogLocked stops at the last delivered). Dropped,
// it was a gap in the log: an answer the web chat never showed.
func (h *Hub) appendAsync(c *hubConv, q *queued, wait time.Duration) error {
	return h.async.AppendEventAsync(q.ev, func(err error) {
		if err == nil || !errors.Is(err, conch.ErrStoreFull) {
			go h.written(c, q, err)
			return
		}
		go func() {
			select {
			case <-time.After(wait):
			case <-h.quit:
				h.written(c, q, err)
				return
			}
			if wait == h.retryWait {
				h.lg.Warn("event not kept yet: the store's disk is full; writing it again until there is room",
					"conversation", q.ev.Key, "seq", q.ev.Seq, "type", q.ev.Data.Type())
			}
			if err := h.appendAsync(c, q, min(2*wait, time.Second)); err != nil {
				h.written(c, q, err)
			}
		}()
	})
}

// StopRetrying ends the writes again of events the disk had no room for:
// they are given up (logged; a gap in the log) instead of waited for, so
// that Flush at shutdown ends.
func (h *Hub) StopRetrying() {
	h.quitOnce.Do(func() { close(h.quit) })
}

// written is the log's answer for q.
func (h *Hub) written(c *hubConv, q *queued, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q.writing, q.err = false, err
	h.sendLocked(c)
	h.trimRingLocked(c)
}

// sendLocked delivers c's queued events from the head while their writes
// have ended.
func (h *Hub) sendLocked(c *hubConv) {
	n := 0
	for _, q := range c.queue {
		if q.writing {
			break
		}
		h.deliverLocked(c, q)
		n++
	}
	if n == 0 {
		return
	}
	clear(c.queue[:n])
	c.queue = c.queue[n:]
	if len(c.queue) == 0 {
		c.queue = nil
		h.unsentMu.Lock()
		if h.unsent--; h.unsent == 0 {
			h.sent.Broadcast()
		}
		h.unsentMu.Unlock()
	}
}

// deliverLocked hands q's event to the subscribers: a kept one with its
// Seq (and into the ring), an ephemeral one or one the log refused with the
// Seq of the last one kept.
func (h *Hub) deliverLocked(c *hubConv, q *queued) {
	ev := q.ev
	switch {
	case q.err != nil:
		h.lg.Warn("event not kept", "conversation", ev.Key, "type", ev.Data.Type(), "err", q.err)
		ev.Seq = c.delivered
	case conch.Ephemeral(ev.Data):
		ev.Seq = c.delivered
	default:
		c.delivered = ev.Seq
		if h.keepRingLocked(c) {
			c.ring = append(c.ring, ev)
			if len(c.ring) > ringSize {
				c.ring = append(c.ring[:0:0], c.ring[len(c.ring)-ringSize:]...)
			}
		}
	}
	for s := range c.subs {
		if ev.Seq < s.after || ev.Seq == s.after && ev.Seq == c.delivered && q.err == nil && !conch.Ephemeral(ev.Data) {
			continue // it resumed past this event: seen already
		}
		if !deliver(s, ev) {
			delete(c.subs, s)
		}
	}
	h.mu.Lock()
	for s := range h.all {
		if !deliver(s, ev) {
			delete(h.all, s)
		}
	}
	h.mu.Unlock()
}

// Flush waits until every event published so far has been written and
// handed to the subscribers (or ctx ends).
func (h *Hub) Flush(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		h.unsentMu.Lock()
		h.sent.Broadcast()
		h.unsentMu.Unlock()
	})
	defer stop()
	h.unsentMu.Lock()
	defer h.unsentMu.Unlock()
	for h.unsent > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		h.sent.Wait()
	}
	return nil
}

// deliver hands ev to s without blocking; a full subscriber is closed (it
// resubscribes from its last Seq) and deliver reports false.
func deliver(s *subscriber, ev conch.Event) bool {
	if s.done {
		return false
	}
	select {
	case s.c <- ev:
		return true
	default:
		s.done = true
		close(s.c)
		return false
	}
}

// Subscribe implements conch.EventSource.
func (h *Hub) Subscribe(ctx context.Context, key conch.ConversationKey, after int64) (<-chan conch.Event, error) {
	if key.IsZero() {
		s := &subscriber{c: make(chan conch.Event, subBuffer)}
		h.mu.Lock()
		h.all[s] = struct{}{}
		h.mu.Unlock()
		context.AfterFunc(ctx, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if _, ok := h.all[s]; ok {
				delete(h.all, s)
				s.done = true
				close(s.c)
			}
		})
		return s.c, nil
	}
	c := h.conv(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := h.loadLocked(ctx, key, c); err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", key, err)
	}
	backlog, err := h.backlogLocked(ctx, key, c, after)
	if err != nil {
		return nil, err
	}
	s := &subscriber{c: make(chan conch.Event, len(backlog)+subBuffer), after: after}
	for _, ev := range backlog {
		s.c <- ev
	}
	c.subs[s] = struct{}{}
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.subs[s]; ok {
			delete(c.subs, s)
			s.done = true
			close(s.c)
		}
		h.trimRingLocked(c)
	})
	return s.c, nil
}

// keepRingLocked reports whether c keeps its recent events in memory:
// always without a log (the ring is all there is), else only while someone
// subscribes to the conversation (a subscriber cut off for falling behind
// resumes from it). Anyone else reads the log.
func (h *Hub) keepRingLocked(c *hubConv) bool {
	return h.log == nil || len(c.subs) > 0
}

// trimRingLocked drops c's ring when it is no longer kept.
func (h *Hub) trimRingLocked(c *hubConv) {
	if !h.keepRingLocked(c) {
		c.ring = nil
	}
}

// backlogLocked returns the kept events after `after`: from the ring when it
// reaches back that far, else from the log.
func (h *Hub) backlogLocked(ctx context.Context, key conch.ConversationKey, c *hubConv, after int64) ([]conch.Event, error) {
	if after < 0 || after >= c.delivered {
		return nil, nil
	}
	if len(c.ring) > 0 && c.ring[0].Seq <= after+1 {
		// Seqs in the ring may have gaps (an event the log refused kept
		// its number): search, never subtract.
		i := sort.Search(len(c.ring), func(i int) bool { return c.ring[i].Seq > after })
		return append([]conch.Event(nil), c.ring[i:]...), nil
	}
	if h.log == nil {
		return nil, &conch.Error{Kind: conch.KindNotFound, User: fmt.Sprintf("events of %s after %d are no longer kept", key, after)}
	}
	evs, err := h.log.EventsSince(ctx, key, after, backlogLimit)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", key, err)
	}
	// Events written but not yet delivered come live, after the backlog.
	for len(evs) > 0 && evs[len(evs)-1].Seq > c.delivered {
		evs = evs[:len(evs)-1]
	}
	if len(evs) > 0 && evs[len(evs)-1].Seq < c.delivered {
		return nil, &conch.Error{Kind: conch.KindNotFound, User: fmt.Sprintf("more than %d events of %s after %d: reload", backlogLimit, key, after)}
	}
	return evs, nil
}

// answerScan bounds how far back answerKept reads a conversation's log.
const answerScan = 2000

// answerKept reports whether the event log already has text as turn's
// answer. A turn resumed after a crash delivers its stored answer again, and
// the crash may have come after the answer's event was kept or before. The
// log is read backwards from its newest event to the turn's own message
// (nothing of the turn is older), at most answerScan events: past that, or
// without a log, it reports false (an answer shown twice is better than one
// lost).
func (h *Hub) answerKept(ctx context.Context, key conch.ConversationKey, turn conch.TurnID, text string) (bool, error) {
	if h.log == nil {
		return false, nil
	}
	last, err := h.LastSeq(ctx, key)
	if err != nil {
		return false, err
	}
	const window = 200
	for hi := last; hi > 0 && last-hi < answerScan; hi -= window {
		lo := max(0, hi-window)
		evs, err := h.log.EventsSince(ctx, key, lo, int(hi-lo))
		if err != nil {
			return false, fmt.Errorf("answer of turn %d: %w", turn, err)
		}
		for i := len(evs) - 1; i >= 0; i-- {
			m, ok := evs[i].Data.(conch.MessageEvent)
			if !ok || evs[i].Turn != turn {
				continue
			}
			switch {
			case m.Role == conch.RoleAssistant && m.Text == text:
				return true, nil
			case m.Role == conch.RoleUser:
				return false, nil // the turn's message: its answer would be newer
			}
		}
	}
	return false, nil
}

// LastSeq implements conch.EventSource.
func (h *Hub) LastSeq(ctx context.Context, key conch.ConversationKey) (int64, error) {
	c := h.conv(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := h.loadLocked(ctx, key, c); err != nil {
		return 0, fmt.Errorf("last event of %s: %w", key, err)
	}
	return c.delivered, nil
}

// Forget drops the hub's memory of a conversation (its log stays).
func (h *Hub) Forget(key conch.ConversationKey) {
	h.mu.Lock()
	c := h.convs[key]
	h.mu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.subs) > 0 || len(c.queue) > 0 {
		c.ring = nil // subscribers or writes stay; numbering continues
		return
	}
	h.mu.Lock()
	delete(h.convs, key)
	h.mu.Unlock()
}
