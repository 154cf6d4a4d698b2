package coder_test

import (
	"context"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"conch"
	"conch/terminal"
	"conch/terminal/coder"
)

// fakeSession is a coder.Session over a scripted CLI: a started CLI shows
// its input box; Enter takes the typed task, shows a spinner for three
// seconds while printing a line a second, then fires the turn-end hook.
type fakeSession struct {
	mu      sync.Mutex
	seq     uint64
	turnSeq uint64
	changed chan struct{}
	lines   []string
	input   string
	seen    int
}

var _ coder.Session = (*fakeSession)(nil)

func newFakeSession() *fakeSession {
	return &fakeSession{changed: make(chan struct{}), lines: []string{"$"}}
}

func (f *fakeSession) Workspace() string            { return "/workspace" }
func (f *fakeSession) RunDir() string               { return "/tmp/conch" }
func (f *fakeSession) Hook(name string) string      { return "hook " + name }
func (f *fakeSession) ReadyHook(name string) string { return "ready " + name }

// bumpLocked records a change and wakes the watchers.
func (f *fakeSession) bumpLocked() {
	f.seq++
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeSession) Run(_ context.Context, line string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	before := f.seq
	f.lines = append(f.lines, "$ "+line, "│ > ")
	f.bumpLocked()
	return before, nil
}

func (f *fakeSession) Type(_ context.Context, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.input = text
	f.lines[len(f.lines)-1] = "│ > " + text
	f.bumpLocked()
	return nil
}

func (f *fakeSession) Paste(ctx context.Context, text string) error { return f.Type(ctx, text) }

func (f *fakeSession) Keys(_ context.Context, keys ...string) error {
	if !slices.Equal(keys, []string{"Enter"}) {
		return nil
	}
	f.mu.Lock()
	task := f.input
	f.input = ""
	f.lines = append(f.lines[:len(f.lines)-1], "> "+task, "⠋ working (esc to interrupt)")
	f.bumpLocked()
	f.mu.Unlock()
	go f.work(task)
	return nil
}

// work is the CLI's turn: a spinner that changes every 100 ms (the same
// news each time) and a new line every second.
func (f *fakeSession) work(task string) {
	for i := 1; i <= 30; i++ {
		time.Sleep(100 * time.Millisecond)
		f.mu.Lock()
		spin := len(f.lines) - 1
		if i%10 == 0 {
			f.lines = append(f.lines[:spin], "step "+string(rune('0'+i/10)), f.lines[spin])
			spin++
		}
		f.lines[spin] = "⠋ working (esc to interrupt) " + time.Duration(i*100*int(time.Millisecond)).String()
		f.bumpLocked()
		f.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lines = append(f.lines[:len(f.lines)-1], "● Done: "+task, "│ > ")
	f.bumpLocked()
	f.turnSeq = f.seq
}

func (f *fakeSession) Screen(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.lines), nil
}

func (f *fakeSession) Observe(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fresh := slices.Clone(f.lines[min(f.seen, len(f.lines)):])
	f.seen = len(f.lines)
	return fresh, nil
}

func (f *fakeSession) Command(context.Context) (string, error) { return "fakecli", nil }

func (f *fakeSession) Snapshot() (terminal.Snapshot, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return terminal.Snapshot{Seq: f.seq, TurnSeq: f.turnSeq, LastOutput: time.Now()}, f.changed
}

// fileSandbox is a sandbox that only takes files.
type fileSandbox struct{ conch.Sandbox }

func (fileSandbox) ID() string { return "fake" }
func (fileSandbox) WriteFile(context.Context, string, []byte, fs.FileMode) error {
	return nil
}
func (fileSandbox) Exec(context.Context, conch.ExecRequest) (conch.ExecResult, error) {
	return conch.ExecResult{Output: []byte("0\n")}, nil
}

// TestProgressEveryNewScreen: progress goes out whenever the screen shows
// something new, once per news (the spinner's ticks are not news), without
// a throttle of the driver's own; the turn ends with the CLI's hook.
func TestProgressEveryNewScreen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFakeSession()
		open := func(context.Context, bool) (coder.Session, error) { return s, nil }
		p := coder.Profile{Name: "fake", Command: "fakecli", Busy: []string{"esc to interrupt"}, Ready: []string{"│ > "}, EnterDelay: time.Millisecond}
		c := coder.New(conch.ConversationKey{Channel: conch.ChannelCLI, ID: "unit"}, fileSandbox{}, open, p, coder.Options{TurnTimeout: time.Minute})
		var progress []string
		res, err := c.Task(t.Context(), "build it", func(s string) { progress = append(progress, s) })
		if err != nil {
			t.Fatalf("Task: %v", err)
		}
		if res.State != coder.TurnIdle || !res.Hook {
			t.Fatalf("Task: got state %s hook=%v, want idle ended by the hook\n%s", res.State, res.Hook, res)
		}
		if !strings.Contains(res.Text, "● Done: build it") {
			t.Errorf("Task: got text %q, want the agent's answer", res.Text)
		}
		want := []string{"step 1", "step 2", "step 3", "● Done: build it"}
		var got []string
		for _, r := range progress {
			got = append(got, strings.Split(r, "\n")...)
		}
		if !slices.Equal(got, want) {
			t.Errorf("progress: got %q, want each new line reported once: %q", progress, want)
		}
	})
}
