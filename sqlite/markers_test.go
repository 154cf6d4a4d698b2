package sqlite

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"conch"
)

// Migration 0011 moves the web conversation list, handled commands and
// sent-mail ids out of cursors, and leaves channel positions there.
func TestMigrateStateTables(t *testing.T) {
	ctx := context.Background()
	conn := memConn(t)
	ms, err := loadMigrations(migrationFS)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, conn, ms[:10]); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC).UnixMilli()
	for name, value := range map[string]string{
		"web:conversations": `[{"id":"ca","title":"First","created":"2026-10-01T09:00:00Z"},` +
			`{"id":"cb","title":"Second","created":"2026-10-02T09:30:00Z"}]`,
		"command:matrix:$ev1":                  "2026-11-01T10:00:00Z",
		"command:telegram:42":                  "2026-11-01T10:00:00Z",
		"email:sent:conch.abc@example.org":     "alice@example.org <root@example.org>",
		"email:INBOX:uid":                      "7:12:1790000000",
		"matrix:@conch:example.org:next_batch": "s1",
		"web:login:aaaa":                       "1790000000000",
		"web:login:bbbb":                       "used 2026-11-01T10:00:00Z",
		"pairing:code:ABCDEFGH":                "",
	} {
		if _, err := conn.ExecContext(ctx, `INSERT INTO cursors (name, value, updated_at) VALUES (?, ?, ?)`, name, value, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := migrate(ctx, conn, ms); err != nil {
		t.Fatal(err)
	}
	rows := func(q string) []string {
		t.Helper()
		rs, err := conn.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		var got []string
		for rs.Next() {
			var a, b, c any
			if err := rs.Scan(&a, &b, &c); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%v|%v|%v", a, b, c))
		}
		return got
	}
	check := func(what string, got []string, want ...string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: got %q, want %q", what, got, want)
		}
	}
	check("web conversations", rows(`SELECT id, title, created_at FROM web_conversations ORDER BY seq`),
		fmt.Sprintf("ca|First|%d", time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC).UnixMilli()),
		fmt.Sprintf("cb|Second|%d", time.Date(2026, 10, 2, 9, 30, 0, 0, time.UTC).UnixMilli()))
	check("markers", rows(`SELECT scope, id, expires_at FROM markers ORDER BY id`),
		fmt.Sprintf("command|matrix:$ev1|%d", at+conch.MarkerTTL.Milliseconds()),
		fmt.Sprintf("command|telegram:42|%d", at+conch.MarkerTTL.Milliseconds()))
	check("sent ids", rows(`SELECT channel, id, conversation FROM sent_ids`),
		"email|conch.abc@example.org|alice@example.org <root@example.org>")
	check("cursors left", rows(`SELECT name, value, updated_at FROM cursors ORDER BY name`),
		fmt.Sprintf("email:INBOX:uid|7:12:1790000000|%d", at),
		fmt.Sprintf("matrix:@conch:example.org:next_batch|s1|%d", at))
	check("web logins", rows(`SELECT token_hash, expires_at, 0 FROM web_logins`), "aaaa|1790000000000|0")
	var sentExp int64
	if err := conn.QueryRowContext(ctx, `SELECT expires_at FROM sent_ids`).Scan(&sentExp); err != nil || sentExp != at+conch.SentTTL.Milliseconds() {
		t.Errorf("sent id expires at %d (%v), want %d", sentExp, err, at+conch.SentTTL.Milliseconds())
	}
}

func TestMarkersExpireAndPrune(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	d, err := Open(ctx, MemoryPath, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mark := func(scope, id string, want bool) {
		t.Helper()
		first, err := d.Mark(ctx, scope, id)
		if err != nil || first != want {
			t.Fatalf("Mark(%s, %s) at %s: got %v (%v), want %v", scope, id, now, first, err, want)
		}
	}
	mark("command", "matrix:$a", true)
	mark("command", "matrix:$a", false)
	mark("other", "matrix:$a", true) // scopes are apart
	if _, err := d.Mark(ctx, "", "x"); err == nil {
		t.Error("Mark with an empty scope: got nil, want an error")
	}
	key := conch.ConversationKey{Channel: conch.ChannelEmail, ID: "alice@example.org"}
	if err := d.RecordSent(ctx, key, "conch.1@example.org"); err != nil {
		t.Fatal(err)
	}
	sent := func(want bool) {
		t.Helper()
		got, ok, err := d.SentConversation(ctx, conch.ChannelEmail, "conch.1@example.org")
		if err != nil || ok != want || (ok && got != key) {
			t.Fatalf("SentConversation at %s: got %v %v (%v), want %v", now, got, ok, err, want)
		}
	}
	sent(true)

	now = now.Add(conch.MarkerTTL - time.Millisecond)
	mark("command", "matrix:$a", false) // a redelivery within the window
	if n, err := d.Prune(ctx, now); err != nil || n != 0 {
		t.Fatalf("Prune before expiry: %d rows (%v), want 0", n, err)
	}
	now = now.Add(time.Millisecond)
	if n, err := d.Prune(ctx, now); err != nil || n != 2 {
		t.Fatalf("Prune at MarkerTTL: %d rows (%v), want the 2 markers", n, err)
	}
	mark("command", "matrix:$a", true) // forgotten, so new again
	sent(true)
	now = now.Add(conch.SentTTL - conch.MarkerTTL)
	sent(false) // expired, even before the janitor ran
	if n, err := d.Prune(ctx, now); err != nil || n != 2 {
		t.Fatalf("Prune at SentTTL: %d rows (%v), want the sent id and the renewed marker", n, err)
	}
}

// An expired marker not yet pruned counts as absent.
func TestMarkExpiredNotPruned(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	d, err := Open(ctx, MemoryPath, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if first, err := d.Mark(ctx, "command", "x"); !first || err != nil {
		t.Fatalf("first Mark: %v %v", first, err)
	}
	now = now.Add(conch.MarkerTTL)
	if first, err := d.Mark(ctx, "command", "x"); !first || err != nil {
		t.Fatalf("Mark after expiry: got %v (%v), want first", first, err)
	}
	if first, err := d.Mark(ctx, "command", "x"); first || err != nil {
		t.Fatalf("Mark again: got %v (%v), want not first", first, err)
	}
}

// The janitor prunes at once and then every interval, until ctx ends.
func TestRunJanitor(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	now := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	d, err := Open(ctx, MemoryPath, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Mark(ctx, "command", "x"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(conch.MarkerTTL)
	mu.Unlock()
	done := make(chan struct{})
	go func() { defer close(done); d.RunJanitor(ctx, time.Hour, slog.New(slog.DiscardHandler)) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := d.r.QueryRowContext(ctx, `SELECT count(*) FROM markers`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the janitor did not prune the expired marker")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
}

func TestWebConversations(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	a, err := d.CreateWebConversation(ctx, conch.WebConversation{ID: "ca", Created: at})
	if err != nil || a.Title != "Conversation 1" {
		t.Fatalf("create without title: got %+v (%v), want title Conversation 1", a, err)
	}
	b, err := d.CreateWebConversation(ctx, conch.WebConversation{ID: "cb", Title: "Plans", Created: at.Add(time.Second)})
	if err != nil || b.Title != "Plans" {
		t.Fatalf("create with title: got %+v (%v)", b, err)
	}
	if _, err := d.CreateWebConversation(ctx, conch.WebConversation{ID: "ca"}); err == nil {
		t.Error("create with a taken id: got nil, want an error")
	}
	c, err := d.CreateWebConversation(ctx, conch.WebConversation{ID: "cc", Created: at})
	if err != nil || c.Title != "Conversation 3" {
		t.Fatalf("third: got %+v (%v), want Conversation 3", c, err)
	}
	if ok, err := d.RenameWebConversation(ctx, "ca", "Renamed"); !ok || err != nil {
		t.Fatalf("rename: %v %v", ok, err)
	}
	if ok, err := d.DeleteWebConversation(ctx, "cb"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if ok, err := d.RenameWebConversation(ctx, "cb", "x"); ok || err != nil {
		t.Fatalf("rename deleted: got %v (%v), want false", ok, err)
	}
	if ok, err := d.DeleteWebConversation(ctx, "cb"); ok || err != nil {
		t.Fatalf("delete twice: got %v (%v), want false", ok, err)
	}
	list, err := d.WebConversations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []conch.WebConversation{{ID: "ca", Title: "Renamed", Created: at}, {ID: "cc", Title: "Conversation 3", Created: at}}
	if fmt.Sprint(list) != fmt.Sprint(want) {
		t.Errorf("list: got %v, want %v (creation order)", list, want)
	}
	got, ok, err := d.WebConversation(ctx, "cc")
	if err != nil || !ok || got != want[1] {
		t.Errorf("get: got %v %v (%v), want %v", got, ok, err, want[1])
	}
	if _, ok, err := d.WebConversation(ctx, "nope"); ok || err != nil {
		t.Errorf("get unknown: got %v (%v), want false", ok, err)
	}
}

// Two processes (two handles on one file) creating conversations at once
// lose none of them: each change is one statement.
func TestWebConversationsAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "conch.db")
	var dbs [2]*DB
	for i := range dbs {
		d, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		dbs[i] = d
	}
	const each = 20
	var wg sync.WaitGroup
	for i, d := range dbs {
		wg.Go(func() {
			for j := range each {
				if _, err := d.CreateWebConversation(ctx, conch.WebConversation{ID: fmt.Sprintf("c%d-%d", i, j), Created: time.Now()}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	list, err := dbs[0].WebConversations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	titles := map[string]bool{}
	for _, c := range list {
		titles[c.Title] = true
	}
	if len(list) != 2*each || len(titles) != 2*each {
		t.Errorf("got %d conversations with %d distinct titles, want %d each", len(list), len(titles), 2*each)
	}
}

// Storing "" deletes the cursor's row: a cleared cursor (a used pairing
// code) leaves nothing behind.
func TestSetEmptyCursorDeletes(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.SetCursor(ctx, "pairing:code:ABC", `{"code":"ABC"}`); err != nil {
		t.Fatal(err)
	}
	if err := d.SetCursor(ctx, "pairing:code:ABC", ""); err != nil {
		t.Fatal(err)
	}
	if v, err := d.Cursor(ctx, "pairing:code:ABC"); v != "" || err != nil {
		t.Errorf("Cursor after clearing: got %q (%v), want \"\"", v, err)
	}
	var n int
	if err := d.r.QueryRowContext(ctx, `SELECT count(*) FROM cursors`).Scan(&n); err != nil || n != 0 {
		t.Errorf("rows after clearing: got %d (%v), want 0", n, err)
	}
	if err := d.SetCursor(ctx, "never:set", ""); err != nil {
		t.Errorf("clearing an unset cursor: %v", err)
	}
}

// A login token is taken once; an expired one is pruned.
func TestWebLogins(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	d, err := Open(ctx, MemoryPath, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	exp := now.Add(10 * time.Minute)
	for _, h := range []string{"used", "left"} {
		if err := d.CreateWebLogin(ctx, h, exp); err != nil {
			t.Fatal(err)
		}
	}
	if got, ok, err := d.TakeWebLogin(ctx, "used"); err != nil || !ok || !got.Equal(exp) {
		t.Fatalf("take: got %v %v (%v), want %v", got, ok, err, exp)
	}
	if _, ok, err := d.TakeWebLogin(ctx, "used"); err != nil || ok {
		t.Fatalf("take again: got %v (%v), want none", ok, err)
	}
	if n, err := d.Prune(ctx, exp); err != nil || n != 1 {
		t.Fatalf("prune at expiry: %d rows (%v), want the token left", n, err)
	}
	if _, ok, err := d.TakeWebLogin(ctx, "left"); err != nil || ok {
		t.Fatalf("take pruned: got %v (%v), want none", ok, err)
	}
}
