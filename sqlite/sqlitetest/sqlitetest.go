// Package sqlitetest opens real SQLite stores for tests of other packages.
// Only tests import it.
package sqlitetest

import (
	"context"
	"path/filepath"
	"testing"

	"conch/sqlite"
)

// MustOpenMemory opens a private in-memory store, closed when tb ends.
func MustOpenMemory(tb testing.TB, opts ...sqlite.Option) *sqlite.DB {
	tb.Helper()
	return mustOpen(tb, sqlite.MemoryPath, opts...)
}

// MustOpenFile opens a store in a new file under tb.TempDir(), closed when
// tb ends. Use it where WAL, several connections or a reopen matter.
func MustOpenFile(tb testing.TB, opts ...sqlite.Option) *sqlite.DB {
	tb.Helper()
	return mustOpen(tb, filepath.Join(tb.TempDir(), "conch.db"), opts...)
}

func mustOpen(tb testing.TB, path string, opts ...sqlite.Option) *sqlite.DB {
	tb.Helper()
	db, err := sqlite.Open(context.Background(), path, opts...)
	if err != nil {
		tb.Fatalf("open store %s: %v", path, err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close store %s: %v", path, err)
		}
	})
	return db
}
