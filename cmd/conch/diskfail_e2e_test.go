package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"conch/internal/testenv"
	"conch/internal/testenv/fakellm"
	tgfake "conch/internal/testenv/telegram"
)

// failingDisk is a file system whose disk can be made to fail: ext4 on a
// loop device whose sparse backing file lives on a small tmpfs. Filling
// the tmpfs makes every write-back of a new block fail, so an fsync
// returns an error, as a dying or thin-provisioned disk does; emptying it
// lets writes through again.
type failingDisk struct {
	dir  string // where the ext4 is mounted
	back string // the tmpfs holding the backing file
}

func newFailingDisk(t *testing.T) *failingDisk {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (to mount a loop device)", "not running as root")
	}
	back, dir := t.TempDir(), t.TempDir()
	run := func(what string, args ...string) string {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			testenv.Missing(t, what, fmt.Sprintf("%s: %v: %s", strings.Join(args, " "), err, out))
		}
		return strings.TrimSpace(string(out))
	}
	run("a small tmpfs", "mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", back)
	t.Cleanup(func() { unmount(back) })
	img := filepath.Join(back, "disk.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(512 << 20) // sparse: blocks are taken from the tmpfs as written
	f.Close()
	run("mkfs.ext4 (e2fsprogs)", "mkfs.ext4", "-q", "-F", img)
	loop := run("a loop device (losetup)", "losetup", "-f", "--show", img)
	t.Cleanup(func() { exec.Command("losetup", "-d", loop).Run() })
	run("mounting a loop device", "mount", loop, dir)
	t.Cleanup(func() { unmount(dir) })
	return &failingDisk{dir: dir, back: back}
}

// unmount unmounts dir, lazily only when it is still busy (the loop device
// and the tmpfs are freed once nothing holds them).
func unmount(dir string) {
	if exec.Command("umount", dir).Run() != nil {
		exec.Command("umount", "-l", dir).Run()
	}
}

// fail fills the tmpfs under the disk: new blocks can no longer be written.
func (d *failingDisk) fail(t *testing.T) {
	t.Helper()
	f, err := os.Create(filepath.Join(d.back, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// heal empties the tmpfs again.
func (d *failingDisk) heal(t *testing.T) {
	t.Helper()
	if err := os.Remove(filepath.Join(d.back, "fill")); err != nil {
		t.Fatal(err)
	}
}

// TestUpStopsWhenTheDiskFails: when an fsync of the store fails (a real
// disk error under a real file system), conch up stops with an error that
// says so (non-zero: the service manager starts it again) instead of
// staying up answering nobody; the message whose fsync failed was not
// acknowledged, so once the disk works again the next start answers it,
// once, and nothing answered before is answered again.
func TestUpStopsWhenTheDiskFails(t *testing.T) {
	testenv.Short(t)
	disk := newFailingDisk(t)
	llm := fakellm.New(t)
	llm.Handle(func(r fakellm.Request) fakellm.Reply { return fakellm.Text("re: " + r.LastUserText()[:20]) })
	tg := tgfake.Start(t)
	alice := tgfake.Person(4545, "alice", "Alice")
	chat := tgfake.PrivateChat(alice)
	env := telegramEnv(t, llm, tg, disk.dir, "4545")
	p := startConch(t, env, "up")
	p.waitStderr(t, "telegram polling")
	tg.SendText(alice, chat, "first message, before the disk fails")
	tg.WaitMessages(t, alice.ID, 1, 30*time.Second)

	disk.fail(t)
	// Long enough to need new blocks on the disk for the store's log.
	second := "second message, while the disk fails " + strings.Repeat("and more ", 20000)
	tg.SendText(alice, chat, second)
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Fatalf("conch up ended with %v, want a non-zero exit; stderr:\n%s", err, p.stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("conch up still running 60 s after its disk failed; stderr:\n%s", p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "the store's disk failed") {
		t.Fatalf("stderr does not say the disk failed:\n%s", p.stderr)
	}
	if n := len(tg.Messages(alice.ID)); n != 1 {
		t.Fatalf("%d messages sent while the disk failed, want only the first answer: %+v", n, tg.Messages(alice.ID))
	}

	disk.heal(t)
	p2 := startConch(t, env, "up")
	p2.waitStderr(t, "telegram polling")
	msgs := tg.WaitMessages(t, alice.ID, 2, 60*time.Second)
	if !strings.Contains(msgs[1].Text, "re: second message") {
		t.Fatalf("after the restart: %q, want the answer to the second message", msgs[1].Text)
	}
	time.Sleep(2 * time.Second) // a second answer to either message would come by now
	if n := len(tg.Messages(alice.ID)); n != 2 {
		t.Fatalf("%d messages after the restart, want 2 (each message answered once): %+v", n, tg.Messages(alice.ID))
	}
}
