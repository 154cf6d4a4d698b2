package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"conch"
)

// Defaults of Options.
const (
	DefaultMaxPerConversation = 20
	DefaultMinInterval        = 5 * time.Minute
	// retryDelay is how long a wake whose message could not be submitted
	// waits before it is tried again.
	retryDelay = 10 * time.Second
)

// Waiter waits for a watch's condition and says what happened. It returns
// an error when the condition can no longer happen (the terminal is gone)
// or ctx ended. recovered is set when the wait resumes after a restart.
type Waiter interface {
	Wait(ctx context.Context, key conch.ConversationKey, w WatchSpec, recovered bool) (string, error)
}

// Options configures a Scheduler.
type Options struct {
	Store Store
	// Waiter waits for watches; nil refuses watches.
	Waiter Waiter
	// MaxPerConversation caps a conversation's wakes and watches together.
	MaxPerConversation int
	// MinInterval is the shortest time between two firings of a cron wake.
	MinInterval time.Duration
	Logger      *slog.Logger
	// Now is the clock; nil means time.Now (faked under testing/synctest).
	Now func() time.Time
}

// Scheduler fires wakes and watches. Create it with New, then call Run; Add,
// List and Cancel may be called before and while it runs.
type Scheduler struct {
	o   Options
	log *slog.Logger

	wake chan struct{} // a change of entries; buffered 1

	mu      sync.Mutex
	watches map[string]context.CancelFunc // running watch waits by entry id
	// sub is where wakes are submitted: the gateway, given to Run (it is
	// built after the tools that hold the scheduler).
	sub conch.Submitter
}

var _ conch.Releaser = (*Scheduler)(nil)

// New returns a Scheduler.
func New(o Options) (*Scheduler, error) {
	if o.Store == nil {
		return nil, errors.New("schedule: a store is required")
	}
	if o.MaxPerConversation <= 0 {
		o.MaxPerConversation = DefaultMaxPerConversation
	}
	if o.MinInterval <= 0 {
		o.MinInterval = DefaultMinInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Scheduler{o: o, log: o.Logger, wake: make(chan struct{}, 1), watches: map[string]context.CancelFunc{}}, nil
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// At schedules message for the conversation once at t.
func (s *Scheduler) At(ctx context.Context, key conch.ConversationKey, t time.Time, message string) (Entry, error) {
	if !t.After(s.o.Now()) {
		return Entry{}, conch.Errorf(conch.KindInvalid, "%s is not in the future", t.UTC().Format(time.RFC3339))
	}
	return s.add(ctx, Entry{ID: newID("s"), Key: key, Kind: KindAt, Message: message, Next: t})
}

// After schedules message for the conversation once, d from now.
func (s *Scheduler) After(ctx context.Context, key conch.ConversationKey, d time.Duration, message string) (Entry, error) {
	if d <= 0 {
		return Entry{}, conch.Errorf(conch.KindInvalid, "the delay must be positive")
	}
	return s.add(ctx, Entry{ID: newID("s"), Key: key, Kind: KindAt, Message: message, Next: s.o.Now().Add(d)})
}

// Cron schedules message for the conversation at every time of spec.
func (s *Scheduler) Cron(ctx context.Context, key conch.ConversationKey, spec, message string) (Entry, error) {
	sched, err := ParseCron(spec)
	if err != nil {
		return Entry{}, err
	}
	first := sched.Next(s.o.Now().UTC()) // cron times are UTC
	if first.IsZero() {
		return Entry{}, conch.Errorf(conch.KindInvalid, "cron expression %q never fires", spec)
	}
	if gap := sched.Next(first).Sub(first); gap < s.o.MinInterval {
		return Entry{}, conch.Errorf(conch.KindInvalid, "cron expression %q fires every %s; the shortest interval allowed is %s", spec, gap, s.o.MinInterval)
	}
	return s.add(ctx, Entry{ID: newID("s"), Key: key, Kind: KindCron, Spec: spec, Message: message, Next: first})
}

// Watch sets a watch for the conversation.
func (s *Scheduler) Watch(ctx context.Context, key conch.ConversationKey, w WatchSpec, message string) (Entry, error) {
	if s.o.Waiter == nil {
		return Entry{}, conch.Errorf(conch.KindUnavailable, "watches need a sandbox runtime, and none is configured")
	}
	return s.add(ctx, Entry{ID: newID("w"), Key: key, Kind: KindWatch, Spec: w.Encode(), Message: message})
}

func (s *Scheduler) add(ctx context.Context, e Entry) (Entry, error) {
	if e.Key.IsZero() {
		return Entry{}, conch.Errorf(conch.KindInvalid, "no conversation")
	}
	have, err := s.o.Store.Schedules(ctx, e.Key)
	if err != nil {
		return Entry{}, fmt.Errorf("schedule: %w", err)
	}
	if len(have) >= s.o.MaxPerConversation {
		return Entry{}, conch.Errorf(conch.KindInvalid, "this conversation already has %d wakes and watches, the most allowed; cancel one first", len(have))
	}
	e.CreatedAt = s.o.Now()
	if err := s.o.Store.AddSchedule(ctx, e); err != nil {
		return Entry{}, fmt.Errorf("schedule: %w", err)
	}
	s.poke()
	return e, nil
}

// List returns the conversation's entries (every conversation's for the zero key).
func (s *Scheduler) List(ctx context.Context, key conch.ConversationKey) ([]Entry, error) {
	return s.o.Store.Schedules(ctx, key)
}

// Cancel removes an entry of the conversation (of any conversation for the
// zero key); it reports whether there was one.
func (s *Scheduler) Cancel(ctx context.Context, key conch.ConversationKey, id string) (bool, error) {
	if !key.IsZero() {
		es, err := s.o.Store.Schedules(ctx, key)
		if err != nil {
			return false, fmt.Errorf("cancel %s: %w", id, err)
		}
		found := false
		for _, e := range es {
			found = found || e.ID == id
		}
		if !found {
			return false, nil
		}
	}
	ok, err := s.o.Store.DeleteSchedule(ctx, id)
	if err != nil {
		return false, fmt.Errorf("cancel %s: %w", id, err)
	}
	s.stopWatch(id)
	s.poke()
	return ok, nil
}

// Release implements conch.Releaser: a reset or closed conversation loses
// its wakes and watches.
func (s *Scheduler) Release(ctx context.Context, key conch.ConversationKey) error {
	es, err := s.o.Store.Schedules(ctx, key)
	if err != nil {
		return fmt.Errorf("release schedules: %w", err)
	}
	for _, e := range es {
		if _, err := s.o.Store.DeleteSchedule(ctx, e.ID); err != nil {
			return fmt.Errorf("release schedules: %w", err)
		}
		s.stopWatch(e.ID)
	}
	return nil
}

func (s *Scheduler) stopWatch(id string) {
	s.mu.Lock()
	cancel := s.watches[id]
	delete(s.watches, id)
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Run fires entries until ctx is done, submitting them through sub (the
// gateway). Wakes whose time passed while conch
// was not running fire once at the start, with a note; a cron wake then
// goes on from the present (missed times are not repeated).
func (s *Scheduler) Run(ctx context.Context, sub conch.Submitter) error {
	if sub == nil {
		return errors.New("schedule: Run needs a submitter")
	}
	s.sub = sub
	started := s.o.Now()
	var wg sync.WaitGroup
	defer func() {
		s.mu.Lock()
		for id, cancel := range s.watches {
			cancel()
			delete(s.watches, id)
		}
		s.mu.Unlock()
		wg.Wait()
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next, err := s.pass(ctx, started, &wg)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			s.log.Warn("schedules: pass failed; trying again", "err", err, "in", retryDelay)
			next = s.o.Now().Add(retryDelay)
		}
		var tc <-chan time.Time
		if !next.IsZero() {
			timer.Reset(max(next.Sub(s.o.Now()), 0))
			tc = timer.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-tc:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// pass fires the due wakes, starts waits for watches not yet waited on,
// and returns when the next wake is due (zero for none).
func (s *Scheduler) pass(ctx context.Context, started time.Time, wg *sync.WaitGroup) (time.Time, error) {
	es, err := s.o.Store.Schedules(ctx, conch.ConversationKey{})
	if err != nil {
		return time.Time{}, err
	}
	var next time.Time
	soonest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, e := range es {
		if e.Kind == KindWatch {
			s.startWatch(ctx, e, started, wg)
			continue
		}
		now := s.o.Now()
		if e.Next.After(now) {
			soonest(e.Next)
			continue
		}
		n, err := s.fire(ctx, e, started)
		if err != nil {
			s.log.Warn("schedules: wake not delivered; trying again", "id", e.ID, "conversation", e.Key, "err", err)
			soonest(now.Add(retryDelay))
			continue
		}
		soonest(n)
	}
	return next, nil
}

// exists reports whether e is still stored (true when the store cannot say).
func (s *Scheduler) exists(ctx context.Context, e Entry) bool {
	es, err := s.o.Store.Schedules(ctx, e.Key)
	if err != nil {
		return true
	}
	for _, x := range es {
		if x.ID == e.ID {
			return true
		}
	}
	return false
}

// fire submits a due wake and moves it on (a one-shot wake is deleted).
// The message's ExternalID names the wake and its due time, so a wake
// submitted twice (a crash before it was moved on) is stored once.
func (s *Scheduler) fire(ctx context.Context, e Entry, started time.Time) (time.Time, error) {
	text := fmt.Sprintf("[Scheduled wake %s, %s] %s", e.ID, describeWake(e), e.Message)
	if e.Next.Before(started) {
		text += fmt.Sprintf("\n\n(This wake was due at %s, while conch was not running; it fires once now.)", e.Next.UTC().Format("2006-01-02 15:04 MST"))
	}
	in := conch.Inbound{Key: e.Key, Text: text, Origin: e.Origin(),
		ExternalID: fmt.Sprintf("schedule:%s:%d", e.ID, e.Next.UnixMilli()), ReceivedAt: s.o.Now()}
	if _, err := s.sub.Submit(ctx, in); err != nil {
		return time.Time{}, err
	}
	s.log.Info("schedules: wake fired", "id", e.ID, "conversation", e.Key, "due", e.Next)
	if e.Kind != KindCron {
		_, err := s.o.Store.DeleteSchedule(ctx, e.ID)
		return time.Time{}, err
	}
	sched, err := ParseCron(e.Spec)
	if err != nil {
		_, derr := s.o.Store.DeleteSchedule(ctx, e.ID)
		return time.Time{}, errors.Join(err, derr)
	}
	next := sched.Next(s.o.Now().UTC())
	return next, s.o.Store.SetScheduleNext(ctx, e.ID, next)
}

func describeWake(e Entry) string {
	if e.Kind == KindCron {
		return fmt.Sprintf("cron %q", e.Spec)
	}
	return "once"
}

// startWatch waits for a watch on its own goroutine unless one already does.
func (s *Scheduler) startWatch(ctx context.Context, e Entry, started time.Time, wg *sync.WaitGroup) {
	s.mu.Lock()
	if _, ok := s.watches[e.ID]; ok || s.o.Waiter == nil {
		s.mu.Unlock()
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	s.watches[e.ID] = cancel
	s.mu.Unlock()
	w, err := ParseWatch(e.Spec)
	if err != nil {
		s.log.Warn("schedules: dropping unreadable watch", "id", e.ID, "err", err)
		_, _ = s.o.Store.DeleteSchedule(ctx, e.ID)
		cancel()
		return
	}
	recovered := e.CreatedAt.Before(started)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer s.stopWatch(e.ID)
		what, err := s.o.Waiter.Wait(wctx, e.Key, w, recovered)
		if wctx.Err() != nil {
			return // cancelled, or conch is stopping: waited for again at the next start
		}
		if err != nil {
			what = "the watch ended without its condition: " + err.Error()
		}
		if !s.exists(wctx, e) {
			return // cancelled meanwhile (by an operator, from another process)
		}
		text := fmt.Sprintf("[Watch %s, %s] %s\n\n%s", e.ID, w.Describe(), strings.TrimSpace(what), e.Message)
		in := conch.Inbound{Key: e.Key, Text: strings.TrimSpace(text), Origin: e.Origin(), ExternalID: "watch:" + e.ID, ReceivedAt: s.o.Now()}
		for {
			_, err := s.sub.Submit(wctx, in)
			if err == nil {
				break
			}
			s.log.Warn("schedules: watch not delivered; trying again", "id", e.ID, "err", err)
			select {
			case <-wctx.Done():
				return
			case <-time.After(retryDelay):
			}
		}
		s.log.Info("schedules: watch fired", "id", e.ID, "conversation", e.Key)
		if _, err := s.o.Store.DeleteSchedule(context.WithoutCancel(wctx), e.ID); err != nil {
			s.log.Warn("schedules: delete fired watch", "id", e.ID, "err", err)
		}
	}()
}
