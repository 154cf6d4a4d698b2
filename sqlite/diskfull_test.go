package sqlite_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"conch"
	"conch/internal/testenv"
	"conch/sqlite"
)

// TestDiskFullSaysWhere fills a small tmpfs under the store: the error a
// person reads names the full disk and where it is, not "something went wrong".
func TestDiskFullSaysWhere(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (to mount a small tmpfs)", "not running as root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		testenv.Missing(t, "a small tmpfs", strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	db, err := sqlite.Open(t.Context(), filepath.Join(dir, "conch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "full"}
	big := strings.Repeat("x", 64<<10)
	for i := range 100 {
		_, _, err = db.AddInbound(t.Context(), conch.Inbound{Key: key, Sender: "u", Text: big})
		if err != nil {
			break
		}
		if i == 99 {
			t.Fatal("1 MiB held 100 × 64 KiB messages: the disk never filled")
		}
	}
	msg := conch.UserMessage(err)
	if !strings.Contains(msg, "disk full at "+dir) {
		t.Fatalf("got %q (%v), want it to say the disk at %s is full", msg, err, dir)
	}
	// The gateway waits for room on this error instead of failing the turn.
	if !errors.Is(err, conch.ErrStoreFull) {
		t.Fatalf("got %v, want it to wrap conch.ErrStoreFull", err)
	}
}
