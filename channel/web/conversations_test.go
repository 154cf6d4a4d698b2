package web

import (
	"context"
	"errors"
	"testing"
	"time"

	"conch"
)

// The in-memory ConversationStore behaves as sqlite's (sqlite's
// TestWebConversations asserts the same): creation order, numbered default
// titles, not-found answers.
func TestConversationsInMemory(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 1, 10, 0, 0, 500, time.UTC)
	cs := &conversations{store: NewMemConversations(), now: func() time.Time { return now }}
	a, err := cs.Create(ctx, "")
	if err != nil || a.Title != "Conversation 1" || !a.Created.Equal(now.Truncate(time.Second)) {
		t.Fatalf("create: got %+v (%v), want Conversation 1 created at %s", a, err, now.Truncate(time.Second))
	}
	b, err := cs.Create(ctx, "  Build   it ")
	if err != nil || b.Title != "Build it" {
		t.Fatalf("create with title: got %+v (%v)", b, err)
	}
	if _, err := cs.Rename(ctx, a.ID, "Renamed"); err != nil {
		t.Fatal(err)
	}
	list, err := cs.List(ctx)
	if err != nil || len(list) != 2 || list[0].ID != b.ID || list[1].Title != "Renamed" {
		t.Fatalf("list: got %+v (%v), want newest first, the first renamed", list, err)
	}
	if err := cs.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	var ce *conch.Error
	if _, err := cs.Get(ctx, a.ID); !errors.As(err, &ce) || ce.Kind != conch.KindNotFound {
		t.Errorf("get deleted: got %v, want KindNotFound", err)
	}
	if err := cs.Delete(ctx, a.ID); !errors.As(err, &ce) || ce.Kind != conch.KindNotFound {
		t.Errorf("delete twice: got %v, want KindNotFound", err)
	}
	if c, err := cs.Create(ctx, ""); err != nil || c.Title != "Conversation 2" {
		t.Errorf("create after a delete: got %+v (%v), want Conversation 2 (one is left)", c, err)
	}
}
