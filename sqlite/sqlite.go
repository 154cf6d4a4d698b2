// Package sqlite is conch's persistent state: a conch.Store over one SQLite
// file (modernc.org/sqlite, pure Go, WAL).
//
// # Schema
//
// The schema lives in migrations/NNNN_what.sql, embedded in the binary and
// applied in order at Open, each in its own transaction together with the
// PRAGMA user_version bump. A later package that needs tables (sandboxes,
// terminals, …) adds the next numbered file here; nothing else changes. A file
// whose first line is "-- conch:foreign-keys=off" runs with foreign keys off
// (for table rebuilds) and is checked with PRAGMA foreign_key_check before it
// commits. A database whose user_version is above the newest embedded
// migration is refused with ErrSchemaTooNew.
//
// # Connections
//
// A file database has one writer connection (every Store change, BEGIN
// IMMEDIATE, so writers never deadlock on a lock upgrade) and a pool of
// reader connections (History, Facts, …; WAL lets them read while a write is
// in progress). An in-memory database (":memory:") has exactly one connection,
// shared by all. Every statement is prepared once at Open.
//
// # Durability
//
// Changes are committed in groups (group.go): the changes that arrive while
// one group is written share the next transaction, each change in its own
// savepoint. By default (SyncInbound) only a group holding an AddInbound
// waits for the disk: that is the promise a channel relies on before it
// acknowledges a message, and AddInbound returns only after its group's
// fsync. Other changes are safe against a crash of the process and, on
// power loss, can only be lost as a suffix of history; WithSync(SyncFull)
// makes every commit wait for the disk.
//
// # Sharing the file
//
// SQL returns a *sql.DB on the same database for packages that keep their own
// tables (for example the Matrix crypto store). For a file database it is a
// multi-connection pool with the same pragmas (WAL, busy_timeout, foreign
// keys) whose transactions BEGIN IMMEDIATE. mautrix's store takes it as
//
//	dbutil.NewWithDB(db.SQL(), "sqlite") // go.mau.fi/util/dbutil
//
// and hands the result to cryptohelper.NewCryptoHelper (which, given a path
// instead, would open it with mattn/go-sqlite3: cgo only). dbutil maps any
// dialect name starting with "sqlite" to its SQLite dialect, and modernc
// binds the $1-style parameters dbutil writes. dbutil versions its tables in
// its own table (crypto_version), independent of PRAGMA user_version, which
// belongs to this package. The pool commits with synchronous=NORMAL (FULL
// under SyncFull), as mautrix's own "sqlite3-fk-wal" setup does.
//
// With ":memory:" SQL returns the single connection's pool: holding a
// transaction open on it blocks the Store until it ends.
//
// Times are stored as UTC unix milliseconds and come back in UTC, truncated
// to the millisecond.
package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"conch"
)

// driverName is the database/sql driver modernc.org/sqlite registers.
const driverName = "sqlite"

// MemoryPath opens a private in-memory database.
const MemoryPath = ":memory:"

// Sync says which commits of a file database wait for the disk (fsync of
// the WAL). Every mode survives a crash of conch (SIGKILL) with every
// returned change intact, and the database is consistent after a power loss
// in every mode; the modes differ in what a power loss may take back.
type Sync string

const (
	// SyncInbound (the default) syncs the commits of AddInbound: a stored
	// message survives a power loss, so a channel may acknowledge it. Other
	// changes made since the last AddInbound may be lost with the power; the
	// WAL is ordered, so what is lost is always a suffix: a cursor is never
	// ahead of the messages it covers, and a turn whose end was lost is
	// resumed like one interrupted by a crash. One fsync per message instead
	// of one per change.
	SyncInbound Sync = "inbound"
	// SyncFull syncs every commit (PRAGMA synchronous=FULL).
	SyncFull Sync = "full"
	// SyncNormal syncs only at checkpoints (PRAGMA synchronous=NORMAL): even
	// a stored message may be lost on power loss.
	SyncNormal Sync = "normal"
)

// Option changes how Open sets up the database.
type Option func(*options)

type options struct {
	now         func() time.Time
	sync        Sync
	busyTimeout time.Duration
	readers     int
	readerIdle  time.Duration
	readerCache int // KiB; the pool's connections' cache_size
	cacheKiB    int // set by Open per pool: its cache_size (0: SQLite's 2,000 KiB)
}

// DefaultReaderIdle is how long a reader connection of a file database
// stays open unused. Each holds two open files and up to 2 MiB of SQLite's
// page cache (the default cache_size, outside Go's heap); kept forever, a
// burst left all of them open for good.
const DefaultReaderIdle = time.Minute

// DefaultReaderCache is the page cache of each reader connection of a file
// database, in KiB (SQLite's own default is 2,000). Under writes it hardly
// matters: SQLite empties a reader's cache at its first read after any
// write (WAL). Between writes a reader keeps what it read, and each KiB of
// SQLite's count is about two in modernc's allocator (a 4 KiB page with its
// header takes an 8 KiB slot), outside Go's heap: four readers with the
// default held 17 MiB (BenchmarkStoreMemory). The file's pages stay in the
// system's page cache; BenchmarkHistoryAcross measures the reads.
const DefaultReaderCache = 256

// WithClock sets the clock that stamps created_at, updated_at and friends.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithSync sets which commits wait for the disk (default SyncInbound).
func WithSync(s Sync) Option { return func(o *options) { o.sync = s } }

// WithBusyTimeout sets how long a connection waits for a lock held by
// another connection or process (default 10 s).
func WithBusyTimeout(d time.Duration) Option { return func(o *options) { o.busyTimeout = d } }

// WithReaders sets the size of the reader pool of a file database
// (default max(4, GOMAXPROCS)).
func WithReaders(n int) Option { return func(o *options) { o.readers = n } }

// WithReaderCache sets each reader connection's page cache of a file
// database in KiB (default DefaultReaderCache).
func WithReaderCache(kib int) Option { return func(o *options) { o.readerCache = kib } }

// WithReaderIdle sets how long an unused reader connection stays open
// (default DefaultReaderIdle; 0 keeps them open).
func WithReaderIdle(d time.Duration) Option { return func(o *options) { o.readerIdle = d } }

// DB is the SQLite store. It implements conch.Store; all methods are safe for
// concurrent use.
type DB struct {
	w        *sql.DB // the writer: one connection
	r        *sql.DB // readers and SQL(); the same as w for :memory:
	ws       writeStmts
	rs       readStmts
	prepared []*sql.Stmt
	writes   writeQueue
	history  *historyCache
	now      func() time.Time
	path     string
	// syncInbound: the writer runs NORMAL; the commits of AddInbound are
	// synced after they are made (durable.go).
	syncInbound bool
}

var _ conch.Store = (*DB)(nil)
var _ conch.AttachmentUpdater = (*DB)(nil)

// Open opens (creating if needed) the database at path, or a private
// in-memory database when path is ":memory:", and migrates it to the newest
// schema.
func Open(ctx context.Context, path string, opts ...Option) (*DB, error) {
	o := options{now: time.Now, sync: SyncInbound, busyTimeout: 10 * time.Second, readers: max(4, runtime.GOMAXPROCS(0)), readerIdle: DefaultReaderIdle, readerCache: DefaultReaderCache}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case path == "":
		return nil, conch.Errorf(conch.KindInvalid, "open database: path is empty (use a file name or %q)", MemoryPath)
	case o.sync != SyncInbound && o.sync != SyncFull && o.sync != SyncNormal:
		return nil, conch.Errorf(conch.KindInvalid, "open database: sync mode %q is not inbound, full or normal", o.sync)
	case o.busyTimeout < 0 || o.readers < 1 || o.readerIdle < 0 || o.readerCache < 1:
		return nil, conch.Errorf(conch.KindInvalid, "open database: busy timeout and reader idle time must be >= 0, readers and reader cache >= 1")
	case o.now == nil:
		return nil, conch.Errorf(conch.KindInvalid, "open database: clock is nil")
	}
	d := &DB{now: o.now, path: path, history: newHistoryCache()}
	d.writes.idle.L = &d.writes.mu
	var err error
	if path == MemoryPath {
		// One connection, never closed while the DB lives: every connection to
		// ":memory:" would be a database of its own.
		d.w, err = openPool(MemoryPath, o, false, 1)
		d.r = d.w
	} else {
		var abs string
		abs, err = filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("open database %s: %w", path, err)
		}
		d.path = abs
		d.syncInbound = o.sync == SyncInbound
		if d.w, err = openPool(fileURI(abs), o, true, 1); err == nil {
			ro := o
			ro.cacheKiB = o.readerCache
			d.r, err = openPool(fileURI(abs), ro, false, o.readers)
		}
		if err == nil {
			d.r.SetConnMaxIdleTime(o.readerIdle) // the writer's one connection stays
		}
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := d.setupRetry(ctx, o.busyTimeout); err != nil {
		d.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := d.syncOpened(); err != nil {
		d.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return d, nil
}

// setupRetry runs setup, trying again while the file is busy: switching to
// WAL and migrating take locks SQLite may refuse at once, without waiting
// for the busy timeout, when another process opens the file at the same time.
func (d *DB) setupRetry(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	delay := 10 * time.Millisecond
	for {
		err := d.setup(ctx)
		if err == nil || !isBusy(err) || time.Now().Add(delay).After(deadline) {
			return err
		}
		for _, st := range d.prepared {
			st.Close()
		}
		d.prepared = nil
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return err
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// openPool opens a database/sql pool whose every connection carries the
// pragmas. Only the writer switches the file to WAL (it persists in the file).
func openPool(name string, o options, wal bool, conns int) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.busyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	if wal {
		q.Add("_pragma", "journal_mode(WAL)")
	}
	if o.cacheKiB > 0 {
		q.Add("_pragma", fmt.Sprintf("cache_size(-%d)", o.cacheKiB))
	}
	sync := "NORMAL"
	if o.sync == SyncFull {
		sync = "FULL"
	}
	q.Add("_pragma", "synchronous("+sync+")")
	q.Set("_txlock", "immediate")
	db, err := sql.Open(driverName, name+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// fileURI turns an absolute path into a SQLite URI, escaping '?', '#' and '%'
// so that any file name works.
func fileURI(abs string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
}

func (d *DB) setup(ctx context.Context) error {
	ms, err := loadMigrations(migrationFS)
	if err != nil {
		return err
	}
	conn, err := d.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var mode string
	if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return fmt.Errorf("read journal mode: %w", err)
	}
	if d.path != MemoryPath && mode != "wal" {
		return fmt.Errorf("journal mode is %q, want wal", mode)
	}
	if err := migrate(ctx, conn, ms); err != nil {
		return err
	}
	// For ":memory:" the reader is the writer: give the connection back first.
	if err := conn.Close(); err != nil {
		return err
	}
	if err := d.prepare(ctx, d.w, d.ws.specs()); err != nil {
		return err
	}
	return d.prepare(ctx, d.r, d.rs.specs())
}

// SQL returns a pool on the same database for packages that keep their own
// tables in it; see the package documentation. It is closed by Close.
func (d *DB) SQL() *sql.DB { return d.r }

// Path returns the absolute path of the database file, or ":memory:".
func (d *DB) Path() string { return d.path }

// Close closes the database. The WAL is checkpointed by SQLite when the last
// connection closes.
func (d *DB) Close() error {
	if d.writes.idle.L != nil {
		d.drainWrites() // changes queued by AppendEventAsync
	}
	var errs []error
	for _, st := range d.prepared {
		errs = append(errs, st.Close())
	}
	if d.r != nil && d.r != d.w {
		errs = append(errs, d.r.Close())
	}
	if d.w != nil {
		errs = append(errs, d.w.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close database: %w", err)
	}
	return nil
}

// sqliteFull is SQLITE_FULL: the disk (or the file system's quota) is full.
const sqliteFull = 13

// diskFull turns "database or disk is full" into an error that says where,
// in words a person can act on; other errors pass unchanged.
func (d *DB) diskFull(err error) error {
	if err == nil || errors.Is(err, conch.ErrStoreFull) {
		return err
	}
	var se *sqlite.Error
	if (errors.As(err, &se) && se.Code()&0xff == sqliteFull) || errors.Is(err, syscall.ENOSPC) {
		where := filepath.Dir(d.path)
		if d.path == "" || d.path == MemoryPath {
			where = "the store"
		}
		return &conch.Error{Kind: conch.KindUnavailable, User: "disk full at " + where + ": free some space, then send the message again",
			Err: fmt.Errorf("%w: %w", conch.ErrStoreFull, err)}
	}
	return err
}

// millis is how times are stored.
func millis(t time.Time) int64 { return t.UnixMilli() }

// fromMillis is how times are read back.
func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// nullMillis stores the zero time as NULL.
func nullMillis(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

func fromNullMillis(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromMillis(n.Int64)
}

// normTime is what a time becomes after a round trip through the store.
func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return fromMillis(millis(t))
}

// isForeignKeyError reports whether err is a foreign key violation.
func isForeignKeyError(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// jsonObject checks that raw is a JSON object; empty means {}.
func jsonObject(what string, raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "{}", nil
	}
	if !json.Valid(raw) {
		return "", conch.Errorf(conch.KindInvalid, "%s is not valid JSON", what)
	}
	if t := bytes.TrimLeft(raw, " \t\r\n"); t[0] == '{' {
		return string(raw), nil
	}
	return "", conch.Errorf(conch.KindInvalid, "%s is not a JSON object", what)
}

func validKey(k conch.ConversationKey) error {
	switch {
	case k.Channel == "" && k.ID == "":
		return conch.Errorf(conch.KindInvalid, "conversation key is empty")
	case k.Channel == "":
		return conch.Errorf(conch.KindInvalid, "conversation key %q has no channel", k.String())
	case k.ID == "":
		return conch.Errorf(conch.KindInvalid, "conversation key %q has no id", k.String())
	}
	return nil
}

// isBusy reports whether err is SQLite's "database is locked" (SQLITE_BUSY or
// one of its extended codes).
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// Backup writes a consistent copy of the whole store to path (which must not
// exist) while conch keeps running: SQLite's VACUUM INTO reads one snapshot
// and writes a compact database file, created 0600.
func (d *DB) Backup(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err == nil {
		return conch.Errorf(conch.KindInvalid, "backup %s: the file exists; give a new name", path)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	f.Close()
	// VACUUM INTO wants an empty or absent file; keep ours for its mode.
	if _, err := d.r.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		os.Remove(path)
		return fmt.Errorf("backup %s: %w", path, err)
	}
	return nil
}
