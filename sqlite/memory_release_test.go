package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"conch"
)

// TestReleaseMemory: ReleaseMemory empties the kept model views and the
// writer's page cache, the next
// read is read whole and equal to what was kept, and releasing while turns
// run and read their views concurrently never changes what a read returns
// (the reference is a second handle on the file whose cache is emptied
// before every read).
func TestReleaseMemory(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ref, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	var refMu sync.Mutex
	reference := func(key conch.ConversationKey, through conch.TurnID) conch.ModelHistory {
		refMu.Lock()
		defer refMu.Unlock()
		ref.history = newHistoryCache()
		h, err := ref.ModelHistory(ctx, key, through)
		if err != nil {
			t.Error(err)
		}
		return h
	}
	// turn runs one turn; want, if set, is what its view must be.
	turn := func(key conch.ConversationKey, n int, want func(conch.TurnID) conch.ModelHistory) conch.TurnID {
		tr, _, err := d.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: fmt.Sprint("message ", n)})
		if err == nil {
			_, err = d.StartTurn(ctx, tr.ID)
		}
		var h conch.ModelHistory
		if err == nil {
			h, err = d.ModelHistory(ctx, key, tr.ID)
		}
		if err == nil && want != nil {
			if w := want(tr.ID); !reflect.DeepEqual(h, w) {
				t.Errorf("%s turn %d: view with releases differs: %d messages, want %d", key, n, len(h.Messages), len(w.Messages))
			}
		}
		if err == nil {
			err = d.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleAssistant, Text: fmt.Sprint("answer ", n)})
		}
		if err == nil {
			err = d.FinishTurn(ctx, tr.ID, conch.TurnDone, "")
		}
		if err != nil {
			t.Error(err) // from the test's goroutines too
		}
		return tr.ID
	}
	keys := []conch.ConversationKey{{Channel: "web", ID: "a"}, {Channel: "web", ID: "b"}, {Channel: "web", ID: "c"}}
	last := map[conch.ConversationKey]conch.TurnID{}
	for n := range 20 {
		for _, k := range keys {
			last[k] = turn(k, n, nil)
		}
	}
	kept := map[conch.ConversationKey]conch.ModelHistory{}
	for _, k := range keys {
		h, err := d.ModelHistory(ctx, k, last[k])
		if err != nil {
			t.Fatal(err)
		}
		kept[k] = h
	}
	if len(d.history.entries) != len(keys) || d.history.bytes == 0 {
		t.Fatalf("before: %d views kept (%d bytes), want %d", len(d.history.entries), d.history.bytes, len(keys))
	}
	// SQLite counts a pager's own structures and one page buffer as cache
	// too (sqlite3PagerMemUsed): about 5 KiB when no page is cached.
	const pagerFloor = 8 << 10
	if w, _ := connMemory(ctx, t, d); w.cache < 8*pagerFloor {
		t.Fatalf("the writer's page cache holds only %d bytes before the release", w.cache)
	}
	if err := d.ReleaseMemory(ctx); err != nil {
		t.Fatal(err)
	}
	if w, _ := connMemory(ctx, t, d); w.cache > pagerFloor {
		t.Errorf("the writer's page cache holds %d bytes after the release", w.cache)
	}
	if len(d.history.entries) != 0 || d.history.bytes != 0 || d.history.lru.Len() != 0 {
		t.Fatalf("after ReleaseMemory: %d views, %d bytes, %d in the LRU list", len(d.history.entries), d.history.bytes, d.history.lru.Len())
	}
	misses := d.history.misses
	for _, k := range keys {
		h, err := d.ModelHistory(ctx, k, last[k])
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(h, kept[k]) || len(h.Messages) != 40 {
			t.Fatalf("%s read again after the release: %d messages, differs from the kept view (%d)", k, len(h.Messages), len(kept[k].Messages))
		}
	}
	if d.history.misses != misses+len(keys) || len(d.history.entries) != len(keys) {
		t.Fatalf("after the release: %d misses (want %d), %d views kept again", d.history.misses-misses, len(keys), len(d.history.entries))
	}

	// Concurrently: turns in every conversation, releases in between.
	stop := make(chan struct{})
	released := make(chan struct{})
	go func() {
		defer close(released)
		for {
			select {
			case <-stop:
				return
			default:
				if err := d.ReleaseMemory(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Go(func() {
			for n := 20; n < 40; n++ {
				turn(k, n, func(id conch.TurnID) conch.ModelHistory { return reference(k, id) })
			}
		})
	}
	wg.Wait()
	close(stop)
	<-released
}
