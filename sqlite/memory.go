package sqlite

import (
	"context"
	"fmt"
)

// ReleaseMemory gives back what the store keeps in memory only to be
// faster while busy: the model views of conversations (historyCache, up to
// historyCacheBytes of Go's heap) and the writer connection's page cache
// (up to 2 MiB by SQLite's count, twice that in modernc's allocator, whose
// smallest slot for a 4 KiB page with SQLite's header is 8 KiB). conch up
// calls it when it goes quiet after work (internal/idletrim); the next turn
// of each conversation reads its view whole once and keeps it again, and
// the writer reads its pages from the file (the system's page cache) again.
// Measured by BenchmarkStoreMemory: 8.8 MiB of views and 4.2 MiB of pages
// after 16,000 messages over 100 conversations.
//
// Safe while reads and writes are in flight: a read that began before keeps
// what it read as a new entry; PRAGMA shrink_memory waits for the writer's
// one connection and frees only pages no statement holds. Readers are not
// shrunk: SQLite empties a reader's cache at its first read after any
// write (WAL), and idle readers are closed (WithReaderIdle).
func (d *DB) ReleaseMemory(ctx context.Context) error {
	d.history.clear()
	if d.path == MemoryPath {
		return nil // its pages are the database
	}
	if _, err := d.w.ExecContext(ctx, `PRAGMA shrink_memory`); err != nil {
		return fmt.Errorf("release the store's memory: %w", err)
	}
	return nil
}

// clear drops every entry; reads in flight are left to end.
func (c *historyCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
	c.lru.Init()
	c.bytes = 0
}
