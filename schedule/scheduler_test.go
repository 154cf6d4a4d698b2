package schedule

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"conch"
)

// memStore is an in-memory Store.
type memStore struct {
	mu sync.Mutex
	es []Entry
}

func (m *memStore) AddSchedule(_ context.Context, e Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.es = append(m.es, e)
	return nil
}

func (m *memStore) Schedules(_ context.Context, key conch.ConversationKey) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Entry
	for _, e := range m.es {
		if key.IsZero() || e.Key == key {
			out = append(out, e)
		}
	}
	return out, nil
}

func (m *memStore) DeleteSchedule(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.es)
	m.es = slices.DeleteFunc(m.es, func(e Entry) bool { return e.ID == id })
	return len(m.es) < n, nil
}

func (m *memStore) SetScheduleNext(_ context.Context, id string, next time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.es {
		if m.es[i].ID == id {
			m.es[i].Next = next
		}
	}
	return nil
}

// submitter records submissions, refusing a repeated ExternalID as the
// store does.
type submitter struct {
	mu   sync.Mutex
	ins  []conch.Inbound
	seen map[string]bool
	at   []time.Time
}

func (s *submitter) Submit(_ context.Context, in conch.Inbound) (conch.Turn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	if !s.seen[in.ExternalID] {
		s.seen[in.ExternalID] = true
		s.ins = append(s.ins, in)
		s.at = append(s.at, time.Now())
	}
	return conch.Turn{Key: in.Key}, nil
}

func (s *submitter) got() ([]conch.Inbound, []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ins), slices.Clone(s.at)
}

var key = conch.ConversationKey{Channel: conch.ChannelCLI, ID: "local"}

// run starts a scheduler over st in the bubble and returns it and a stop func.
func run(t *testing.T, st Store, sub conch.Submitter, o Options) (*Scheduler, func()) {
	t.Helper()
	o.Store = st
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx, sub) }()
	return s, func() { cancel(); <-done }
}

func TestAtAndAfterFireOnceAtTheirTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, sub := &memStore{}, &submitter{}
		s, stop := run(t, st, sub, Options{})
		defer stop()
		start := time.Now()
		if _, err := s.After(t.Context(), key, 90*time.Minute, "check the oven"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.At(t.Context(), key, start.Add(3*time.Hour), "call back"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(89 * time.Minute)
		synctest.Wait()
		if ins, _ := sub.got(); len(ins) != 0 {
			t.Fatalf("fired early: %v", ins)
		}
		time.Sleep(5 * time.Hour)
		synctest.Wait()
		ins, at := sub.got()
		if len(ins) != 2 {
			t.Fatalf("got %d submissions, want 2", len(ins))
		}
		if got := at[0].Sub(start); got != 90*time.Minute {
			t.Errorf("after fired at +%s, want +90m", got)
		}
		if got := at[1].Sub(start); got != 3*time.Hour {
			t.Errorf("at fired at +%s, want +3h", got)
		}
		if ins[0].Origin.Kind != conch.OriginSchedule || ins[0].Origin.Ref == "" || !strings.Contains(ins[0].Text, "check the oven") {
			t.Errorf("first message = %+v", ins[0])
		}
		if strings.Contains(ins[0].Text, "not running") {
			t.Errorf("an on-time wake says it was missed: %q", ins[0].Text)
		}
		if es, _ := st.Schedules(t.Context(), key); len(es) != 0 {
			t.Errorf("one-shot wakes left in the store: %v", es)
		}
	})
}

func TestCronFiresEveryHourUntilCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, sub := &memStore{}, &submitter{}
		s, stop := run(t, st, sub, Options{})
		defer stop()
		e, err := s.Cron(t.Context(), key, "0 * * * *", "check the build")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3*time.Hour + time.Minute)
		synctest.Wait()
		ins, at := sub.got()
		if len(ins) != 3 {
			t.Fatalf("got %d wakes in 3h, want 3", len(ins))
		}
		for i, a := range at {
			if a.Minute() != 0 || a.Second() != 0 {
				t.Errorf("wake %d at %s, want on the hour", i, a)
			}
		}
		if ok, err := s.Cancel(t.Context(), key, e.ID); !ok || err != nil {
			t.Fatalf("cancel = %v, %v", ok, err)
		}
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if ins, _ := sub.got(); len(ins) != 3 {
			t.Errorf("got %d wakes after cancel, want still 3", len(ins))
		}
	})
}

func TestMissedWakesFireOnceOnStartWithANote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		st, sub := &memStore{}, &submitter{}
		// Left by a conch that stopped 5 hours ago.
		st.es = []Entry{
			{ID: "s-once", Key: key, Kind: KindAt, Message: "water the plants", Next: now.Add(-4 * time.Hour), CreatedAt: now.Add(-6 * time.Hour)},
			{ID: "s-hourly", Key: key, Kind: KindCron, Spec: "@hourly", Message: "check the build", Next: now.Add(-5 * time.Hour).Truncate(time.Hour), CreatedAt: now.Add(-6 * time.Hour)},
		}
		_, stop := run(t, st, sub, Options{})
		defer stop()
		synctest.Wait()
		ins, _ := sub.got()
		if len(ins) != 2 {
			t.Fatalf("got %d submissions at start, want 2 (each missed wake once)", len(ins))
		}
		for _, in := range ins {
			if !strings.Contains(in.Text, "while conch was not running") {
				t.Errorf("missed wake without a note: %q", in.Text)
			}
		}
		es, _ := st.Schedules(t.Context(), key)
		if len(es) != 1 || es[0].ID != "s-hourly" || !es[0].Next.After(now) {
			t.Fatalf("after start the store holds %+v, want the cron wake moved into the future", es)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if ins, _ := sub.got(); len(ins) != 3 {
			t.Errorf("got %d submissions after an hour, want 3", len(ins))
		}
	})
}

func TestLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, sub := &memStore{}, &submitter{}
		s, stop := run(t, st, sub, Options{MaxPerConversation: 2, MinInterval: 10 * time.Minute})
		defer stop()
		ctx := t.Context()
		if _, err := s.Cron(ctx, key, "* * * * *", "spin"); conch.KindOf(err) != conch.KindInvalid || !strings.Contains(err.Error(), "shortest interval") {
			t.Errorf("every minute: err = %v, want the minimum interval named", err)
		}
		if _, err := s.Cron(ctx, key, "not cron", "x"); conch.KindOf(err) != conch.KindInvalid {
			t.Errorf("bad expression: err = %v, want KindInvalid", err)
		}
		if _, err := s.After(ctx, key, -time.Minute, "x"); conch.KindOf(err) != conch.KindInvalid {
			t.Errorf("negative delay: err = %v", err)
		}
		for range 2 {
			if _, err := s.After(ctx, key, time.Hour, "x"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.After(ctx, key, time.Hour, "x"); conch.KindOf(err) != conch.KindInvalid {
			t.Errorf("third entry: err = %v, want the per-conversation limit", err)
		}
		other := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "other"}
		if _, err := s.After(ctx, other, time.Hour, "x"); err != nil {
			t.Errorf("another conversation is limited by this one's entries: %v", err)
		}
		if ok, _ := s.Cancel(ctx, other, mustFirst(t, st, key)); ok {
			t.Error("a conversation cancelled another's wake")
		}
		if err := s.Release(ctx, key); err != nil {
			t.Fatal(err)
		}
		if es, _ := st.Schedules(ctx, key); len(es) != 0 {
			t.Errorf("release left %d entries", len(es))
		}
	})
}

func mustFirst(t *testing.T, st Store, k conch.ConversationKey) string {
	es, err := st.Schedules(t.Context(), k)
	if err != nil || len(es) == 0 {
		t.Fatalf("no entries: %v", err)
	}
	return es[0].ID
}

// waiter fires a watch when told.
type waiter struct{ fire chan string }

func (w *waiter) Wait(ctx context.Context, _ conch.ConversationKey, _ WatchSpec, _ bool) (string, error) {
	select {
	case s := <-w.fire:
		return s, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func TestWatchFiresOnceAndIsRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, sub := &memStore{}, &submitter{}
		w := &waiter{fire: make(chan string)}
		s, stop := run(t, st, sub, Options{Waiter: w})
		defer stop()
		e, err := s.Watch(t.Context(), key, WatchSpec{On: WatchExit, Terminal: 0}, "report the tests")
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		w.fire <- "The command in terminal 0 exited with status 1."
		synctest.Wait()
		ins, _ := sub.got()
		if len(ins) != 1 || ins[0].Origin != (conch.Origin{Kind: conch.OriginWatch, Ref: e.ID}) ||
			!strings.Contains(ins[0].Text, "status 1") || !strings.Contains(ins[0].Text, "report the tests") {
			t.Fatalf("submissions = %+v", ins)
		}
		if es, _ := st.Schedules(t.Context(), key); len(es) != 0 {
			t.Errorf("fired watch left in the store: %v", es)
		}
	})
}
