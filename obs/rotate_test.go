package obs

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// openFDs counts this process's descriptors open on path.
func openFDs(t *testing.T, path string) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// OpenRotatingFile holds its file open from the start, keeps what an
// existing file holds, still rotates, and holds one descriptor throughout.
func TestOpenRotatingFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts descriptors in /proc/self/fd")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "logs", "audit.jsonl")
	w, err := OpenRotatingFile(path, 1, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != 0 {
		t.Fatalf("the file is not there at once: %v %v", fi, err)
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Errorf("logs dir mode %v, want 0700", di.Mode().Perm())
	}
	if n := openFDs(t, path); n != 1 {
		t.Fatalf("%d descriptors on the file before the first record, want 1", n)
	}
	line := []byte(strings.Repeat("x", 1000) + "\n")
	if _, err := w.Write(line); err != nil {
		t.Fatal(err)
	}
	if n := openFDs(t, path); n != 1 {
		t.Fatalf("%d descriptors after the first record, want 1", n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := openFDs(t, path); n != 0 {
		t.Fatalf("%d descriptors after Close", n)
	}

	// Opened again: appended to, not truncated nor rotated.
	w, err = OpenRotatingFile(path, 1, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(line); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, append(append([]byte{}, line...), line...)) {
		t.Fatalf("reopened file holds %d bytes, want both records (%d)", len(b), 2*len(line))
	}
	// Past 1 MB it rotates into a backup and goes on in a fresh file, on
	// one descriptor.
	for range 1100 {
		if _, err := w.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	backups, _ := filepath.Glob(filepath.Join(dir, "logs", "audit-*.jsonl"))
	if len(backups) != 1 {
		t.Fatalf("backups after 1.1 MB: %v", backups)
	}
	if fi, _ := os.Stat(path); fi == nil || fi.Size() >= 1<<20 || fi.Size() == 0 {
		t.Fatalf("current file after rotation: %v", fi)
	}
	if n := openFDs(t, path); n != 1 {
		t.Fatalf("%d descriptors after rotation, want 1", n)
	}
	w.Close()

	// A file that cannot be opened is an error at once.
	blocker := filepath.Join(dir, "file")
	os.WriteFile(blocker, nil, 0o600)
	if _, err := OpenRotatingFile(filepath.Join(blocker, "audit.jsonl"), 1, 2, 0); err == nil {
		t.Fatal("a log under a regular file opened")
	}
}
