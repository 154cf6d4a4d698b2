//go:build linux

package terminal_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"conch/internal/testenv"
	"conch/terminal"
	"conch/terminal/terminaltest"
)

// TestExitStatusWhenTmuxMissesSIGCHLD puts tmux, deterministically, in the
// state TestExitArchivesScrollback/host was once found in on a loaded
// machine: the shell's exit marker never reached conch (tmux drops a dead
// pane's output still queued for a control client) and tmux never learned
// the shell's exit status (tmux before 3.6 built with utempter loses the
// SIGCHLD of a pane whose process exits while utempter_remove_record runs:
// the shell stays a zombie, pane_dead_status stays empty). Here the marker
// is taken away by the command itself (trap - EXIT) and the SIGCHLD by a
// ptrace of the tmux server that swallows it. Wait must still report the
// status, at once: not "unknown" after its bound.
func TestExitStatusWhenTmuxMissesSIGCHLD(t *testing.T) {
	b := terminaltest.Host(t)
	ctx := ctxT(t)
	m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
	t.Cleanup(m.Detach)
	if _, err := m.Open(ctx, ""); err != nil {
		t.Fatalf("Open: %v", err)
	}
	sock := filepath.Join(b.Opts.RunDir, "tmux.sock")
	f := strings.Fields(tmuxDisplay(t, sock, "#{pid} #{pane_pid}"))
	if len(f) != 2 {
		t.Fatalf("tmux server and pane pids: got %q", f)
	}
	server, _ := strconv.Atoi(f[0])
	shell, _ := strconv.Atoi(f[1])

	swallowed := swallowSIGCHLD(t, server, shell)
	mustType(t, m, 0, "bash", "trap - EXIT; echo archived-line; exit 7", true)
	select {
	case err := <-swallowed:
		if err != nil {
			t.Fatalf("swallow the shell's SIGCHLD: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the shell did not exit")
	}
	// The failing state: the shell is a zombie tmux did not reap, its pane
	// dead with no status.
	if st := procState(shell); st != "Z" {
		t.Fatalf("shell %d: state %q, want Z (a zombie tmux has not reaped)", shell, st)
	}
	if got := tmuxDisplay(t, sock, "#{pane_dead}:#{pane_dead_status}"); got != "1:" {
		t.Fatalf("tmux pane_dead:pane_dead_status: got %q, want \"1:\" (dead, status unknown)", got)
	}

	start := time.Now()
	res := mustWait(t, m, 10*time.Second)
	t.Logf("wait %v:\n%s", time.Since(start), res)
	o := obsOf(t, res, 0)
	if o.State != terminal.StateExited || o.Exit != 7 || o.ExitUnknown {
		t.Fatalf("after exit 7: got %s exit %d unknown=%v, want exited 7\n%s", o.State, o.Exit, o.ExitUnknown, res)
	}
	contains(t, "output", o.Text, "archived-line")
	if st := procState(shell); st != "" {
		t.Errorf("shell %d: state %q after Wait, want reaped", shell, st)
	}
}

// tmuxDisplay asks the tmux server at sock for a format of its one pane.
func tmuxDisplay(t *testing.T, sock, format string) string {
	t.Helper()
	out, err := exec.Command("tmux", "-S", sock, "display-message", "-p", "-t", "tty_0", format).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux display-message %q: %v: %s", format, err, out)
	}
	return strings.TrimSpace(string(out))
}

// procState is the state letter of process pid ("" when it is gone).
func procState(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) state ...: comm may hold spaces, the last ')' ends it.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+3 > len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// swallowSIGCHLD traces the tmux server and keeps every SIGCHLD from it
// until one comes after child became a zombie; then it lets the server go.
// The channel tells when that happened. Other signals pass.
func swallowSIGCHLD(t *testing.T, server, child int) <-chan error {
	t.Helper()
	attached := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		// Every ptrace request must come from the tracing thread. The
		// thread is not unlocked: it ends with the goroutine.
		runtime.LockOSThread()
		if err := syscall.PtraceAttach(server); err != nil {
			attached <- err
			return
		}
		attached <- nil
		for {
			var ws syscall.WaitStatus
			if _, err := syscall.Wait4(server, &ws, syscall.WALL, nil); err != nil {
				if errors.Is(err, syscall.EINTR) {
					continue
				}
				done <- fmt.Errorf("wait for tmux: %w", err)
				return
			}
			if !ws.Stopped() {
				done <- fmt.Errorf("tmux ended: %v", ws)
				return
			}
			sig := ws.StopSignal()
			switch sig {
			case syscall.SIGSTOP: // the attach's own stop
				sig = 0
			case syscall.SIGCHLD:
				if procState(child) == "Z" {
					done <- syscall.PtraceDetach(server)
					return
				}
				sig = 0
			}
			if err := syscall.PtraceCont(server, int(sig)); err != nil {
				done <- fmt.Errorf("resume tmux: %w", err)
				return
			}
		}
	}()
	if err := <-attached; err != nil {
		testenv.Missing(t, "ptrace", fmt.Sprintf("attach to the tmux server: %v", err))
	}
	return done
}
