package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/sqlite"
	"conch/sqlite/sqlitetest"
)

var hubKey = conch.ConversationKey{Channel: conch.ChannelWeb, ID: "h"}

func notice(s string) conch.EventData { return conch.NoticeEvent{Text: s} }

// drain reads n events or fails.
func drain(t *testing.T, c <-chan conch.Event, n int) []conch.Event {
	t.Helper()
	var evs []conch.Event
	for len(evs) < n {
		select {
		case ev, ok := <-c:
			if !ok {
				t.Fatalf("subscription closed after %d of %d events", len(evs), n)
			}
			evs = append(evs, ev)
		case <-time.After(5 * time.Second):
			t.Fatalf("got %d of %d events", len(evs), n)
		}
	}
	return evs
}

func TestHubNumbersAndResumesWithoutGapOrDuplicate(t *testing.T) {
	db := sqlitetest.MustOpenMemory(t)
	ctx := t.Context()
	h := NewHub(db, nil, nil)
	for i := range 5 {
		if ev := h.Publish(ctx, hubKey, 1, notice("n")); ev.Seq != int64(i+1) {
			t.Fatalf("event %d got Seq %d", i, ev.Seq)
		}
	}
	// Ephemeral events carry the last kept Seq and are not kept.
	if ev := h.Publish(ctx, hubKey, 1, conch.ToolProgress{Text: "…"}); ev.Seq != 5 {
		t.Fatalf("ephemeral event got Seq %d, want 5", ev.Seq)
	}
	if err := h.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sub, err := h.Subscribe(ctx, hubKey, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := drain(t, sub, 3)
	for i, ev := range got {
		if ev.Seq != int64(i+3) {
			t.Fatalf("backlog %d has Seq %d, want %d", i, ev.Seq, i+3)
		}
	}
	h.Publish(ctx, hubKey, 1, notice("live"))
	if ev := drain(t, sub, 1)[0]; ev.Seq != 6 || ev.Data.(conch.NoticeEvent).Text != "live" {
		t.Fatalf("live event: %+v", ev)
	}
	if err := h.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// A new hub over the same log (a restart) continues the numbering and
	// serves the backlog from the log.
	h2 := NewHub(db, nil, nil)
	sub2, err := h2.Subscribe(ctx, hubKey, 4)
	if err != nil {
		t.Fatal(err)
	}
	got = drain(t, sub2, 2)
	if got[0].Seq != 5 || got[1].Seq != 6 {
		t.Fatalf("after restart got %d, %d; want 5, 6", got[0].Seq, got[1].Seq)
	}
	if ev := h2.Publish(ctx, hubKey, 2, notice("after restart")); ev.Seq != 7 {
		t.Fatalf("after restart got Seq %d, want 7", ev.Seq)
	}
	if ev := drain(t, sub2, 1)[0]; ev.Seq != 7 {
		t.Fatalf("live after restart: %+v", ev)
	}
}

func TestHubCutsOffASlowSubscriberAndNeverBlocks(t *testing.T) {
	h := NewHub(nil, nil, nil)
	ctx := t.Context()
	sub, err := h.Subscribe(ctx, hubKey, -1)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		for range subBuffer + 10 {
			h.Publish(ctx, hubKey, 0, notice("x"))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish blocked on a subscriber that does not read")
	}
	n := 0
	for range sub {
		n++
	}
	if n != subBuffer {
		t.Fatalf("slow subscriber got %d events before it was cut off, want %d", n, subBuffer)
	}
	// It resumes from its last Seq and misses nothing.
	sub, err = h.Subscribe(ctx, hubKey, int64(n))
	if err != nil {
		t.Fatal(err)
	}
	if got := drain(t, sub, 10); got[0].Seq != int64(n+1) || got[9].Seq != int64(n+10) {
		t.Fatalf("resumed at %d..%d, want %d..%d", got[0].Seq, got[9].Seq, n+1, n+10)
	}
}

func TestHubGapWithoutLogIsReported(t *testing.T) {
	h := NewHub(nil, nil, nil)
	for range ringSize + 5 {
		h.Publish(t.Context(), hubKey, 0, notice("x"))
	}
	if _, err := h.Subscribe(t.Context(), hubKey, 1); conch.KindOf(err) != conch.KindNotFound {
		t.Fatalf("got %v, want KindNotFound for events no longer kept", err)
	}
}

func TestHubConcurrentPublishersAndSubscribersSeeOneOrder(t *testing.T) {
	db := sqlitetest.MustOpenMemory(t)
	h := NewHub(db, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const subs, pubs, each = 20, 4, 50
	var wg sync.WaitGroup
	results := make([][]int64, subs)
	for i := range subs {
		sub, err := h.Subscribe(ctx, hubKey, 0)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range sub {
				results[i] = append(results[i], ev.Seq)
				if len(results[i]) == pubs*each {
					return
				}
			}
		}()
	}
	var pw sync.WaitGroup
	for range pubs {
		pw.Add(1)
		go func() {
			defer pw.Done()
			for range each {
				h.Publish(ctx, hubKey, 0, notice("x"))
			}
		}()
	}
	pw.Wait()
	wg.Wait()
	for i, seqs := range results {
		for j, s := range seqs {
			if s != int64(j+1) {
				t.Fatalf("subscriber %d: event %d has Seq %d", i, j, s)
			}
		}
	}
	all, err := db.EventsSince(ctx, hubKey, 0, 1000)
	if err != nil || len(all) != pubs*each {
		t.Fatalf("log holds %d events (%v), want %d", len(all), err, pubs*each)
	}
}

func TestHubAllConversationsSubscriber(t *testing.T) {
	h := NewHub(nil, nil, nil)
	sub, err := h.Subscribe(t.Context(), conch.ConversationKey{}, -1)
	if err != nil {
		t.Fatal(err)
	}
	h.Publish(t.Context(), hubKey, 0, notice("a"))
	other := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "o"}
	h.Publish(t.Context(), other, 0, notice("b"))
	got := drain(t, sub, 2)
	if got[0].Key != hubKey || got[1].Key != other {
		t.Fatalf("got %v, %v", got[0].Key, got[1].Key)
	}
}

// TestHubHoldsEventsOnlyForSubscribedConversations: with a log, a
// conversation nobody subscribes to holds none of its events in memory (the
// soak found 256 a conversation held for every conversation ever seen); a
// subscriber's conversation keeps at most ringSize, dropped with its last
// subscriber; resuming reads the log either way, without a gap.
func TestHubHoldsEventsOnlyForSubscribedConversations(t *testing.T) {
	db := sqlitetest.MustOpenMemory(t)
	ctx := t.Context()
	h := NewHub(db, nil, nil)
	ringLen := func() int {
		c := h.conv(hubKey)
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.ring)
	}
	for range 300 {
		h.Publish(ctx, hubKey, 1, notice("n"))
	}
	if n := ringLen(); n != 0 {
		t.Fatalf("%d events held for a conversation without subscribers", n)
	}
	sctx, cancel := context.WithCancel(ctx)
	sub, err := h.Subscribe(sctx, hubKey, 100) // the backlog from the log
	if err != nil {
		t.Fatal(err)
	}
	got := drain(t, sub, 200)
	if got[0].Seq != 101 || got[199].Seq != 300 {
		t.Fatalf("backlog %d..%d, want 101..300", got[0].Seq, got[199].Seq)
	}
	for range ringSize + 10 {
		h.Publish(ctx, hubKey, 1, notice("live"))
		drain(t, sub, 1)
	}
	if n := ringLen(); n != ringSize {
		t.Fatalf("%d events held for a subscribed conversation, want %d", n, ringSize)
	}
	cancel()
	for ringLen() != 0 { // the subscription ends in context.AfterFunc's goroutine
		time.Sleep(time.Millisecond)
	}
	// A later subscriber resumes from the log without a gap.
	sub2, err := h.Subscribe(ctx, hubKey, 290)
	if err != nil {
		t.Fatal(err)
	}
	got = drain(t, sub2, ringSize+20)
	for i, ev := range got {
		if ev.Seq != int64(291+i) {
			t.Fatalf("resumed event %d has Seq %d, want %d", i, ev.Seq, 291+i)
		}
	}
}

// heldWrites is an AsyncEventLog over a real store whose writes end only
// when the test says: the write of event Seq n ends with release(n) (with
// fail set, as refused).
type heldWrites struct {
	EventLog
	mu    sync.Mutex
	held  map[int64]func(error)
	fail  map[int64]bool
	queue chan int64 // each Seq as its write is queued
}

func newHeldWrites(db EventLog) *heldWrites {
	return &heldWrites{EventLog: db, held: map[int64]func(error){}, fail: map[int64]bool{}, queue: make(chan int64, 100)}
}

func (l *heldWrites) AppendEventAsync(ev conch.Event, done func(error)) error {
	l.mu.Lock()
	l.held[ev.Seq] = func(error) {
		if l.fail[ev.Seq] {
			done(errors.New("disk says no"))
			return
		}
		done(l.AppendEvent(context.Background(), ev))
	}
	l.mu.Unlock()
	l.queue <- ev.Seq
	return nil
}

func (l *heldWrites) release(n int64) {
	l.mu.Lock()
	fn := l.held[n]
	delete(l.held, n)
	l.mu.Unlock()
	fn(nil)
}

// noEvent fails if sub has an event now.
func noEvent(t *testing.T, sub <-chan conch.Event, why string) {
	t.Helper()
	select {
	case ev := <-sub:
		t.Fatalf("%s: got %+v", why, ev)
	default:
	}
}

// TestHubSendsOnlyKeptEvents: observers see an event when it is published;
// subscribers only once it is kept, in publish order, ephemeral ones behind
// the kept ones before them; a subscriber that comes while writes are under
// way gets each event once; an event the log refuses goes out live with the
// last kept Seq and is never handed out as kept.
func TestHubSendsOnlyKeptEvents(t *testing.T) {
	db := sqlitetest.MustOpenMemory(t)
	log := newHeldWrites(db)
	ctx := t.Context()
	h := NewHub(log, nil, nil)
	var observed []int64
	h.Observe(func(ev conch.Event) { observed = append(observed, ev.Seq) })
	early, err := h.Subscribe(ctx, hubKey, 0)
	if err != nil {
		t.Fatal(err)
	}

	h.Publish(ctx, hubKey, 1, notice("one"))
	h.Publish(ctx, hubKey, 1, conch.ToolProgress{Text: "working"})
	h.Publish(ctx, hubKey, 1, notice("two"))
	if len(observed) != 3 || observed[0] != 1 || observed[2] != 2 {
		t.Fatalf("observers saw Seqs %v, want [1 1 2] at once", observed)
	}
	noEvent(t, early, "before any write ended")
	if last, _ := h.LastSeq(ctx, hubKey); last != 0 {
		t.Fatalf("LastSeq %d before any write ended, want 0", last)
	}

	log.release(1)
	got := drain(t, early, 2)
	if got[0].Seq != 1 || got[1].Seq != 1 || !conch.Ephemeral(got[1].Data) {
		t.Fatalf("after the first write: %+v", got)
	}
	noEvent(t, early, "the second write is under way")
	late, err := h.Subscribe(ctx, hubKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ev := drain(t, late, 1)[0]; ev.Seq != 1 {
		t.Fatalf("late subscriber's backlog: %+v", ev)
	}

	log.fail[3] = true
	h.Publish(ctx, hubKey, 1, notice("refused"))
	h.Publish(ctx, hubKey, 1, notice("three"))
	log.release(2)
	log.release(3)
	log.release(4)
	for _, sub := range []<-chan conch.Event{early, late} {
		got := drain(t, sub, 3)
		if got[0].Seq != 2 || got[1].Seq != 2 || got[1].Data.(conch.NoticeEvent).Text != "refused" || got[2].Seq != 4 {
			t.Fatalf("after the rest: %+v", got)
		}
	}
	if err := h.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if last, _ := h.LastSeq(ctx, hubKey); last != 4 {
		t.Fatalf("LastSeq %d, want 4", last)
	}
	// After a restart numbering goes on past the gap, and the log has no
	// event that was refused.
	h2 := NewHub(db, nil, nil)
	if ev := h2.Publish(ctx, hubKey, 2, notice("after")); ev.Seq != 5 {
		t.Fatalf("after a restart Seq %d, want 5", ev.Seq)
	}
	if err := h2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := db.EventsSince(ctx, hubKey, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, ev := range evs {
		seqs = append(seqs, ev.Seq)
	}
	if fmt.Sprint(seqs) != "[1 2 4 5]" {
		t.Fatalf("log holds %v, want [1 2 4 5]", seqs)
	}
}

// TestHubFlushWaitsForWrites: Flush returns once every write ended, or when
// its ctx does.
func TestHubFlushWaitsForWrites(t *testing.T) {
	log := newHeldWrites(sqlitetest.MustOpenMemory(t))
	h := NewHub(log, nil, nil)
	h.Publish(t.Context(), hubKey, 1, notice("one"))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := h.Flush(ctx); err == nil {
		t.Fatal("Flush returned while a write was under way")
	}
	go log.release(1)
	if err := h.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestHubResumesFromARingWithGaps: an event the log refused keeps its
// number, so the ring's Seqs may have gaps; a subscriber resuming from the
// ring gets exactly the kept events after its Seq (the ring was indexed by
// subtraction once: events lost, or a panic).
func TestHubResumesFromARingWithGaps(t *testing.T) {
	for _, tc := range []struct {
		fail     []int64
		n, after int64
		want     string
	}{
		{[]int64{3}, 5, 3, "[4 5]"},
		{[]int64{3}, 5, 4, "[5]"},
		{[]int64{3, 4}, 5, 4, "[5]"},
		{[]int64{3, 4}, 6, 5, "[6]"},
	} {
		t.Run(fmt.Sprint(tc.fail, tc.after), func(t *testing.T) {
			log := newHeldWrites(sqlitetest.MustOpenMemory(t))
			ctx := t.Context()
			h := NewHub(log, nil, nil)
			if _, err := h.Subscribe(ctx, hubKey, 0); err != nil { // keeps the ring
				t.Fatal(err)
			}
			for _, s := range tc.fail {
				log.fail[s] = true
			}
			for i := int64(1); i <= tc.n; i++ {
				h.Publish(ctx, hubKey, 1, notice(fmt.Sprint(i)))
			}
			for i := int64(1); i <= tc.n; i++ {
				log.release(i)
			}
			if err := h.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			sub, err := h.Subscribe(ctx, hubKey, tc.after)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for len(sub) > 0 {
				got = append(got, (<-sub).Seq)
			}
			if fmt.Sprint(got) != tc.want {
				t.Fatalf("Subscribe(after=%d): %v, want %s", tc.after, got, tc.want)
			}
		})
	}
}

// heldReads is the real store whose event log reads wait until released.
type heldReads struct {
	*sqlite.DB
	entered, release chan struct{}
}

func (l *heldReads) EventsSince(ctx context.Context, key conch.ConversationKey, after int64, limit int) ([]conch.Event, error) {
	l.entered <- struct{}{}
	<-l.release
	return l.DB.EventsSince(ctx, key, after, limit)
}

// TestHubNeverHoldsTheStoreWriter: a Subscribe reading a long backlog holds
// its conversation; the store's writer, answering that conversation's
// queued event, must not wait for it: another conversation's message is
// stored while the read is still under way.
func TestHubNeverHoldsTheStoreWriter(t *testing.T) {
	db := sqlitetest.MustOpenFile(t)
	log := &heldReads{DB: db, entered: make(chan struct{}), release: make(chan struct{})}
	ctx := t.Context()
	h := NewHub(log, nil, nil)
	h.Publish(ctx, hubKey, 1, notice("kept"))
	if err := h.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	h.Publish(ctx, hubKey, 1, notice("queued"))
	subscribed := make(chan error, 1)
	go func() { _, err := h.Subscribe(ctx, hubKey, 0); subscribed <- err }()
	<-log.entered
	stored := make(chan error, 1)
	go func() {
		_, _, err := db.AddInbound(ctx, conch.Inbound{Key: conch.ConversationKey{Channel: conch.ChannelWeb, ID: "y"}, Sender: "u", Text: "other"})
		stored <- err
	}()
	select {
	case err := <-stored:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("another conversation's message waited for a log read of this one")
	}
	close(log.release)
	if err := <-subscribed; err != nil {
		t.Fatal(err)
	}
	if err := h.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// fullDisk is an AsyncEventLog over a real store whose disk has no room
// for the first `full` writes of each event (conch.ErrStoreFull).
type fullDisk struct {
	EventLog
	mu    sync.Mutex
	full  int
	tries map[int64]int
}

func (l *fullDisk) AppendEventAsync(ev conch.Event, done func(error)) error {
	l.mu.Lock()
	l.tries[ev.Seq]++
	refuse := l.tries[ev.Seq] <= l.full
	l.mu.Unlock()
	go func() {
		if refuse {
			done(fmt.Errorf("append event: %w", conch.ErrStoreFull))
			return
		}
		done(l.AppendEvent(context.Background(), ev))
	}()
	return nil
}

// TestHubKeepsEventsThroughAFullDisk: an event the disk had no room for is
// written again until it is kept, the conversation's later events behind
// it, so subscribers and the log get every event once, in order (dropped,
// it left a gap in the log and an answer the web chat never showed); once
// the hub stops retrying, Flush ends and such an event is given up.
func TestHubKeepsEventsThroughAFullDisk(t *testing.T) {
	ctx := t.Context()
	db := sqlitetest.MustOpenMemory(t)
	log := &fullDisk{EventLog: db, full: 3, tries: map[int64]int{}}
	h := NewHub(log, nil, nil)
	h.retryWait = time.Millisecond
	sub, err := h.Subscribe(ctx, hubKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.Publish(ctx, hubKey, 1, notice("one"))
	h.Publish(ctx, hubKey, 1, conch.ToolProgress{Text: "working"})
	h.Publish(ctx, hubKey, 1, notice("two"))
	got := drain(t, sub, 3)
	if got[0].Seq != 1 || got[0].Data != notice("one") || got[1].Data != (conch.ToolProgress{Text: "working"}) || got[2].Seq != 2 || got[2].Data != notice("two") {
		t.Fatalf("subscriber got %+v, want one (1), the progress, two (2)", got)
	}
	if err := h.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	kept, err := db.EventsSince(ctx, hubKey, 0, 10)
	if err != nil || len(kept) != 2 || kept[0].Seq != 1 || kept[1].Seq != 2 {
		t.Fatalf("the log has %+v (%v), want events 1 and 2", kept, err)
	}
	log.mu.Lock()
	tries := log.tries[1]
	log.mu.Unlock()
	if tries != 4 {
		t.Errorf("event 1 written %d times, want 4 (three refused for room)", tries)
	}

	// The disk stays full and conch stops: the event is given up.
	log.mu.Lock()
	log.full = 1 << 30
	log.mu.Unlock()
	h.Publish(ctx, hubKey, 2, notice("three"))
	time.Sleep(20 * time.Millisecond) // refused a few times
	h.StopRetrying()
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := h.Flush(fctx); err != nil {
		t.Fatalf("Flush after StopRetrying: %v", err)
	}
	if ev := drain(t, sub, 1)[0]; ev.Data != notice("three") || ev.Seq != 2 {
		t.Errorf("given up: got %+v, want it live with the last kept Seq (2)", ev)
	}
}
