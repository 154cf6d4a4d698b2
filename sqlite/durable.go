package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Durability apart from visibility. Under SyncInbound a group holding an
// AddInbound commits like any other (synchronous=NORMAL: the change is in
// the WAL file and visible to every reader and later change at once) and is
// then made durable by an fsync of the WAL file, outside the writer: the
// next groups are written while the disk syncs, and one fsync covers every
// commit made before it started (they are all in the file, in order).
//
// This is what synchronous=FULL does inside COMMIT, minus the wait that
// kept every other change behind the disk. It relies on two facts of
// SQLite's WAL mode: a commit's frames are written to the WAL file before
// COMMIT returns, and a checkpoint (which moves frames into the database
// file and may restart the WAL over them) first syncs the WAL and then the
// database file at synchronous=NORMAL. So once the WAL file is synced after
// a commit, that commit survives a power loss, whether its frames are still
// in the WAL or were checkpointed. A WAL file SQLite created anew (its
// first frames after the database was opened, or after it was removed) is
// also named in its directory only once the directory is synced: done the
// first time each WAL file is seen.
//
// AddInbound returns only after its commit is durable (the promise a
// channel relies on before it acknowledges a message). StageInbound lets
// the gateway queue the turn during the fsync; it acknowledges the message
// and sends a reply only after WaitDurable.
//
// A failed fsync is final: the kernel may have dropped the pages it could
// not write, and a later fsync that succeeds proves nothing about them. Every
// later durable wait and every later write fails, with the error, until the
// store is opened again (conch restarts, and SQLite recovers from what is on
// disk).

// syncer makes durable commits durable, one fsync at a time.
type syncer struct {
	mu sync.Mutex
	// committed numbers the commits that hold a durable change; synced is
	// the highest of them known to be on disk.
	committed, synced uint64
	// syncing is closed when the fsync in progress ends (nil: none).
	syncing chan struct{}
	err     error // sticky: the first failed fsync
	// wal is the WAL file whose directory entry was synced.
	wal fs.FileInfo
	// fsyncs counts fsyncs, for tests; hook, set by tests, runs before each
	// and may fail it.
	fsyncs int
	hook   func() error
}

// errSyncFailed marks an error of a failed fsync of the store.
var errSyncFailed = errors.New("the store's file could not be synced to disk; restart conch")

// noteCommit records a commit holding a durable change; the caller
// committed it. It returns the number to wait for.
func (s *syncer) noteCommit() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.committed++
	return s.committed
}

// broken returns the sticky error of a failed fsync, if any.
func (s *syncer) broken() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// wait returns once commit n is on disk, syncing the WAL file when no
// fsync that covers it is under way. It does not give up with a context:
// an fsync is short, and a caller told its message was not stored while
// it is would store it again (harmless, but noisy).
func (d *DB) waitSynced(n uint64) error {
	s := &d.writes.sync
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.synced < n && s.err == nil {
		if s.syncing != nil {
			ch := s.syncing
			s.mu.Unlock()
			<-ch
			s.mu.Lock()
			continue
		}
		target := s.committed // every commit up to here is in the file
		ch := make(chan struct{})
		s.syncing = ch
		hook := s.hook
		s.mu.Unlock()
		var err error
		if hook != nil {
			err = hook()
		}
		if err == nil {
			err = d.syncWAL()
		}
		s.mu.Lock()
		s.syncing = nil
		s.fsyncs++
		close(ch)
		if err != nil {
			s.err = fmt.Errorf("%w: %w", errSyncFailed, err)
			break
		}
		s.synced = max(s.synced, target)
	}
	return s.err
}

// WaitDurable returns once every message stored so far (by AddInbound or
// StageInbound) survives a power loss: at once when none is waiting for the
// disk. The gateway calls it before it sends an answer, so no answer goes
// out to a message a power loss could still take back.
func (d *DB) WaitDurable(ctx context.Context) error {
	s := &d.writes.sync
	s.mu.Lock()
	n, done, err := s.committed, s.synced >= s.committed, s.err
	s.mu.Unlock()
	if err != nil || done {
		return err
	}
	return d.waitSynced(n)
}

// syncOpened syncs, under SyncInbound, what the store found at Open. A
// process killed between a commit and its fsync left the commit in the
// WAL file, which the kernel still holds: SQLite reads it back, and the
// turn it started resumes and may be answered; after this fsync no answer
// goes to a message a power loss could still take back.
func (d *DB) syncOpened() error {
	if !d.syncInbound {
		return nil
	}
	s := &d.writes.sync
	s.fsyncs++
	if err := d.syncWAL(); err != nil {
		return fmt.Errorf("%w: %w", errSyncFailed, err)
	}
	return nil
}

// syncWAL syncs the WAL file (and, for a WAL file not seen before, its
// directory). No WAL file means every commit was checkpointed into the
// database file, which the checkpoint synced.
func (d *DB) syncWAL() error {
	f, err := os.Open(d.path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if prev := d.writes.sync.wal; prev != nil && os.SameFile(prev, fi) {
		return nil
	}
	dir, err := os.Open(filepath.Dir(d.path))
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return err
	}
	d.writes.sync.wal = fi // only the one fsync in progress touches it
	return nil
}
