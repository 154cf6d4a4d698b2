package terminal_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/terminal"
	"conch/terminal/terminaltest"
)

func TestShellDoneWithExitStatus(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
		t.Cleanup(m.Detach)
		op, err := m.Open(ctx, "")
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Logf("open: %+v", op)
		if op.TTY != 0 {
			t.Fatalf("Open: got tty %d, want 0", op.TTY)
		}
		mustType(t, m, 0, "bash", "echo hel''lo; (exit 3)", true)
		start := time.Now()
		res := mustWait(t, m, 10*time.Second)
		t.Logf("wait %v:\n%s", time.Since(start), res)
		o := obsOf(t, res, 0)
		if o.State != terminal.StateDone || o.Exit != 3 {
			t.Fatalf("state: got %s exit %d, want done exit 3\n%s", o.State, o.Exit, res)
		}
		contains(t, "output", o.Text, "\nhello")
		if o.Cwd != b.WS {
			t.Errorf("cwd: got %q, want %q", o.Cwd, b.WS)
		}
	})
}

func TestObserveBeforeAct(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
		t.Cleanup(m.Detach)
		for range 2 {
			if _, err := m.Open(ctx, ""); err != nil {
				t.Fatalf("Open: %v", err)
			}
		}
		mustType(t, m, 0, "bash", "echo one", true)
		// tty 0 now has output nobody has seen: typing anywhere is refused.
		err := m.Type(ctx, 1, "bash", "echo two", true)
		var te *terminal.TypeError
		if !errors.As(err, &te) || !errors.Is(err, terminal.ErrUnseenOutput) {
			t.Fatalf("Type with unseen output: got %v, want a TypeError wrapping ErrUnseenOutput", err)
		}
		contains(t, "refusal", te.Msg, "terminal 0")
		res := mustWait(t, m, 10*time.Second)
		contains(t, "tty 0", obsOf(t, res, 0).Text, "one")
		if o := obsOf(t, res, 1); o.State != terminal.StateNoChange {
			t.Errorf("tty 1: got %s, want no_change (echo two was refused)", o.State)
		}
		mustType(t, m, 1, "bash", "echo two", true)
		res = mustWait(t, m, 10*time.Second)
		contains(t, "tty 1", obsOf(t, res, 1).Text, "two")
	})
}

func TestExpectAndPrograms(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
		t.Cleanup(m.Detach)
		op, err := m.Open(ctx, "python3 -q")
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		contains(t, "first screen", op.First.Text, ">>>")
		err = m.Type(ctx, op.TTY, "bash", "print(6*7)", true)
		var te *terminal.TypeError
		if !errors.As(err, &te) {
			t.Fatalf("Type with wrong expect: got %v, want a TypeError", err)
		}
		contains(t, "refusal", te.Msg, `running "python3"`)
		mustType(t, m, op.TTY, "python3", "print(6*7)", true)
		res := mustWait(t, m, 10*time.Second)
		o := obsOf(t, res, op.TTY)
		if o.State != terminal.StateQuiet {
			t.Errorf("python3: got state %s, want quiet (no markers outside shells)", o.State)
		}
		contains(t, "python3 output", o.Text, "\n42\n")
		mustType(t, m, op.TTY, "python3", "raise SystemExit(4)", true)
		res = mustWait(t, m, 10*time.Second)
		o = obsOf(t, res, op.TTY)
		if o.State != terminal.StateExited || o.Exit != 4 {
			t.Fatalf("after exit: got %s exit %d, want exited 4\n%s", o.State, o.Exit, res)
		}
		if got := m.List(); len(got) != 0 {
			t.Errorf("List after the program exited: got %v, want none (dead terminals close)", got)
		}
		res = mustWait(t, m, time.Second)
		if len(res.TTYs) != 0 {
			t.Errorf("second Wait: got %v, want nothing (a dead terminal is reported once)", res)
		}
	})
}

func TestControlKeysAndRunning(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
		t.Cleanup(m.Detach)
		if _, err := m.Open(ctx, ""); err != nil {
			t.Fatalf("Open: %v", err)
		}
		mustType(t, m, 0, "bash", "sleep 60", true)
		res := mustWait(t, m, 200*time.Millisecond)
		if o := obsOf(t, res, 0); !res.TimedOut || o.State != terminal.StateRunning {
			t.Fatalf("during sleep: got %s timedOut=%v, want running and timed out\n%s", o.State, res.TimedOut, res)
		}
		mustType(t, m, 0, "sleep", "C-c", false)
		res = mustWait(t, m, 10*time.Second)
		if o := obsOf(t, res, 0); o.State != terminal.StateDone || o.Exit != 130 {
			t.Fatalf("after C-c: got %s exit %d, want done exit 130\n%s", o.State, o.Exit, res)
		}
	})
}

func TestLongOutputElided(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
		t.Cleanup(m.Detach)
		if _, err := m.Open(ctx, ""); err != nil {
			t.Fatalf("Open: %v", err)
		}
		mustType(t, m, 0, "bash", "seq 1 500", true)
		o := obsOf(t, mustWait(t, m, 10*time.Second), 0)
		if o.New != 502 {
			t.Errorf("new lines: got %d, want 502 (command, 500 numbers, prompt)", o.New)
		}
		contains(t, "head", o.Text, "seq 1 500\n1\n2\n")
		contains(t, "elision", o.Text, "[… 482 lines not shown …]")
		contains(t, "tail", o.Text, "\n499\n500\n")
		// Nothing new: the next observation shows nothing.
		if o := obsOf(t, mustWait(t, m, 100*time.Millisecond), 0); o.State != terminal.StateNoChange || o.Text != "" {
			t.Errorf("second wait: got %s %q, want no_change and no text", o.State, o.Text)
		}
	})
}

func TestExitArchivesScrollback(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
		t.Cleanup(m.Detach)
		for range 2 {
			if _, err := m.Open(ctx, ""); err != nil {
				t.Fatalf("Open: %v", err)
			}
		}
		mustType(t, m, 0, "bash", "echo archived-line; exit 7", true)
		res := mustWait(t, m, 10*time.Second)
		o := obsOf(t, res, 0)
		if o.State != terminal.StateExited || o.Exit != 7 || o.Archive == "" {
			t.Fatalf("after exit 7: got %s exit %d archive %q, want exited 7 with an archive\n%s", o.State, o.Exit, o.Archive, res)
		}
		// The last screen ends with what the shell printed: no tmux
		// "Pane is dead" line below a block of blank rows.
		if strings.Contains(o.Text, "Pane is dead") || strings.Contains(o.Text, "\n\n\n\n") {
			t.Errorf("the exited terminal's last screen has tmux's dead-pane line or a blank block:\n%q", o.Text)
		}
		data, err := b.SB.ReadFile(ctx, o.Archive, 1<<20)
		if err != nil {
			t.Fatalf("read archive: %v", err)
		}
		contains(t, "archive", string(data), "archived-line")
		arch, err := m.Close(ctx, 1)
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
		contains(t, "archive path", arch, b.WS+"/.conch/terminals/tty_1-")
		if got := m.List(); len(got) != 0 {
			t.Errorf("List: got %v, want none", got)
		}
		if _, err := m.Close(ctx, 1); conch.KindOf(err) != conch.KindNotFound {
			t.Errorf("Close again: got %v, want not found", err)
		}
	})
}

func TestRecoverAfterRestart(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		reg := terminal.NewMemRegistry()
		m1 := terminal.NewManager(b.SB, reg, b.Opts)
		for range 2 {
			if _, err := m1.Open(ctx, ""); err != nil {
				t.Fatalf("Open: %v", err)
			}
		}
		mustType(t, m1, 0, "bash", "echo seen-before", true)
		mustWait(t, m1, 10*time.Second)
		// A terminal the registry knows but the sandbox lost (restarted).
		if err := reg.SaveTerminal(ctx, b.Opts.Scope, terminal.Record{TTY: 5, Session: "tty_5", Shell: true}); err != nil {
			t.Fatal(err)
		}
		mustType(t, m1, 0, "bash", "sleep 0.2; echo after-$((1+1))", true)
		m1.Detach() // conch stops before it observed the output

		m2 := terminal.NewManager(b.SB, reg, b.Opts)
		t.Cleanup(m2.Detach)
		rr, err := m2.Recover(ctx)
		if err != nil {
			t.Fatalf("Recover: %v", err)
		}
		if fmt.Sprint(rr.Found) != "[0 1]" || fmt.Sprint(rr.Lost) != "[5]" {
			t.Fatalf("Recover: got found %v lost %v, want found [0 1] lost [5]", rr.Found, rr.Lost)
		}
		if err := m2.Type(ctx, 1, "bash", "echo x", true); !errors.Is(err, terminal.ErrUnseenOutput) {
			t.Errorf("Type before observing recovered terminals: got %v, want ErrUnseenOutput", err)
		}
		res := mustWait(t, m2, 10*time.Second)
		if len(res.Notices) != 1 || !strings.Contains(res.Notices[0], "terminal 5 was lost") {
			t.Errorf("notices: got %q, want one telling terminal 5 was lost", res.Notices)
		}
		o := obsOf(t, res, 0)
		contains(t, "recovered tty 0", o.Text, "\nafter-2\n")
		if strings.Contains(o.Text, "seen-before") {
			t.Errorf("recovered tty 0 repeats what was seen before the restart:\n%s", o.Text)
		}
		if o := obsOf(t, res, 1); o.State != terminal.StateNoChange {
			t.Errorf("recovered tty 1: got %s %q, want no_change", o.State, o.Text)
		}
		// The recovered terminal works as before, markers included.
		mustType(t, m2, 0, "bash", "false", true)
		if o := obsOf(t, mustWait(t, m2, 10*time.Second), 0); o.State != terminal.StateDone || o.Exit != 1 {
			t.Errorf("after recovery: got %s exit %d, want done exit 1", o.State, o.Exit)
		}
		recs, _ := reg.LoadTerminals(ctx, b.Opts.Scope)
		if len(recs) != 2 {
			t.Errorf("registry after recovery: got %d records, want 2", len(recs))
		}
	})
}

func TestBusyNeighbourDoesNotHoldWait(t *testing.T) {
	b := terminaltest.Host(t)
	ctx := ctxT(t)
	m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
	t.Cleanup(m.Detach)
	for range 2 {
		if _, err := m.Open(ctx, ""); err != nil {
			t.Fatalf("Open: %v", err)
		}
	}
	// tty 1 prints forever, never settling.
	mustType(t, m, 1, "bash", "while :; do echo tick; sleep 0.1; done", true)
	mustWait(t, m, 300*time.Millisecond)
	mustType(t, m, 0, "bash", "echo answer", true)
	res := mustWait(t, m, 20*time.Second)
	if res.TimedOut {
		t.Fatalf("Wait timed out although tty 0 finished:\n%s", res)
	}
	if o := obsOf(t, res, 0); o.State != terminal.StateDone {
		t.Errorf("tty 0: got %s, want done", o.State)
	}
	if o := obsOf(t, res, 1); o.State != terminal.StateRunning {
		t.Errorf("tty 1: got %s, want running", o.State)
	}
}

func TestForgedMarkerIsIgnored(t *testing.T) {
	eachBox(t, func(t *testing.T, b *box) {
		ctx := ctxT(t)
		m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
		t.Cleanup(m.Detach)
		if _, err := m.Open(ctx, ""); err != nil {
			t.Fatalf("Open: %v", err)
		}
		// Output that contains a marker without the terminal's secret
		// (as a log being printed might) does not end the command.
		mustType(t, m, 0, "bash", `printf '\033]7770;conch;0000;done;0;/\007'; sleep 0.3; echo real-end; false`, true)
		o := obsOf(t, mustWait(t, m, 10*time.Second), 0)
		if o.State != terminal.StateDone || o.Exit != 1 {
			t.Fatalf("got %s exit %d, want done exit 1 (the real prompt)\n%s", o.State, o.Exit, o)
		}
		contains(t, "output", o.Text, "\nreal-end\n")
	})
}

func TestStreamBreakReattaches(t *testing.T) {
	b := terminaltest.Host(t)
	ctx := ctxT(t)
	m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
	t.Cleanup(m.Detach)
	if _, err := m.Open(ctx, ""); err != nil {
		t.Fatalf("Open: %v", err)
	}
	b.Break() // the control client's stream dies; tmux lives on
	res := mustWait(t, m, 10*time.Second)
	if o := obsOf(t, res, 0); o.State == terminal.StateGone || o.State == terminal.StateExited {
		t.Fatalf("after a broken stream: got %s, want the terminal kept", o.State)
	}
	mustType(t, m, 0, "bash", "echo still-here; false", true)
	o := obsOf(t, mustWait(t, m, 10*time.Second), 0)
	if o.State != terminal.StateDone || o.Exit != 1 {
		t.Fatalf("after reattaching: got %s exit %d, want done exit 1\n%s", o.State, o.Exit, o)
	}
	contains(t, "output", o.Text, "\nstill-here\n")
}
