package sandboxd_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"conch/sandbox/sandboxd"
)

// InstallSelf puts a runnable copy of the running executable in dir (what
// a Kubernetes sandbox pod's init container does with conch).
func TestInstallSelf(t *testing.T) {
	dir := t.TempDir()
	dst, err := sandboxd.InstallSelf(dir, "conch")
	if err != nil {
		t.Fatal(err)
	}
	if dst != filepath.Join(dir, "conch") {
		t.Fatalf("installed at %s", dst)
	}
	exe, _ := os.Executable()
	want, _ := os.ReadFile(exe)
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("copy differs (%d bytes, want %d): %v", len(got), len(want), err)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v", fi.Mode())
	}
	// The skills volume's mount point (the agent volume is read-only in
	// the sandbox container, so it must exist there already).
	if fi, err := os.Stat(filepath.Join(dir, "skills")); err != nil || !fi.IsDir() {
		t.Fatalf("no skills mount point: %v", err)
	}
	if _, err := sandboxd.InstallSelf(dir, "conch"); err != nil {
		t.Fatalf("a second install: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".conch-*")); len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if _, err := sandboxd.InstallSelf(filepath.Join(dir, "missing"), "conch"); err == nil {
		t.Fatal("install into a missing directory succeeded")
	}
}
