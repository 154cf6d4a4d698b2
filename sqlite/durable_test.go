package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"conch"
)

// blockSync makes the store's fsyncs wait until release is closed;
// started receives once per fsync begun.
func blockSync(d *DB) (started chan struct{}, release chan struct{}) {
	started, release = make(chan struct{}, 100), make(chan struct{})
	d.writes.sync.mu.Lock()
	d.writes.sync.hook = func() error { started <- struct{}{}; <-release; return nil }
	d.writes.sync.mu.Unlock()
	return started, release
}

func fsyncs(d *DB) int {
	d.writes.sync.mu.Lock()
	defer d.writes.sync.mu.Unlock()
	return d.writes.sync.fsyncs
}

// A staged message is stored (readable, its turn startable) while its
// fsync is under way, and durable returns only after that fsync: the writer
// is never held by the disk.
func TestStageInboundVisibleBeforeDurable(t *testing.T) {
	ctx := t.Context()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	started, release := blockSync(d)
	key := conch.ConversationKey{Channel: "web", ID: "1"}
	tr, dup, durable, err := d.StageInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "hi", ExternalID: "m1"}, false)
	if err != nil || dup {
		t.Fatalf("StageInbound: %v (dup %v)", err, dup)
	}
	done := make(chan error, 1)
	go func() { done <- durable(ctx) }()
	<-started // the fsync is under way, and blocked

	// Meanwhile: the message is readable and its turn runs.
	if got, err := d.Turn(ctx, tr.ID); err != nil || got.Inbound.Text != "hi" {
		t.Fatalf("turn during the fsync: %+v, %v", got, err)
	}
	if _, err := d.StartTurn(ctx, tr.ID); err != nil {
		t.Fatalf("StartTurn during the fsync: %v", err)
	}
	// A redelivery finds it, and waits for the same disk.
	_, dup, dupDurable, err := d.StageInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "hi", ExternalID: "m1"}, false)
	if err != nil || !dup {
		t.Fatalf("redelivery: %v (dup %v), want dup", err, dup)
	}
	waitDone := make(chan error, 1)
	go func() { waitDone <- d.WaitDurable(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("durable returned (%v) before its fsync ended", err)
	case err := <-waitDone:
		t.Fatalf("WaitDurable returned (%v) before the fsync ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("durable: %v", err)
	}
	if err := <-waitDone; err != nil {
		t.Fatalf("WaitDurable: %v", err)
	}
	if err := dupDurable(ctx); err != nil {
		t.Fatalf("the redelivery's durable: %v", err)
	}
	// Nothing left to sync: WaitDurable returns without an fsync.
	n := fsyncs(d)
	if err := d.WaitDurable(ctx); err != nil || fsyncs(d) != n {
		t.Errorf("WaitDurable with nothing to sync: %v, %d fsyncs after %d", err, fsyncs(d), n)
	}
}

// One fsync covers every commit made before it began: messages stored
// while an fsync runs share the next one.
func TestOneFsyncCoversEarlierCommits(t *testing.T) {
	ctx := t.Context()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	opened := fsyncs(d)
	started, release := blockSync(d)
	first := make(chan error, 1)
	go func() {
		_, _, err := d.AddInbound(ctx, conch.Inbound{Key: conch.ConversationKey{Channel: "web", ID: "first"}, Sender: "u", Text: "a"})
		first <- err
	}()
	<-started
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, _, err := d.AddInbound(ctx, conch.Inbound{Key: conch.ConversationKey{Channel: "web", ID: string(rune('a' + i))}, Sender: "u", Text: "b"})
			errs <- err
		})
	}
	// Every one committed before the first fsync ends.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		q := &d.writes
		q.mu.Lock()
		written := q.requests >= n+1 && len(q.pending) == 0 && !q.leading
		q.mu.Unlock()
		if written {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the messages were not committed during the first fsync")
		}
	}
	close(release)
	wg.Wait()
	close(errs)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := fsyncs(d) - opened; got != 2 {
		t.Errorf("%d fsyncs for %d messages stored during the first, want 2", got, n)
	}
}

// A failed fsync is final: the message waiting for it is refused, and so
// is every later change and durable wait; the store opened again has
// what was committed.
func TestSyncFailureIsFinal(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "c.db")
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	key := conch.ConversationKey{Channel: "web", ID: "1"}
	ok, _, err := d.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "before"})
	if err != nil {
		t.Fatal(err)
	}
	// ENOSPC from an fsync (XFS, NFS, thin volumes) is no "disk full":
	// freeing space does not bring back the pages the kernel dropped.
	eio := &os.PathError{Op: "fsync", Path: path + "-wal", Err: syscall.ENOSPC}
	d.writes.sync.mu.Lock()
	d.writes.sync.hook = func() error { return eio }
	d.writes.sync.mu.Unlock()
	select {
	case <-d.Failed():
		t.Fatal("Failed closed before any fsync failed")
	default:
	}
	if _, _, err := d.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "lost?"}); !errors.Is(err, errSyncFailed) || !errors.Is(err, eio) {
		t.Fatalf("AddInbound with a failing fsync: %v, want the sync failure", err)
	}
	select {
	case <-d.Failed():
	default:
		t.Fatal("Failed not closed after a failed fsync")
	}
	if err := d.Err(); !errors.Is(err, eio) {
		t.Errorf("Err after a failed fsync: %v", err)
	}
	if err := d.WaitDurable(ctx); !errors.Is(err, errSyncFailed) {
		t.Errorf("WaitDurable after a failed fsync: %v, want the sync failure", err)
	}
	if _, err := d.StartTurn(ctx, ok.ID); !errors.Is(err, errSyncFailed) || errors.Is(err, conch.ErrStoreFull) {
		t.Errorf("a change after a failed fsync: %v, want the sync failure (not disk full)", err)
	}
	if _, _, _, err := d.StageInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "after"}, false); !errors.Is(err, errSyncFailed) {
		t.Errorf("StageInbound after a failed fsync: %v, want the sync failure", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	un, err := d.UnfinishedTurns(ctx)
	if err != nil || len(un) == 0 || un[0].Inbound.Text != "before" {
		t.Fatalf("reopened: %+v, %v; want the committed messages", un, err)
	}
	if _, _, err := d.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "again"}); err != nil {
		t.Fatalf("reopened: AddInbound: %v", err)
	}
}

// A store opened again syncs what SQLite recovered from the WAL file (a
// commit whose fsync a kill interrupted) before anything else.
func TestOpenSyncsWhatItFound(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "c.db")
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := d.StageInbound(ctx, conch.Inbound{Key: conch.ConversationKey{Channel: "web", ID: "1"}, Sender: "u", Text: "hi"}, false); err != nil {
		t.Fatal(err)
	}
	d.Close() // the staged message was never waited for
	d, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := fsyncs(d); got != 1 {
		t.Errorf("opened: %d fsyncs, want 1", got)
	}
	if err := d.WaitDurable(ctx); err != nil || fsyncs(d) != 1 {
		t.Errorf("WaitDurable after open: %v, %d fsyncs; want nothing more to sync", err, fsyncs(d))
	}
	for _, mode := range []Sync{SyncFull, SyncNormal} {
		d, err := Open(ctx, path, WithSync(mode))
		if err != nil {
			t.Fatal(err)
		}
		if got := fsyncs(d); got != 0 {
			t.Errorf("opened with sync %s: %d fsyncs of our own, want 0", mode, got)
		}
		d.Close()
	}
}

// A database reached through a symbolic link has its WAL beside the
// link's target, where SQLite puts it: that is the file synced (missing
// it, every message would be acknowledged without an fsync).
func TestSyncThroughALink(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "conch.db")
	if err := os.Symlink(filepath.Join(dir, "real", "conch.db"), link); err != nil {
		t.Fatal(err)
	}
	d, err := Open(ctx, link)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, _, err := d.AddInbound(ctx, conch.Inbound{Key: conch.ConversationKey{Channel: "web", ID: "1"}, Sender: "u", Text: "hi"}); err != nil {
		t.Fatalf("AddInbound through a link: %v", err)
	}
	d.writes.sync.mu.Lock()
	synced, wal := d.writes.sync.wal, d.writes.sync.walPath
	d.writes.sync.mu.Unlock()
	if synced == nil || wal != filepath.Join(dir, "real", "conch.db-wal") {
		t.Errorf("synced WAL %q (found: %v), want the one beside the link's target", wal, synced != nil)
	}
	if _, err := os.Stat(filepath.Join(dir, "real", "conch.db-wal")); err != nil {
		t.Errorf("SQLite's WAL is not beside the target: %v", err)
	}
}
