package tool_test

import (
	"context"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/sandbox/sandboxd/sandboxdtest"
	"conch/schedule"
	"conch/sqlite/sqlitetest"
	"conch/terminal"
	"conch/terminal/terminaltest"
	"conch/tool"
)

// submissions records what the scheduler submits.
type submissions struct {
	mu  sync.Mutex
	ins []conch.Inbound
	ch  chan struct{}
}

func (s *submissions) Submit(_ context.Context, in conch.Inbound) (conch.Turn, error) {
	s.mu.Lock()
	s.ins = append(s.ins, in)
	s.mu.Unlock()
	s.ch <- struct{}{}
	return conch.Turn{Key: in.Key}, nil
}

func (s *submissions) next(t *testing.T) conch.Inbound {
	t.Helper()
	select {
	case <-s.ch:
	case <-time.After(45 * time.Second):
		t.Fatal("no watch fired within 45s")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ins[len(s.ins)-1]
}

// Watches on a real sandbox: a terminal command's exit, a line of its
// output, a workspace file. Each wakes the conversation once.
func TestWatchFiresOnTerminalExitOutputAndFile(t *testing.T) {
	terminaltest.Each(t, func(t *testing.T, b *terminaltest.Box) {
		prov := sandboxdtest.Provider(b.SB)
		pool := terminal.NewPool(prov, terminal.NewMemRegistry(), b.Opts)
		t.Cleanup(pool.Close)
		sub := &submissions{ch: make(chan struct{}, 4)}
		sched, err := schedule.New(schedule.Options{Store: sqlitetest.MustOpenMemory(t),
			Waiter: &schedule.SandboxWaiter{Terminals: pool, Sandboxes: prov}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = sched.Run(ctx, sub) }()
		t.Cleanup(func() { cancel(); <-done })

		key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "w"}
		env := conch.ToolEnv{Conversation: key, Sandboxes: prov}
		w := &tool.Watch{S: sched, P: pool}
		m, err := pool.Manager(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Open(ctx, ""); err != nil {
			t.Fatal(err)
		}

		// Exit: nothing runs yet, so there is nothing to wait for.
		if out := runTool(t, w, env, `{"on":"exit","terminal":0,"message":"report"}`); !out.IsError || !strings.Contains(out.Content, "not running a command") {
			t.Fatalf("watch on an idle terminal: %+v", out)
		}
		if err := m.Type(ctx, 0, "bash", "sleep 2; false", true); err != nil {
			t.Fatal(err)
		}
		if out := runTool(t, w, env, `{"on":"exit","terminal":0,"message":"report the build"}`); out.IsError {
			t.Fatalf("watch exit: %s", out.Content)
		}
		in := sub.next(t)
		if in.Origin.Kind != conch.OriginWatch || !strings.Contains(in.Text, "exited with status 1") || !strings.Contains(in.Text, "report the build") {
			t.Fatalf("exit watch submitted %+v", in)
		}

		// Match: a line printed after the watch was set.
		if _, err := m.Wait(ctx, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if out := runTool(t, w, env, `{"on":"match","terminal":0,"pattern":"build (ok|broken) \\d+","message":"tell them"}`); out.IsError {
			t.Fatalf("watch match: %s", out.Content)
		}
		if err := m.Type(ctx, 0, "bash", "sleep 1; echo build broken $((40+2))", true); err != nil {
			t.Fatal(err)
		}
		if in := sub.next(t); !strings.Contains(in.Text, "printed: build broken 42") {
			t.Fatalf("match watch submitted %q", in.Text)
		}

		// File: created after the watch was set. (The host box has no
		// /workspace: its programs see host paths.)
		if b.Host {
			return
		}
		if out := runTool(t, w, env, `{"on":"file","path":"out/result.txt","message":"read it"}`); out.IsError {
			t.Fatalf("watch file: %s", out.Content)
		}
		if err := b.SB.WriteFile(ctx, path.Join(b.WS, "out", "result.txt"), []byte("ok"), 0o644); err != nil {
			t.Fatal(err)
		}
		if in := sub.next(t); !strings.Contains(in.Text, "result.txt was created") {
			t.Fatalf("file watch submitted %q", in.Text)
		}
		// A fired watch is deleted just after its message is submitted.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			es, _ := sched.List(ctx, key)
			if len(es) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("fired watches left: %+v", es)
			}
		}
	})
}

// A watch set before conch stopped is waited for again after the restart:
// the command that ends then wakes the conversation once.
func TestWatchSurvivesRestart(t *testing.T) {
	terminaltest.Each(t, func(t *testing.T, b *terminaltest.Box) {
		prov := sandboxdtest.Provider(b.SB)
		reg := terminal.NewMemRegistry()
		db := sqlitetest.MustOpenMemory(t)
		key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "r"}
		sub := &submissions{ch: make(chan struct{}, 4)}
		up := func() (*schedule.Scheduler, *terminal.Pool, func()) {
			pool := terminal.NewPool(prov, reg, b.Opts)
			sched, err := schedule.New(schedule.Options{Store: db,
				Waiter: &schedule.SandboxWaiter{Terminals: pool, Sandboxes: prov}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = sched.Run(ctx, sub) }()
			return sched, pool, func() { cancel(); <-done; pool.Close() }
		}
		sched, pool, down := up()
		m, err := pool.Manager(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Open(t.Context(), ""); err != nil {
			t.Fatal(err)
		}
		if err := m.Type(t.Context(), 0, "bash", "sleep 4; exit_with() { return $1; }; exit_with 3", true); err != nil {
			t.Fatal(err)
		}
		env := conch.ToolEnv{Conversation: key, Sandboxes: prov}
		if out := runTool(t, &tool.Watch{S: sched, P: pool}, env, `{"on":"exit","terminal":0,"message":"report"}`); out.IsError {
			t.Fatalf("watch: %s", out.Content)
		}
		time.Sleep(500 * time.Millisecond)
		down() // conch stops; tmux and the command go on

		_, _, down = up()
		defer down()
		in := sub.next(t)
		if !strings.Contains(in.Text, "exited with status 3") {
			t.Fatalf("after the restart the watch said %q", in.Text)
		}
		select {
		case <-sub.ch:
			t.Fatal("the watch fired twice")
		case <-time.After(time.Second):
		}
	})
}
