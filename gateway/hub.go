package gateway

import (
	"context"
	"fmt"
	"log/slog"
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
// Kept events are appended to the log (when there is one) before anyone
// sees them, so a subscriber that resumes after a restart misses nothing and
// sees nothing twice. A slow subscriber never holds up a publisher: it is
// cut off and resubscribes.
type Hub struct {
	log EventLog // may be nil: events are then held in memory only
	lg  *slog.Logger
	now func() time.Time

	// observers see every event in the publisher's goroutine, in publish
	// order; set before anything is published (Observe).
	observers []func(conch.Event)

	mu    sync.Mutex
	convs map[conch.ConversationKey]*hubConv
	all   map[*subscriber]struct{} // subscribers of every conversation
}

// hubConv is one conversation's numbering, recent events and subscribers.
// Its mutex orders publishing and subscribing, so a new subscriber's backlog
// and its live events meet without a gap or an overlap.
type hubConv struct {
	mu     sync.Mutex
	loaded bool
	seq    int64
	ring   []conch.Event
	subs   map[*subscriber]struct{}
}

type subscriber struct {
	c    chan conch.Event
	done bool
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
	return &Hub{log: log, lg: lg, now: now, convs: make(map[conch.ConversationKey]*hubConv), all: make(map[*subscriber]struct{})}
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
		c.seq = seq
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

// Publish numbers an event, keeps it (unless it is ephemeral) and hands it
// to the subscribers. A failure to keep it is logged; the event still goes
// out live, and the next kept event takes the same Seq.
func (h *Hub) Publish(ctx context.Context, key conch.ConversationKey, turn conch.TurnID, data conch.EventData) conch.Event {
	ev := conch.Event{Key: key, Turn: turn, At: h.now(), Data: data}
	c := h.conv(key)
	c.mu.Lock()
	if err := h.loadLocked(ctx, key, c); err != nil {
		h.lg.Warn("event log unreadable; numbering from memory", "conversation", key, "err", err)
		c.loaded = true
	}
	ev.Seq = c.seq
	if !conch.Ephemeral(data) {
		ev.Seq = c.seq + 1
		if h.log != nil {
			if err := h.log.AppendEvent(context.WithoutCancel(ctx), ev); err != nil {
				h.lg.Warn("event not kept", "conversation", key, "type", data.Type(), "err", err)
				ev.Seq = c.seq
			}
		}
		if ev.Seq > c.seq {
			c.seq = ev.Seq
			if h.keepRingLocked(c) {
				c.ring = append(c.ring, ev)
				if len(c.ring) > ringSize {
					c.ring = append(c.ring[:0:0], c.ring[len(c.ring)-ringSize:]...)
				}
			}
		}
	}
	for _, fn := range h.observers {
		fn(ev)
	}
	for s := range c.subs {
		if !deliver(s, ev) {
			delete(c.subs, s)
		}
	}
	h.trimRingLocked(c)
	c.mu.Unlock()

	h.mu.Lock()
	for s := range h.all {
		if !deliver(s, ev) {
			delete(h.all, s)
		}
	}
	h.mu.Unlock()
	return ev
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
	s := &subscriber{c: make(chan conch.Event, len(backlog)+subBuffer)}
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
	if after < 0 || after >= c.seq {
		return nil, nil
	}
	if len(c.ring) > 0 && c.ring[0].Seq <= after+1 {
		i := int(after + 1 - c.ring[0].Seq)
		return append([]conch.Event(nil), c.ring[i:]...), nil
	}
	if h.log == nil {
		return nil, &conch.Error{Kind: conch.KindNotFound, User: fmt.Sprintf("events of %s after %d are no longer kept", key, after)}
	}
	evs, err := h.log.EventsSince(ctx, key, after, backlogLimit)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", key, err)
	}
	if len(evs) > 0 && evs[len(evs)-1].Seq < c.seq {
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
	return c.seq, nil
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
	if len(c.subs) > 0 {
		c.ring = nil // subscribers stay; numbering continues
		return
	}
	h.mu.Lock()
	delete(h.convs, key)
	h.mu.Unlock()
}
