//go:build linux

package terminal_test

import (
	"context"
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

	"conch"
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
// status 7, where it used to wait out its bound and say "unknown".
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
	// tmux may not have read the terminal's end yet.
	got := tmuxDisplay(t, sock, "#{pane_dead}:#{pane_dead_status}")
	for deadline := time.Now().Add(10 * time.Second); got == "0:" && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		got = tmuxDisplay(t, sock, "#{pane_dead}:#{pane_dead_status}")
	}
	if got != "1:" {
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

// TestProgramKilledBySignal: a program killed by a signal prints no exit
// marker and has no exit status; tmux tells the signal (pane_dead_signal),
// which is reported as such rather than waited on as a missing status
// (until its bound, then "unknown").
func TestProgramKilledBySignal(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
		t.Cleanup(m.Detach)
		op, err := m.Open(ctx, "python3 -q")
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		mustType(t, m, op.TTY, "python3", "import os, signal; os.kill(os.getppid(), signal.SIGKILL)", true)
		start := time.Now()
		res := mustWait(t, m, 10*time.Second)
		t.Logf("wait %v:\n%s", time.Since(start), res)
		o := obsOf(t, res, op.TTY)
		// tmux names signals by number on Linux, by name elsewhere.
		if o.State != terminal.StateExited || (o.Signal != "9" && o.Signal != "KILL") || o.ExitUnknown {
			t.Fatalf("after SIGKILL: got %s signal %q unknown=%v, want exited, killed by signal 9\n%s", o.State, o.Signal, o.ExitUnknown, res)
		}
		contains(t, "report", o.String(), "killed by signal "+o.Signal)
	})
}

// TestAwaitExitOfDeadPane: a watch on a terminal whose program ended
// without its exit marker (tmux drops it at times; here it is taken away)
// learns the status, or the signal, from tmux instead of "unknown"; and it
// learns of the death even when the pane printed nothing on its way out, so
// that tmux never renamed the window "[dead]" (the shell is killed from
// outside while a command runs).
func TestAwaitExitOfDeadPane(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
		t.Cleanup(m.Detach)
		for range 2 {
			if _, err := m.Open(ctx, ""); err != nil {
				t.Fatalf("Open: %v", err)
			}
		}
		// A watch that missed the death would wait for ever: not past 20 s.
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		mustType(t, m, 0, "bash", "trap - EXIT; exit 7", true)
		info, err := m.AwaitExit(actx, 0, false)
		if err != nil || !info.Known || info.Code != 7 || info.Signal != "" {
			t.Errorf("shell exit 7: got %+v, %v; want known status 7", info, err)
		}
		mustWait(t, m, 10*time.Second) // observe (and close) tty 0 before typing elsewhere

		mustType(t, m, 1, "bash", "sleep 300", true)
		mustWait(t, m, 300*time.Millisecond)
		sh := func(script string) string {
			t.Helper()
			res, err := b.SB.Exec(ctx, conch.ExecRequest{Argv: []string{"sh", "-c", script}, Timeout: 10 * time.Second})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("%s: %v %+v", script, err, res)
			}
			return strings.TrimSpace(string(res.Output))
		}
		pid := sh("tmux -S " + m.Options().Socket + " display-message -p -t tty_1 '#{pane_pid}'")
		sh("kill -9 " + pid)
		info, err = m.AwaitExit(actx, 1, false)
		if err != nil || !info.Known || (info.Signal != "9" && info.Signal != "KILL") {
			t.Errorf("shell killed: got %+v, %v; want known, signal 9", info, err)
		}
	})
}
