package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"testing/fstest"

	"conch"
)

func TestLoadMigrations(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name    string
		fs      fstest.MapFS
		want    []int  // versions
		wantErr string // substring
	}{
		{"ordered", fstest.MapFS{
			"migrations/0002_b.sql": file("CREATE TABLE b (x);"),
			"migrations/0001_a.sql": file("CREATE TABLE a (x);"),
		}, []int{1, 2}, ""},
		{"gap", fstest.MapFS{
			"migrations/0001_a.sql": file("CREATE TABLE a (x);"),
			"migrations/0003_c.sql": file("CREATE TABLE c (x);"),
		}, nil, "want version 2"},
		{"duplicate", fstest.MapFS{
			"migrations/0001_a.sql":     file("CREATE TABLE a (x);"),
			"migrations/0001_again.sql": file("CREATE TABLE b (x);"),
		}, nil, "want version 2"},
		{"starts at 2", fstest.MapFS{
			"migrations/0002_a.sql": file("CREATE TABLE a (x);"),
		}, nil, "want version 1"},
		{"bad name", fstest.MapFS{
			"migrations/1_a.sql": file("CREATE TABLE a (x);"),
		}, nil, "name must look like"},
		{"only comments", fstest.MapFS{
			"migrations/0001_a.sql": file("-- nothing yet\n"),
		}, nil, "no SQL"},
		{"no directory", fstest.MapFS{}, nil, "read migrations"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := loadMigrations(tc.fs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.version)
			}
			if len(got) != len(tc.want) || got[0] != tc.want[0] || got[len(got)-1] != tc.want[len(tc.want)-1] {
				t.Errorf("got versions %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEmbeddedMigrationsLoad(t *testing.T) {
	ms, err := loadMigrations(migrationFS)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].name != "0001_init.sql" {
		t.Fatalf("got %d migrations starting %+v, want 0001_init.sql first", len(ms), ms)
	}
}

// memConn opens a fresh in-memory database with foreign keys on, as Open does.
func memConn(t *testing.T) *sql.Conn {
	t.Helper()
	db, err := openPool(MemoryPath, options{sync: SyncInbound}, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func mustLoad(t *testing.T, files map[string]string) []migration {
	t.Helper()
	fs := fstest.MapFS{}
	for name, text := range files {
		fs["migrations/"+name] = &fstest.MapFile{Data: []byte(text)}
	}
	ms, err := loadMigrations(fs)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func version(t *testing.T, conn *sql.Conn) int {
	t.Helper()
	v, err := userVersion(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func tableExists(t *testing.T, conn *sql.Conn, name string) bool {
	t.Helper()
	var n int
	if err := conn.QueryRowContext(context.Background(), `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestMigrateAppliesInOrderAndOnlyOnce(t *testing.T) {
	ctx := context.Background()
	conn := memConn(t)
	ms := mustLoad(t, map[string]string{
		"0001_a.sql": "CREATE TABLE a (x INTEGER);\nINSERT INTO a VALUES (1);",
		"0002_b.sql": "CREATE TABLE b (x INTEGER);\nINSERT INTO a VALUES (2);",
	})
	for i := range 2 {
		if err := migrate(ctx, conn, ms); err != nil {
			t.Fatalf("migrate #%d: %v", i+1, err)
		}
	}
	if v := version(t, conn); v != 2 {
		t.Errorf("got user_version %d, want 2", v)
	}
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM a`).Scan(&n); err != nil || n != 2 {
		t.Errorf("rows in a: got %d (%v), want 2 (each migration ran once)", n, err)
	}
	// A later binary adds a migration: only it runs.
	ms = append(ms, mustLoad(t, map[string]string{
		"0001_a.sql": "SELECT 1;", "0002_b.sql": "SELECT 1;", "0003_c.sql": "CREATE TABLE c (x INTEGER);",
	})[2])
	if err := migrate(ctx, conn, ms); err != nil {
		t.Fatal(err)
	}
	if v := version(t, conn); v != 3 || !tableExists(t, conn, "c") {
		t.Errorf("after adding 0003: got version %d, table c %v; want 3, true", v, tableExists(t, conn, "c"))
	}
}

func TestMigrateFailureRollsBackThatMigration(t *testing.T) {
	ctx := context.Background()
	conn := memConn(t)
	ms := mustLoad(t, map[string]string{
		"0001_a.sql": "CREATE TABLE a (x INTEGER);",
		"0002_b.sql": "CREATE TABLE b (x INTEGER);\nINSERT INTO nope VALUES (1);",
	})
	err := migrate(ctx, conn, ms)
	if err == nil || !strings.Contains(err.Error(), "0002_b.sql") {
		t.Fatalf("got %v, want an error naming 0002_b.sql", err)
	}
	if v := version(t, conn); v != 1 {
		t.Errorf("got user_version %d, want 1", v)
	}
	if !tableExists(t, conn, "a") || tableExists(t, conn, "b") {
		t.Errorf("got tables a=%v b=%v, want a kept and b rolled back", tableExists(t, conn, "a"), tableExists(t, conn, "b"))
	}
}

func TestMigrateTooNew(t *testing.T) {
	ctx := context.Background()
	conn := memConn(t)
	if _, err := conn.ExecContext(ctx, `PRAGMA user_version = 5`); err != nil {
		t.Fatal(err)
	}
	err := migrate(ctx, conn, mustLoad(t, map[string]string{"0001_a.sql": "CREATE TABLE a (x);"}))
	if err == nil || !strings.Contains(err.Error(), "version 5") || !strings.Contains(err.Error(), "up to 1") {
		t.Fatalf("got %v, want ErrSchemaTooNew naming versions 5 and 1", err)
	}
}

// A table rebuild drops a table other rows point at: with foreign keys on
// that fails, so such a migration carries the directive.
func TestMigrateForeignKeysOff(t *testing.T) {
	const (
		initial = `CREATE TABLE parent (id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL REFERENCES parent (id));
INSERT INTO parent VALUES (1, 'p');
INSERT INTO child VALUES (1, 1);`
		rebuild = `CREATE TABLE parent_new (id INTEGER PRIMARY KEY, name TEXT NOT NULL DEFAULT '', extra TEXT);
INSERT INTO parent_new (id, name) SELECT id, name FROM parent;
DROP TABLE parent;
ALTER TABLE parent_new RENAME TO parent;`
		broken = `DELETE FROM parent;`
	)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		second  string
		wantErr string
	}{
		{"without directive", rebuild, "FOREIGN KEY"},
		{"with directive", noForeignKeysDirective + "\n" + rebuild, ""},
		{"with directive, dangling rows", noForeignKeysDirective + "\n" + broken, "foreign key check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := memConn(t)
			err := migrate(ctx, conn, mustLoad(t, map[string]string{"0001_a.sql": initial, "0002_b.sql": tc.second}))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				if v := version(t, conn); v != 1 {
					t.Errorf("got user_version %d, want 1", v)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			var fk int
			if err := conn.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
				t.Errorf("foreign_keys after migrate: got %d (%v), want 1", fk, err)
			}
		})
	}
}

// Under SyncInbound the writer runs NORMAL and AddInbound switches it to FULL
// for its commit only; the other modes keep one setting everywhere.
func TestSyncModes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		sync         Sync
		writer, pool int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{
		{SyncInbound, 1, 1},
		{SyncFull, 2, 2},
		{SyncNormal, 1, 1},
	} {
		t.Run(string(tc.sync), func(t *testing.T) {
			d, err := Open(ctx, t.TempDir()+"/c.db", WithSync(tc.sync))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if _, _, err := d.AddInbound(ctx, conch.Inbound{Key: conch.ConversationKey{Channel: "web", ID: "1"}, Sender: "u", Text: "x"}); err != nil {
				t.Fatal(err)
			}
			var w, p int
			if err := d.w.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&w); err != nil {
				t.Fatal(err)
			}
			if err := d.SQL().QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&p); err != nil {
				t.Fatal(err)
			}
			if w != tc.writer || p != tc.pool {
				t.Errorf("after AddInbound: got writer synchronous=%d, pool %d; want %d, %d", w, p, tc.writer, tc.pool)
			}
		})
	}
}
