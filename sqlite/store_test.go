package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"conch"
	"conch/sqlite"
	"conch/sqlite/sqlitetest"
	"conch/sqlite/storetest"
)

var (
	roomA = conch.ConversationKey{Channel: conch.ChannelMatrix, ID: "!a:example.org"}
	roomB = conch.ConversationKey{Channel: conch.ChannelMatrix, ID: "!b:example.org"}
	alice = conch.UserKey{Channel: conch.ChannelMatrix, ID: "@alice:example.org"}
)

func open(t *testing.T, path string, opts ...sqlite.Option) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), path, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return db
}

func mustClose(t *testing.T, db *sqlite.DB) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// must(f()).ok(t) fails the test if f returned an error.
func must[T any](v T, err error) result[T] { return result[T]{v, err} }

type result[T any] struct {
	v   T
	err error
}

func (r result[T]) ok(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func addTurn(t *testing.T, db *sqlite.DB, in conch.Inbound) conch.Turn {
	t.Helper()
	tr, dup, err := db.AddInbound(context.Background(), in)
	if err != nil || dup {
		t.Fatalf("AddInbound(%q): dup=%v err=%v", in.Text, dup, err)
	}
	return tr
}

func schema(t *testing.T, db *sqlite.DB) (version int, objects string) {
	t.Helper()
	ctx := context.Background()
	check(t, db.SQL().QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version))
	rows := must(db.SQL().QueryContext(ctx, `SELECT type || ' ' || name FROM sqlite_master ORDER BY type, name`)).ok(t)
	defer rows.Close()
	var names []string
	for rows.Next() {
		var s string
		check(t, rows.Scan(&s))
		names = append(names, s)
	}
	check(t, rows.Err())
	return version, strings.Join(names, ", ")
}

// A restart: everything written before Close is there after Open, and the
// schema is migrated exactly once.
func TestReopenKeepsEverything(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "conch.db")
	db := open(t, path)
	v1, objs1 := schema(t, db)

	old := addTurn(t, db, storetest.Inbound(roomA, "$old", "before reset"))
	must(db.StartTurn(ctx, old.ID)).ok(t)
	check(t, db.AppendMessage(ctx, old.ID, conch.Message{Role: conch.RoleAssistant, Text: "forgotten"}))
	check(t, db.FinishTurn(ctx, old.ID, conch.TurnDone, ""))
	check(t, db.ResetConversation(ctx, roomA))

	done := addTurn(t, db, storetest.Inbound(roomA, "$1", "run ls"))
	must(db.StartTurn(ctx, done.ID)).ok(t)
	call := conch.ToolCall{ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)}
	msgs := []conch.Message{
		{Role: conch.RoleUser, Text: "run ls"},
		{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{call}},
		{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "c1", Name: "bash", Content: "a b"}},
		{Role: conch.RoleAssistant, Text: "a and b"},
	}
	for _, m := range msgs[1:] {
		check(t, db.AppendMessage(ctx, done.ID, m))
	}
	check(t, db.RecordStep(ctx, conch.Step{Turn: done.ID, Kind: conch.StepToolCall, Detail: json.RawMessage(`{"name":"bash"}`)}))
	check(t, db.FinishTurn(ctx, done.ID, conch.TurnDone, ""))
	running := addTurn(t, db, storetest.Inbound(roomA, "$2", "crash during this"))
	must(db.StartTurn(ctx, running.ID)).ok(t)
	pending := addTurn(t, db, storetest.Inbound(roomB, "$3", "queued"))
	check(t, db.Remember(ctx, alice, "editor", "vim"))
	check(t, db.SetCursor(ctx, "matrix.sync", "s42"))
	check(t, db.Audit(ctx, conch.AuditEvent{Kind: "exec", Conversation: roomA, Detail: json.RawMessage(`{"cmd":"ls"}`)}))
	mustClose(t, db)

	db = open(t, path)
	defer mustClose(t, db)
	if v2, objs2 := schema(t, db); v2 != v1 || objs2 != objs1 {
		t.Errorf("schema after reopen: got version %d %s\nwant version %d %s", v2, objs2, v1, objs1)
	}
	if got := must(db.History(ctx, roomA)).ok(t); !reflect.DeepEqual(got, append(msgs, conch.Message{Role: conch.RoleUser, Text: "crash during this"})) {
		t.Errorf("history after reopen: got %+v", got)
	}
	un := must(db.UnfinishedTurns(ctx)).ok(t)
	if len(un) != 2 || un[0].ID != running.ID || un[1].ID != pending.ID {
		t.Fatalf("unfinished after reopen: got %+v, want turns %d and %d", un, running.ID, pending.ID)
	}
	if un[0].Status != conch.TurnRunning || un[0].Attempts != 1 || !reflect.DeepEqual(un[0].Inbound, storetest.Inbound(roomA, "$2", "crash during this")) {
		t.Errorf("resumable turn after reopen: got %+v", un[0])
	}
	if tr := must(db.StartTurn(ctx, running.ID)).ok(t); tr.Attempts != 2 {
		t.Errorf("resumed turn: got %d attempts, want 2", tr.Attempts)
	}
	if _, dup, err := db.AddInbound(ctx, storetest.Inbound(roomA, "$1", "run ls")); err != nil || !dup {
		t.Errorf("redelivery after reopen: got dup=%v err=%v, want dup", dup, err)
	}
	if fs := must(db.Facts(ctx, alice)).ok(t); len(fs) != 1 || fs[0].Value != "vim" {
		t.Errorf("facts after reopen: got %+v", fs)
	}
	if c := must(db.Cursor(ctx, "matrix.sync")).ok(t); c != "s42" {
		t.Errorf("cursor after reopen: got %q, want s42", c)
	}
	if ss := must(db.Steps(ctx, done.ID)).ok(t); len(ss) != 1 || string(ss[0].Detail) != `{"name":"bash"}` {
		t.Errorf("steps after reopen: got %+v", ss)
	}
	if evs := must(db.AuditEvents(ctx, time.Time{}, 10)).ok(t); len(evs) != 1 || evs[0].Conversation != roomA {
		t.Errorf("audit after reopen: got %+v", evs)
	}
	if ks := must(db.Conversations(ctx)).ok(t); !reflect.DeepEqual(ks, []conch.ConversationKey{roomA, roomB}) {
		t.Errorf("conversations after reopen: got %v", ks)
	}
}

func TestSchemaTooNewIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conch.db")
	db := open(t, path)
	v, _ := schema(t, db)
	_, err := db.SQL().Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v+1))
	check(t, err)
	mustClose(t, db)

	_, err = sqlite.Open(context.Background(), path)
	if !errors.Is(err, sqlite.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer database: got %v, want ErrSchemaTooNew", err)
	}
	if want := fmt.Sprintf("version %d", v+1); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
		t.Errorf("error %q should name the path and %q", err, want)
	}
}

func TestOpenInvalid(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		path string
		opts []sqlite.Option
	}{
		{"empty path", "", nil},
		{"missing directory", filepath.Join(dir, "nope", "conch.db"), nil},
		{"directory", dir, nil},
		{"bad sync", filepath.Join(dir, "a.db"), []sqlite.Option{sqlite.WithSync("SOMETIMES")}},
		{"no readers", filepath.Join(dir, "b.db"), []sqlite.Option{sqlite.WithReaders(0)}},
		{"nil clock", filepath.Join(dir, "c.db"), []sqlite.Option{sqlite.WithClock(nil)}},
		{"negative reader idle", filepath.Join(dir, "d.db"), []sqlite.Option{sqlite.WithReaderIdle(-time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := sqlite.Open(context.Background(), tc.path, tc.opts...)
			if err == nil {
				db.Close()
				t.Fatalf("Open(%q): got no error", tc.path)
			}
		})
	}
}

func TestOpenOddPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a b?c#d%20e")
	check(t, os.Mkdir(dir, 0o755))
	path := filepath.Join(dir, "con?ch.db")
	db := open(t, path)
	addTurn(t, db, storetest.Inbound(roomA, "$1", "hi"))
	mustClose(t, db)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file: %v", err)
	}
	db = open(t, path)
	defer mustClose(t, db)
	if db.Path() != path {
		t.Errorf("Path: got %q, want %q", db.Path(), path)
	}
	if un := must(db.UnfinishedTurns(context.Background())).ok(t); len(un) != 1 {
		t.Errorf("got %d turns in the reopened odd-path database, want 1", len(un))
	}
}

func TestFileIsWAL(t *testing.T) {
	db := sqlitetest.MustOpenFile(t)
	for pragma, want := range map[string]string{"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "10000", "synchronous": "1"} {
		var got string
		check(t, db.SQL().QueryRow("PRAGMA "+pragma).Scan(&got))
		if got != want {
			t.Errorf("PRAGMA %s: got %s, want %s", pragma, got, want)
		}
	}
}

// Arguments are kept byte for byte even when the model produced broken JSON.
func TestToolCallArgumentsVerbatim(t *testing.T) {
	ctx := context.Background()
	db := sqlitetest.MustOpenMemory(t)
	tr := addTurn(t, db, storetest.Inbound(roomA, "$1", "x"))
	must(db.StartTurn(ctx, tr.ID)).ok(t)
	calls := []conch.ToolCall{
		{ID: "1", Name: "bash", Arguments: json.RawMessage(`{"command": "echo \"hi\"" `)},
		{ID: "2", Name: "bash", Arguments: json.RawMessage(`{ "a" : [1, 2] }`)},
	}
	check(t, db.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleAssistant, ToolCalls: calls}))
	h := must(db.History(ctx, roomA)).ok(t)
	if len(h) != 2 || !reflect.DeepEqual(h[1].ToolCalls, calls) {
		t.Fatalf("got %+v, want the calls back verbatim", h)
	}
	err := db.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{{ID: "3"}}})
	if conch.KindOf(err) != conch.KindInvalid {
		t.Errorf("tool call without name: got %v, want KindInvalid", err)
	}
}

func TestStepsAndAudit(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2025, 1, 2, 3, 4, 5, 6e6, time.UTC)
	db := sqlitetest.MustOpenMemory(t, sqlite.WithClock(func() time.Time { return now }))
	tr := addTurn(t, db, storetest.Inbound(roomA, "$1", "x"))
	if !tr.CreatedAt.Equal(now) {
		t.Errorf("CreatedAt: got %v, want the clock's %v", tr.CreatedAt, now)
	}
	at := now.Add(time.Second)
	check(t, db.RecordStep(ctx, conch.Step{Turn: tr.ID, Kind: conch.StepModelCall, Detail: json.RawMessage(` {"n":1}`), At: at}))
	check(t, db.RecordStep(ctx, conch.Step{Turn: tr.ID, Kind: conch.StepStopped}))
	want := []conch.Step{
		{Turn: tr.ID, Kind: conch.StepModelCall, Detail: json.RawMessage(` {"n":1}`), At: at},
		{Turn: tr.ID, Kind: conch.StepStopped, Detail: json.RawMessage(`{}`), At: now},
	}
	if got := must(db.Steps(ctx, tr.ID)).ok(t); !reflect.DeepEqual(got, want) {
		t.Errorf("Steps:\n got %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{`nope`, `[1]`, `"s"`, `{"a":`} {
		err := db.RecordStep(ctx, conch.Step{Turn: tr.ID, Kind: conch.StepModelCall, Detail: json.RawMessage(bad)})
		if conch.KindOf(err) != conch.KindInvalid {
			t.Errorf("RecordStep(detail %s): got %v, want KindInvalid", bad, err)
		}
		err = db.Audit(ctx, conch.AuditEvent{Kind: "exec", Detail: json.RawMessage(bad)})
		if conch.KindOf(err) != conch.KindInvalid {
			t.Errorf("Audit(detail %s): got %v, want KindInvalid", bad, err)
		}
	}

	check(t, db.Audit(ctx, conch.AuditEvent{Kind: "sandbox_create", Conversation: roomA, At: at}))
	check(t, db.Audit(ctx, conch.AuditEvent{Kind: "startup"}))
	evs := must(db.AuditEvents(ctx, time.Time{}, 10)).ok(t)
	wantEvs := []conch.AuditEvent{
		{At: now, Kind: "startup", Detail: json.RawMessage(`{}`)},
		{At: at, Kind: "sandbox_create", Conversation: roomA, Detail: json.RawMessage(`{}`)},
	}
	if !reflect.DeepEqual(evs, wantEvs) {
		t.Errorf("AuditEvents:\n got %+v\nwant %+v", evs, wantEvs)
	}
	if evs := must(db.AuditEvents(ctx, at, 10)).ok(t); len(evs) != 1 || evs[0].Kind != "sandbox_create" {
		t.Errorf("AuditEvents(since %v): got %+v", at, evs)
	}
	if _, err := db.AuditEvents(ctx, time.Time{}, 0); conch.KindOf(err) != conch.KindInvalid {
		t.Errorf("AuditEvents(limit 0): got %v, want KindInvalid", err)
	}

	check(t, db.Remember(ctx, alice, "k", "v"))
	if fs := must(db.Facts(ctx, alice)).ok(t); len(fs) != 1 || !fs[0].UpdatedAt.Equal(now) {
		t.Errorf("fact UpdatedAt: got %+v, want the clock's %v", fs, now)
	}
}

func TestFactLimits(t *testing.T) {
	ctx := context.Background()
	db := sqlitetest.MustOpenMemory(t)
	for _, tc := range []struct {
		name, key, value string
	}{
		{"long key", strings.Repeat("k", sqlite.MaxFactKeyLen+1), "v"},
		{"long value", "k", strings.Repeat("v", sqlite.MaxFactValueLen+1)},
		{"bad utf-8 key", "k\xff", "v"},
		{"bad utf-8 value", "k", "v\xff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := db.Remember(ctx, alice, tc.key, tc.value); conch.KindOf(err) != conch.KindInvalid {
				t.Errorf("got %v, want KindInvalid", err)
			}
		})
	}
	check(t, db.Remember(ctx, alice, strings.Repeat("k", sqlite.MaxFactKeyLen), strings.Repeat("v", sqlite.MaxFactValueLen)))
}

// Other packages keep their own tables in the same database through SQL().
func TestSharedSQL(t *testing.T) {
	for name, db := range map[string]*sqlite.DB{"memory": sqlitetest.MustOpenMemory(t), "file": sqlitetest.MustOpenFile(t)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			raw := db.SQL()
			_, err := raw.ExecContext(ctx, `CREATE TABLE crypto_test (k TEXT PRIMARY KEY, v TEXT)`)
			check(t, err)
			tx := must(raw.BeginTx(ctx, nil)).ok(t)
			_, err = tx.ExecContext(ctx, `INSERT INTO crypto_test VALUES ($1, $2)`, "k", "v")
			check(t, err)
			check(t, tx.Commit())
			addTurn(t, db, storetest.Inbound(roomA, "$1", "hi"))
			var n int
			check(t, raw.QueryRowContext(ctx, `SELECT count(*) FROM turns`).Scan(&n))
			if n != 1 {
				t.Errorf("turns seen through SQL(): got %d, want 1", n)
			}
		})
	}
}

func TestCanceledContext(t *testing.T) {
	db := sqlitetest.MustOpenFile(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := db.AddInbound(ctx, storetest.Inbound(roomA, "$1", "x")); !errors.Is(err, context.Canceled) {
		t.Errorf("AddInbound with a canceled context: got %v, want context.Canceled", err)
	}
	if un := must(db.UnfinishedTurns(context.Background())).ok(t); len(un) != 0 {
		t.Errorf("got %d turns after a canceled AddInbound, want 0", len(un))
	}
}

// Many conversations at once, as the gateway drives them: each worker owns
// its conversations' turns, channels redeliver some messages concurrently,
// and readers read history while writers write.
func TestConcurrentConversations(t *testing.T) {
	for name, db := range map[string]*sqlite.DB{"memory": sqlitetest.MustOpenMemory(t), "file": sqlitetest.MustOpenFile(t)} {
		t.Run(name, func(t *testing.T) {
			const workers, convs, msgs = 8, 4, 12 // conversations per worker, messages per conversation
			ctx := context.Background()
			var wg sync.WaitGroup
			errs := make(chan error, workers*2)
			var dupMu sync.Mutex
			fresh := map[string]int{} // external id -> non-dup deliveries
			for w := range workers {
				for copy := range 2 { // two deliveries of every message, racing
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs <- func() error {
							for m := range msgs {
								for c := range convs {
									key := conch.ConversationKey{Channel: conch.ChannelWeb, ID: fmt.Sprintf("w%d-c%d", w, c)}
									ext := fmt.Sprintf("%s-m%d", key.ID, m)
									tr, dup, err := db.AddInbound(ctx, storetest.Inbound(key, ext, ext))
									if err != nil {
										return err
									}
									if dup {
										continue
									}
									dupMu.Lock()
									fresh[ext]++
									dupMu.Unlock()
									if copy == 1 {
										continue // the second delivery only reads
									}
									if _, err := db.StartTurn(ctx, tr.ID); err != nil {
										return err
									}
									if err := db.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleAssistant, Text: "re " + ext}); err != nil {
										return err
									}
									if _, err := db.History(ctx, key); err != nil {
										return err
									}
									if err := db.FinishTurn(ctx, tr.ID, conch.TurnDone, ""); err != nil {
										return err
									}
								}
							}
							return nil
						}()
					}()
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if len(fresh) != workers*convs*msgs {
				t.Errorf("got %d distinct messages stored, want %d", len(fresh), workers*convs*msgs)
			}
			for ext, n := range fresh {
				if n != 1 {
					t.Errorf("message %s stored %d times, want once", ext, n)
				}
			}
			ks := must(db.Conversations(ctx)).ok(t)
			if len(ks) != workers*convs {
				t.Fatalf("got %d conversations, want %d", len(ks), workers*convs)
			}
			// Turns the second delivery won stay pending and are not history yet.
			for _, k := range ks {
				h := must(db.History(ctx, k)).ok(t)
				for i := 0; i+1 < len(h); i += 2 {
					if h[i].Role != conch.RoleUser || h[i+1].Text != "re "+h[i].Text {
						t.Fatalf("history of %s: message %d is %+v then %+v, want a question and its answer", k, i, h[i], h[i+1])
					}
				}
			}
		})
	}
}

// Two handles on one file, as two processes would have: both migrate, both
// write, neither sees "database is locked".
func TestTwoHandlesOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conch.db")
	ctx := context.Background()
	var dbs [2]*sqlite.DB
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dbs[i], errs[i] = sqlite.Open(ctx, path)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open #%d: %v", i, err)
		}
		defer mustClose(t, dbs[i])
	}
	for i, db := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range 50 {
				key := conch.ConversationKey{Channel: conch.ChannelWeb, ID: fmt.Sprint(m % 5)}
				if _, _, err := db.AddInbound(ctx, storetest.Inbound(key, fmt.Sprintf("h%d-%d", i, m), "x")); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer #%d: %v", i, err)
		}
	}
	if un := must(dbs[0].UnfinishedTurns(ctx)).ok(t); len(un) != 100 {
		t.Errorf("got %d turns, want 100", len(un))
	}
}

// AddInbound is durable when it returns: a process killed right after it
// (SIGKILL, no Close) leaves the turn for the next start to resume.
func TestAddInboundSurvivesKill(t *testing.T) {
	if path := os.Getenv("CONCH_SQLITE_KILL_DB"); path != "" {
		db, err := sqlite.Open(context.Background(), path)
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(2)
		}
		tr, _, err := db.AddInbound(context.Background(), storetest.Inbound(roomA, "$killed", "survive me"))
		if err == nil {
			_, err = db.StartTurn(context.Background(), tr.ID)
		}
		if err != nil {
			fmt.Println("add:", err)
			os.Exit(2)
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	path := filepath.Join(t.TempDir(), "conch.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestAddInboundSurvivesKill$")
	cmd.Env = append(os.Environ(), "CONCH_SQLITE_KILL_DB="+path)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: got %v, want death by SIGKILL; output:\n%s", err, out)
	}
	db := open(t, path)
	defer mustClose(t, db)
	un := must(db.UnfinishedTurns(context.Background())).ok(t)
	if len(un) != 1 || un[0].Inbound.Text != "survive me" || un[0].Status != conch.TurnRunning {
		t.Fatalf("after the kill: got unfinished %+v, want the running turn", un)
	}
}

func TestBackupIsAConsistentCopy(t *testing.T) {
	dir := t.TempDir()
	db, err := sqlite.Open(t.Context(), filepath.Join(dir, "conch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "b"}
	if _, _, err := db.AddInbound(t.Context(), conch.Inbound{Key: key, Sender: "u", Text: "keep me"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "backup.db")
	if err := db.Backup(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	if err := db.Backup(t.Context(), path); conch.KindOf(err) != conch.KindInvalid {
		t.Fatalf("backup over an existing file: got %v, want KindInvalid", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	b, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	turns, err := b.UnfinishedTurns(t.Context())
	if err != nil || len(turns) != 1 || turns[0].Inbound.Text != "keep me" {
		t.Fatalf("backup holds %+v (%v)", turns, err)
	}
}

// TestIdleReadersClose: reader connections opened by a burst close once
// unused for the reader idle time (each holds two files and a page cache);
// reads afterwards open them again.
func TestIdleReadersClose(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "conch.db"), sqlite.WithReaders(4), sqlite.WithReaderIdle(50*time.Millisecond))
	check(t, err)
	defer mustClose(t, db)
	addTurn(t, db, storetest.Inbound(roomA, "$1", "hi"))
	var txs []*sql.Tx
	for range 4 { // four reads at once: four connections
		tx, err := db.SQL().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		check(t, err)
		var n int
		check(t, tx.QueryRowContext(ctx, `SELECT count(*) FROM turns`).Scan(&n))
		txs = append(txs, tx)
	}
	if open := db.SQL().Stats().OpenConnections; open != 4 {
		t.Fatalf("%d reader connections open during the burst, want 4", open)
	}
	for _, tx := range txs {
		check(t, tx.Rollback())
	}
	deadline := time.Now().Add(10 * time.Second)
	for db.SQL().Stats().OpenConnections > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d reader connections still open 10 s after the burst", db.SQL().Stats().OpenConnections)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var n int
	check(t, db.SQL().QueryRowContext(ctx, `SELECT count(*) FROM turns`).Scan(&n))
	if n != 1 {
		t.Fatalf("%d turns after the readers closed, want 1", n)
	}
}
