package sqlite

import (
	"context"
	"testing"
	"time"
)

func TestWebSessions(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, s := range []struct {
		id  string
		exp time.Time
	}{{"a", now.Add(time.Hour)}, {"b", now.Add(2 * time.Hour)}, {"old", now.Add(-time.Second)}} {
		if err := d.CreateWebSession(ctx, s.id, "sh-"+s.id, "th-"+s.id, s.exp); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.CreateWebSession(ctx, "a", "x", "y", now); err == nil {
		t.Error("a second session with the same id was stored")
	}
	sh, th, exp, err := d.WebSession(ctx, "a")
	if err != nil || sh != "sh-a" || th != "th-a" || !exp.Equal(now.Add(time.Hour)) {
		t.Fatalf("session a: %q %q %v %v", sh, th, exp, err)
	}
	if err := d.PruneWebSessions(ctx, now); err != nil {
		t.Fatal(err)
	}
	if sh, _, _, err := d.WebSession(ctx, "old"); err != nil || sh != "" {
		t.Fatalf("expired session after prune: %q %v, want none", sh, err)
	}
	if err := d.DeleteWebSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if sh, _, _, _ := d.WebSession(ctx, "a"); sh != "" {
		t.Fatal("deleted session still there")
	}
	if sh, _, _, _ := d.WebSession(ctx, "b"); sh == "" {
		t.Fatal("deleting one session deleted another")
	}
	if err := d.DeleteWebSessions(ctx); err != nil {
		t.Fatal(err)
	}
	if sh, _, _, _ := d.WebSession(ctx, "b"); sh != "" {
		t.Fatal("a session survived DeleteWebSessions")
	}
}
