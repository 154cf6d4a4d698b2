package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/fakellm"
	"conch/sqlite"
)

// Data-dir fixtures: testdata/datadirs/<schema>-<version>/ holds the store
// (conch.db) and store-version.json of a data dir made by that build, with a
// conversation, a terminal and a schedule. Each tagged release adds its own:
//
//	CONCH_WRITE_FIXTURE=v0.3.0 go test -tags goolm -run TestWriteDataDirFixture ./cmd/conch/
//
// and TestDataDirFixturesUpgrade opens every one with this build.

const fixtureDir = "testdata/datadirs"

// Fixture contents, the same in every fixture.
const (
	fixtureQuestion   = "remember the tea is oolong"
	fixtureAnswer     = "Noted: oolong."
	fixtureSchedule   = "water the plants"
	fixtureTerminal   = "conch-fixture-tty3"
	fixtureTermScope  = "fixture-scope"
	fixtureScheduleID = "s-fixture"
)

// TestWriteDataDirFixture writes the fixture of this build (only with
// CONCH_WRITE_FIXTURE=<version>): the conversation through the real
// `conch chat`, the schedule and the terminal through this build's store.
func TestWriteDataDirFixture(t *testing.T) {
	version := os.Getenv("CONCH_WRITE_FIXTURE")
	if version == "" {
		t.Skip("writes testdata/datadirs/<schema>-<version>: set CONCH_WRITE_FIXTURE=<version> (a release step, README)")
	}
	srv := fakellm.New(t)
	dir := t.TempDir()
	env := testEnv(srv, fakellm.OpenAI, dir)
	srv.Push(fakellm.Text(fixtureAnswer))
	p := startConch(t, env, "chat")
	if got := p.say(t, fixtureQuestion); !strings.Contains(got, fixtureAnswer) {
		t.Fatalf("chat answered %q", got)
	}
	p.finish(t)
	ctx := context.Background()
	data := filepath.Join(dir, "data")
	db, err := sqlite.Open(ctx, filepath.Join(data, storeFile))
	if err != nil {
		t.Fatal(err)
	}
	key := onlyConversation(t, db)
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	if err := db.AddSchedule(ctx, conch.ScheduleEntry{ID: fixtureScheduleID, Key: key, Kind: conch.ScheduleCron, Spec: "0 9 * * *",
		Message: fixtureSchedule, Next: at.Add(24 * time.Hour), CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if err := db.SaveTerminal(ctx, fixtureTermScope, conch.TerminalRecord{TTY: 3, Session: fixtureTerminal, Shell: true, Nonce: "n", OpenedAt: at}); err != nil {
		t.Fatal(err)
	}
	schema, _ := sqlite.SchemaVersion()
	out := filepath.Join(fixtureDir, strings.Join([]string{pad(schema), version}, "-"))
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(out, storeFile))
	if err := db.Backup(ctx, filepath.Join(out, storeFile)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	b, _ := json.MarshalIndent(storeVersion{Schema: schema, Conch: version, At: at}, "", "  ")
	if err := os.WriteFile(filepath.Join(out, storeVersionFile), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", out)
}

func pad(n int) string { return fmt.Sprintf("%04d", n) }

func itoa(n int) string { return strconv.Itoa(n) }

// onlyConversation is the store's one conversation.
func onlyConversation(t *testing.T, db *sqlite.DB) conch.ConversationKey {
	t.Helper()
	var ch, id string
	if err := db.SQL().QueryRow(`SELECT channel, key_id FROM conversations`).Scan(&ch, &id); err != nil {
		t.Fatal(err)
	}
	return conch.ConversationKey{Channel: conch.ChannelName(ch), ID: id}
}

// TestDataDirFixturesUpgrade: this build opens the data dir of every tagged
// build (testdata/datadirs), through the real binary: an older store is
// backed up and migrated, and the conversation, the terminal and the
// schedule are all there afterwards.
func TestDataDirFixturesUpgrade(t *testing.T) {
	fixtures, _ := filepath.Glob(filepath.Join(fixtureDir, "*", storeFile))
	if len(fixtures) == 0 {
		t.Fatalf("no data-dir fixture in %s (TestWriteDataDirFixture makes one)", fixtureDir)
	}
	want, _ := sqlite.SchemaVersion()
	for _, f := range fixtures {
		name := filepath.Base(filepath.Dir(f))
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, "data")
			copyFile(t, f, filepath.Join(data, storeFile))
			copyFile(t, filepath.Join(filepath.Dir(f), storeVersionFile), filepath.Join(data, storeVersionFile))
			have, err := sqlite.FileSchemaVersion(context.Background(), f)
			if err != nil {
				t.Fatal(err)
			}
			env := testEnv(fakellm.New(t), fakellm.OpenAI, dir)
			out, errOut, code := conchRun(t, env, "schedules list")
			if code != 0 || !strings.Contains(out, fixtureSchedule) {
				t.Fatalf("schedules list after the upgrade: exit %d\n%s%s", code, out, errOut)
			}
			backups, _ := filepath.Glob(filepath.Join(data, backupsDir, "*.db"))
			if have < want && (len(backups) != 1 || !strings.Contains(errOut, "Upgrading the store from schema")) {
				t.Errorf("an older store was not backed up and announced: %v\n%s", backups, errOut)
			}
			if have == want && len(backups) != 0 {
				t.Errorf("a current store was backed up: %v", backups)
			}
			ctx := context.Background()
			db, err := sqlite.Open(ctx, filepath.Join(data, storeFile))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			key := onlyConversation(t, db)
			out, errOut, code = conchRun(t, env, "transcript "+key.String())
			if code != 0 || !strings.Contains(out, fixtureQuestion) || !strings.Contains(out, fixtureAnswer) {
				t.Fatalf("transcript after the upgrade: exit %d\n%s%s", code, out, errOut)
			}
			terms, err := db.LoadTerminals(ctx, fixtureTermScope)
			if err != nil || len(terms) != 1 || terms[0].Session != fixtureTerminal || terms[0].TTY != 3 {
				t.Fatalf("terminals after the upgrade: %+v %v", terms, err)
			}
			v, ok := readStoreVersion(data)
			if !ok || v.Schema != want {
				t.Fatalf("store-version.json after the upgrade: %+v", v)
			}
		})
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// olderStore makes a store at schema n by applying this build's first n
// migrations, as the conch of that schema would have left it.
func olderStore(t *testing.T, path string, n int) {
	t.Helper()
	files, err := fs.Glob(os.DirFS("../../sqlite/migrations"), "[0-9][0-9][0-9][0-9]_*.sql")
	if err != nil || len(files) < n {
		t.Fatalf("migrations: %v %v", files, err)
	}
	slices.Sort(files)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, f := range files[:n] {
		b, err := os.ReadFile(filepath.Join("../../sqlite/migrations", f))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(string(b)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if _, err := db.Exec(`PRAGMA user_version = ` + itoa(n)); err != nil {
		t.Fatal(err)
	}
}

// TestUpgradeAndDowngrade: a newer conch on an older store copies it, as it
// is, to backups/ before migrating and says so, naming both versions; an
// older conch on a newer store refuses, naming both versions, and changes
// nothing.
func TestUpgradeAndDowngrade(t *testing.T) {
	want, _ := sqlite.SchemaVersion()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	store := filepath.Join(data, storeFile)
	olderStore(t, store, want-1)
	b, _ := json.Marshal(storeVersion{Schema: want - 1, Conch: "v0.0.1"})
	os.WriteFile(filepath.Join(data, storeVersionFile), b, 0o600)
	env := testEnv(fakellm.New(t), fakellm.OpenAI, dir)

	_, errOut, code := conchRun(t, env, "web url")
	re := regexp.MustCompile(`Upgrading the store from schema ` + itoa(want-1) + ` \(conch v0\.0\.1\) to ` + itoa(want) + ` \(conch dev\); the old store is kept in (\S+)`)
	m := re.FindStringSubmatch(errOut)
	if code != 0 || m == nil {
		t.Fatalf("upgrade: exit %d, stderr %q", code, errOut)
	}
	if v, err := sqlite.FileSchemaVersion(context.Background(), m[1]); err != nil || v != want-1 {
		t.Fatalf("the backup %s is at schema %d (%v), want %d", m[1], v, err, want-1)
	}
	if v, _ := sqlite.FileSchemaVersion(context.Background(), store); v != want {
		t.Fatalf("store at schema %d after the upgrade, want %d", v, want)
	}
	if _, errOut, _ := conchRun(t, env, "web url"); strings.Contains(errOut, "Upgrading") {
		t.Fatalf("a current store was upgraded again: %s", errOut)
	}

	// A newer conch (schema 99, v9.0.0) wrote the store: refused, unchanged.
	db, _ := sql.Open("sqlite", store)
	if _, err := db.Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	b, _ = json.Marshal(storeVersion{Schema: 99, Conch: "v9.0.0"})
	os.WriteFile(filepath.Join(data, storeVersionFile), b, 0o600)
	for _, args := range []string{"web url", "schedules list", "up"} {
		_, errOut, code = conchRun(t, env, args)
		if code == 0 || !strings.Contains(errOut, "written by conch v9.0.0 (schema 99); this is conch dev, which knows schemas up to "+itoa(want)) {
			t.Fatalf("%s on a newer store: exit %d, stderr %q", args, code, errOut)
		}
	}
	if v, _ := sqlite.FileSchemaVersion(context.Background(), store); v != 99 {
		t.Fatalf("a refused open changed the store's schema to %d", v)
	}
}

// TestRestore: conch restore puts a backup back (the conversation as it was
// at the backup), keeps the store it replaces, refuses while conch runs on
// the data dir and refuses a file that is not a store.
func TestRestore(t *testing.T) {
	srv := fakellm.New(t)
	dir := t.TempDir()
	env := testEnv(srv, fakellm.OpenAI, dir)
	chat := func(q, a string) {
		srv.Push(fakellm.Text(a))
		p := startConch(t, env, "chat")
		if got := p.say(t, q); !strings.Contains(got, a) {
			t.Fatalf("chat answered %q", got)
		}
		p.finish(t)
	}
	chat("first question", "first answer")
	backup := filepath.Join(dir, "b.db")
	if _, errOut, code := conchRun(t, env, "backup "+backup); code != 0 {
		t.Fatal(errOut)
	}
	chat("second question", "second answer")

	// Refused while a conch holds the data dir.
	p := startConch(t, env, "chat")
	srv.Push(fakellm.Text("held"))
	p.say(t, "hold the lock")
	_, errOut, code := conchRun(t, env, "restore "+backup)
	if code == 0 || !strings.Contains(errOut, "is in use by another conch process") {
		t.Fatalf("restore under a running conch: exit %d, stderr %q", code, errOut)
	}
	p.finish(t)

	notStore := filepath.Join(dir, "notes.txt")
	os.WriteFile(notStore, []byte("not a database at all, just some text that is long enough to have a header"), 0o600)
	if _, errOut, code := conchRun(t, env, "restore "+notStore); code == 0 || !strings.Contains(errOut, "not a conch store") {
		t.Fatalf("restore of a text file: exit %d, stderr %q", code, errOut)
	}

	out, errOut, code := conchRun(t, env, "restore "+backup)
	if code != 0 || !strings.Contains(out, "Restored "+backup) || !strings.Contains(out, "The store it replaced is kept in ") {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errOut)
	}
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "data", storeFile))
	if err != nil {
		t.Fatal(err)
	}
	key := onlyConversation(t, db)
	db.Close()
	out, _, _ = conchRun(t, env, "transcript "+key.String())
	if !strings.Contains(out, "first answer") || strings.Contains(out, "second question") || strings.Contains(out, "hold the lock") {
		t.Fatalf("transcript after the restore:\n%s", out)
	}
	kept, _ := filepath.Glob(filepath.Join(dir, "data", backupsDir, "conch-before-restore-*.db"))
	if len(kept) != 1 {
		t.Fatalf("kept stores: %v", kept)
	}
}
