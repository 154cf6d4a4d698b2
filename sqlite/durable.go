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
	mu   sync.Mutex
	cond sync.Cond // on mu: a group's writing or an fsync ended
	// started numbers the groups holding a durable change as their writing
	// begins, committed counts those whose writing ended (committed or
	// not: groups are written one at a time, in order), and synced is the
	// highest of them known to be on disk. A change is readable as soon as
	// its group committed, before noteEnd: WaitDurable waits for every
	// group started, so a reader that saw a message never answers it early.
	started, committed, synced uint64
	syncing                    bool          // an fsync is under way
	err                        error         // sticky: the first failed fsync
	failed                     chan struct{} // closed with err
	// wal is the WAL file whose directory entry was synced; walPath is
	// where SQLite keeps it (the database's real path, links resolved).
	wal     fs.FileInfo
	walPath string
	// fsyncs counts fsyncs, for tests; hook, set by tests, runs before each
	// and may fail it.
	fsyncs int
	hook   func() error
}

// errSyncFailed marks an error of a failed fsync of the store.
var errSyncFailed = errors.New("the store's file could not be synced to disk; restart conch")

// noteStart records that a group holding a durable change is being
// written; it returns the number to wait for. noteEnd(n) follows when the
// writing ended, whether it committed or not.
func (s *syncer) noteStart() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started++
	return s.started
}

// noteEnd records that group n's writing ended.
func (s *syncer) noteEnd(n uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.committed = n
	s.cond.Broadcast()
}

// broken returns the sticky error of a failed fsync, if any.
func (s *syncer) broken() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// waitSynced returns once group n is on disk, syncing the WAL file when
// no fsync that covers it is under way. It does not give up with a
// context: an fsync is short, and a caller told its message was not stored
// while it is would store it again (harmless, but noisy).
func (d *DB) waitSynced(n uint64) error {
	s := &d.writes.sync
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.synced < n && s.err == nil {
		if s.syncing || s.committed < n {
			s.cond.Wait() // an fsync, or group n, is under way
			continue
		}
		target := s.committed // every group up to here is in the file
		s.syncing = true
		hook := s.hook
		s.mu.Unlock()
		var err error
		if hook != nil {
			err = hook()
		}
		if err == nil {
			err = d.syncWAL(true)
		}
		s.mu.Lock()
		s.syncing = false
		s.fsyncs++
		if err != nil {
			s.err = fmt.Errorf("%w: %w", errSyncFailed, err)
			close(s.failed)
		} else {
			s.synced = max(s.synced, target)
		}
		s.cond.Broadcast()
	}
	return s.err
}

// Failed is closed when an fsync of the store failed; Err then says why.
// Nothing more is written or made durable until the store is opened again:
// a process serving from it should stop and be started again, and SQLite
// recovers what the disk holds.
func (d *DB) Failed() <-chan struct{} { return d.writes.sync.failed }

// Err is the store's failure (a failed fsync), or nil.
func (d *DB) Err() error { return d.writes.sync.broken() }

// WaitDurable returns once every message stored so far (by AddInbound or
// StageInbound) survives a power loss: at once when none is waiting for the
// disk. The gateway calls it before it sends an answer, so no answer goes
// out to a message a power loss could still take back.
func (d *DB) WaitDurable(ctx context.Context) error {
	s := &d.writes.sync
	s.mu.Lock()
	n, done, err := s.started, s.synced >= s.started, s.err
	s.mu.Unlock()
	if err != nil || done {
		return err
	}
	return d.waitSynced(n)
}

// syncOpened finds the WAL file and syncs, under SyncInbound, what the
// store found at Open. A process killed between a commit and its fsync
// left the commit in the WAL file, which the kernel still holds: SQLite
// reads it back, and the turn it started resumes and may be answered;
// after this fsync no answer goes to a message a power loss could still
// take back.
func (d *DB) syncOpened() error {
	s := &d.writes.sync
	s.cond.L = &s.mu
	s.failed = make(chan struct{})
	if !d.syncInbound {
		return nil
	}
	// SQLite names the WAL after the database file's real path: through a
	// link, the WAL is beside the link's target.
	real, err := filepath.EvalSymlinks(d.path)
	if err != nil {
		return fmt.Errorf("%w: %w", errSyncFailed, err)
	}
	s.walPath = real + "-wal"
	s.fsyncs++
	if err := d.syncWAL(false); err != nil {
		return fmt.Errorf("%w: %w", errSyncFailed, err)
	}
	return nil
}

// syncWAL syncs the WAL file (and, for a WAL file not seen before, its
// directory). After a durable commit (committed) the file must be there:
// SQLite keeps it while any connection is open, and reuses it from its
// start after a checkpoint rather than removing it. Not there at Open
// means nothing was written yet.
func (d *DB) syncWAL(committed bool) error {
	s := &d.writes.sync
	f, err := os.Open(s.walPath)
	if errors.Is(err, fs.ErrNotExist) && !committed {
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
	if prev := s.wal; prev != nil && os.SameFile(prev, fi) {
		return nil
	}
	dir, err := os.Open(filepath.Dir(s.walPath))
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return err
	}
	s.wal = fi // only the one fsync in progress touches it
	return nil
}
