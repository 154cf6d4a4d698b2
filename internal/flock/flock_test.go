package flock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLockExcludesAndHonoursContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.lock")
	unlock, err := Lock(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := Lock(ctx, path); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock while held: got %v, want deadline exceeded", err)
	}
	unlock()
	unlock2, err := Lock(context.Background(), path)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}

func TestTryLockNamesTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d", "conch.lock")
	unlock, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to the open file: a second open in this process
	// conflicts like another process would.
	_, err = TryLock(path)
	var held *HeldError
	if !errors.As(err, &held) || held.PID != os.Getpid() {
		t.Fatalf("got %v, want a HeldError naming pid %d", err, os.Getpid())
	}
	unlock()
	unlock2, err := TryLock(path)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	unlock2()
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
}
