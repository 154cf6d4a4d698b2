package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"

	"conch"
)

// The cached view is always what a store without a cache reads: through
// queued turns, tool calls, notes, files prepared late, summaries, resets
// and turns that end in every way. The reference is a second handle on the
// same file whose cache is emptied before every read.
func TestModelHistoryCacheMatchesStore(t *testing.T) {
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
	key := conch.ConversationKey{Channel: "web", ID: "c"}
	other := conch.ConversationKey{Channel: "web", ID: "other"}
	check := func(step string, through conch.TurnID) {
		t.Helper()
		got, err := d.ModelHistory(ctx, key, through)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		ref.history = newHistoryCache()
		want, err := ref.ModelHistory(ctx, key, through)
		if err != nil {
			t.Fatalf("%s: reference: %v", step, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s (through %d): cached view\n%+v\nwant\n%+v", step, through, got, want)
		}
		// The caller owns what it gets: changing it changes nothing stored.
		for i := range got.Messages {
			got.Messages[i].Text = "scribbled"
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var queued []conch.Turn
	n := 0
	add := func(k conch.ConversationKey) conch.Turn {
		n++
		tr, _, err := d.AddInbound(ctx, conch.Inbound{Key: k, Sender: "u", Text: fmt.Sprint("message ", n)})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	steps := 300
	if testing.Short() {
		steps = 60
	}
	for step := range steps {
		// Queue one to three messages, some in another conversation.
		for range 1 + rng.IntN(3) {
			queued = append(queued, add(key))
		}
		if rng.IntN(4) == 0 {
			add(other)
		}
		tr := queued[0]
		queued = queued[1:]
		if _, err := d.StartTurn(ctx, tr.ID); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(10) == 0 {
			as := []conch.Attachment{{Name: "notes.txt", MediaType: "text/plain", Size: 3, Transcript: fmt.Sprint("said ", step), Prepared: true}}
			if err := d.SetAttachments(ctx, tr.ID, as); err != nil {
				t.Fatal(err)
			}
		}
		check(fmt.Sprint("step ", step, " start"), tr.ID)
		for c := range rng.IntN(3) {
			call := conch.ToolCall{ID: fmt.Sprint("call", step, c), Name: "bash", Arguments: json.RawMessage(`{"cmd":"ls"}`)}
			if err := d.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{call}}); err != nil {
				t.Fatal(err)
			}
			check(fmt.Sprint("step ", step, " call ", c), tr.ID)
			res := &conch.ToolResult{CallID: call.ID, Name: "bash", Content: fmt.Sprint("file", c)}
			if err := d.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleTool, ToolResult: res}); err != nil {
				t.Fatal(err)
			}
		}
		if rng.IntN(8) == 0 {
			if err := d.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleUser, Note: true, Text: "a hook reported an issue"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleAssistant, Text: fmt.Sprint("answer ", step)}); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprint("step ", step, " answered"), tr.ID)
		status := conch.TurnDone
		if rng.IntN(6) == 0 {
			status = conch.TurnStopped
		}
		if err := d.FinishTurn(ctx, tr.ID, status, ""); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprint("step ", step, " done"), tr.ID)
		check(fmt.Sprint("step ", step, " every turn"), 0)
		switch r := rng.IntN(40); {
		case r == 0:
			if err := d.ResetConversation(ctx, key); err != nil {
				t.Fatal(err)
			}
			queued = nil // stopped by the reset
			check(fmt.Sprint("step ", step, " reset"), 0)
		case r < 4:
			v, err := d.ModelHistory(ctx, key, tr.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Pos) > 2 {
				s := conch.Summary{Text: fmt.Sprint("summary ", step), Through: v.Pos[len(v.Pos)/2], Messages: len(v.Pos) / 2}
				if err := d.AddSummary(ctx, key, s); err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprint("step ", step, " summarized"), tr.ID)
			}
		}
	}
	if d.history.hits < steps {
		t.Errorf("the cache was used %d times (%d misses), want most reads", d.history.hits, d.history.misses)
	}
}

// The cache holds what its bounds allow: least recently used out first.
func TestHistoryCacheBounds(t *testing.T) {
	c := newHistoryCache()
	c.maxConvs, c.maxBytes = 3, 1<<20
	msg := []conch.Message{{Role: conch.RoleUser, Text: "hi"}}
	pos := []conch.HistoryPos{{Turn: 1, Message: 1}}
	for conv := int64(1); conv <= 5; conv++ {
		_, _, _, tok, _ := c.begin(conv, 0, 0, 1)
		c.end(tok, true, conv, 0, 0, 1, 2, msg, pos)
	}
	if len(c.entries) != 3 || c.entries[1] != nil || c.entries[5] == nil {
		t.Errorf("kept %d entries (1: %v, 5: %v), want the newest 3", len(c.entries), c.entries[1] != nil, c.entries[5] != nil)
	}
	big := []conch.Message{{Role: conch.RoleUser, Text: string(make([]byte, 300<<10))}}
	_, _, _, tok, _ := c.begin(9, 0, 0, 1)
	c.end(tok, true, 9, 0, 0, 1, 2, big, pos)
	if c.entries[9] != nil {
		t.Error("a view over a quarter of the cache was kept")
	}
	if len(c.reading) != 0 {
		t.Errorf("%d reads still in flight, want none", len(c.reading))
	}
	// A write while a read is in flight: the read keeps nothing.
	_, _, _, tok, _ = c.begin(2, 0, 0, 1)
	c.written(2, 1)
	c.end(tok, true, 2, 0, 0, 1, 2, msg, pos)
	if c.entries[2] != nil {
		t.Error("a read that overlapped a write was kept")
	}
}
