package web

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"conch"
)

// TestBatchedEventsInOrderOnce: a socket opened with batch=1 (as the page
// opens it) gets the events that waited together in "events" frames: every
// kept event once, in Seq order, streamed text among them in place; a
// socket without it gets one frame per event as before.
func TestBatchedEventsInOrderOnce(t *testing.T) {
	ts := newTestServer(t)
	c := ts.client()
	cv := ts.newConversation(c)
	key := conch.ConversationKey{Channel: conch.ChannelWeb, ID: cv.ID}
	const n = 200
	for i := range n {
		if i%10 == 5 {
			ts.hub.Publish(key, 1, conch.TextDelta{Text: fmt.Sprint("delta ", i)})
			continue
		}
		ts.hub.Publish(key, 1, conch.NoticeEvent{Text: fmt.Sprint("notice ", i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type batchFrame struct {
		wireFrame
		Frames []wireFrame `json:"frames"`
	}
	read := func(batch string) (events []wireEvent, batches int) {
		conn, err := ts.dial(ctx, c, fmt.Sprintf("/api/chat?c=%s&after=0%s", cv.ID, batch))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		// The backlog's kept events are all there at once.
		for len(events) < n-n/10 {
			_, b, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("after %d events: %v", len(events), err)
			}
			var f batchFrame
			if err := json.Unmarshal(b, &f); err != nil {
				t.Fatal(err)
			}
			switch f.Type {
			case "events":
				batches++
				for _, g := range f.Frames {
					if g.Type != "event" || g.Event == nil {
						t.Fatalf("an events frame holds %+v", g)
					}
					events = append(events, *g.Event)
				}
			case "event":
				events = append(events, *f.Event)
			}
		}
		return events, batches
	}
	for _, mode := range []string{"", "&batch=1"} {
		events, batches := read(mode)
		if mode == "" && batches > 0 {
			t.Errorf("a socket without batch=1 got %d events frames", batches)
		}
		if mode != "" && batches == 0 {
			t.Errorf("batch=1: the waiting backlog came one frame per event")
		}
		var last int64
		for i, ev := range events {
			if ev.Type == "text_delta" {
				continue // the backlog holds kept events only
			}
			if ev.Seq != last+1 {
				t.Fatalf("%q: event %d has seq %d after %d: a gap or a repeat", mode, i, ev.Seq, last)
			}
			last = ev.Seq
		}
	}
}
