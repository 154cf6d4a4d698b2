package gateway

import (
	"context"
	"sync"
	"testing"
	"time"

	"conch"
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
