package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"conch"
)

// holdWriter takes the writer connection so that every change queues; the
// returned func lets them go once n are queued.
func holdWriter(t *testing.T, d *DB) func(n int) {
	t.Helper()
	conn, err := d.w.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			d.writes.mu.Lock()
			queued := d.writes.requests
			d.writes.mu.Unlock()
			if queued >= n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d changes queued, want %d", queued, n)
			}
			time.Sleep(time.Millisecond) // the queue has no signal to wait on
		}
		conn.Close()
	}
}

// Changes of many conversations, durable and not, made at once share a
// group; each caller gets its own result, and the group syncs once.
func TestGroupCommitAcrossConversations(t *testing.T) {
	ctx := t.Context()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const convs = 40
	turns := make([]conch.Turn, convs)
	for i := range convs {
		key := conch.ConversationKey{Channel: "web", ID: fmt.Sprint(i)}
		if turns[i], _, err = d.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "first"}); err != nil {
			t.Fatal(err)
		}
	}
	beforeReq, beforeGroups, beforeSynced := d.writes.requests, d.writes.groups, d.writes.synced
	release := holdWriter(t, d)
	var wg sync.WaitGroup
	errs := make([]error, 3*convs)
	for i := range convs {
		key := turns[i].Key
		wg.Go(func() {
			_, errs[3*i] = d.StartTurn(ctx, turns[i].ID)
		})
		wg.Go(func() {
			errs[3*i+1] = d.AppendEvent(ctx, conch.Event{Key: key, Seq: 1, Turn: turns[i].ID, Data: conch.TurnState{Status: conch.TurnRunning}})
		})
		wg.Go(func() {
			_, _, errs[3*i+2] = d.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "second"})
		})
	}
	release(beforeReq + 3*convs)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
	}
	groups, synced := d.writes.groups-beforeGroups, d.writes.synced-beforeSynced
	if groups > 2 || synced > 2 {
		t.Errorf("%d changes took %d groups (%d synced), want at most 2", 3*convs, groups, synced)
	}
	un, err := d.UnfinishedTurns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, tr := range un {
		if tr.Status == conch.TurnRunning {
			running++
		}
	}
	if len(un) != 2*convs || running != convs {
		t.Errorf("got %d unfinished turns, %d running; want %d and %d", len(un), running, 2*convs, convs)
	}
}

// A group syncs only when it holds a change that must survive a power
// loss (AddInbound); other groups commit without waiting for the disk.
func TestGroupSyncsOnlyForDurableChanges(t *testing.T) {
	ctx := t.Context()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key := conch.ConversationKey{Channel: "web", ID: "1"}
	tr, _, err := d.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if d.writes.synced != 1 {
		t.Fatalf("AddInbound: %d groups synced, want 1", d.writes.synced)
	}
	if _, err := d.StartTurn(ctx, tr.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleAssistant, Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	if err := d.FinishTurn(ctx, tr.ID, conch.TurnDone, ""); err != nil {
		t.Fatal(err)
	}
	if d.writes.synced != 1 || d.writes.groups != 4 {
		t.Errorf("%d groups, %d synced; want 4 and 1", d.writes.groups, d.writes.synced)
	}
	// The writer is back to NORMAL after a synced group.
	var mode int
	conn, err := d.w.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&mode); err != nil || mode != 1 {
		t.Errorf("writer synchronous = %d (%v), want 1 (NORMAL)", mode, err)
	}
}

// An error that ends the group's transaction is every member's error, and
// none of the group is stored; the next group works.
func TestGroupFailureReachesEveryMember(t *testing.T) {
	ctx := t.Context()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key := conch.ConversationKey{Channel: "web", ID: "1"}
	a, b := req(d, ctx, key, "a"), req(d, ctx, key, "b")
	// A member whose statement ends the transaction under the others, as
	// a full disk or an I/O error does.
	breaker := &writeReq{ctx: ctx, wake: make(chan bool, 1), fn: func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `ROLLBACK`)
		if err == nil {
			err = errors.New("the transaction ended")
		}
		return err
	}}
	runGroup(d, a.writeReq, breaker, b.writeReq)
	for name, r := range map[string]*writeReq{"a": a.writeReq, "breaker": breaker, "b": b.writeReq} {
		if r.err == nil {
			t.Errorf("member %s: no error, want the group's", name)
		}
	}
	un, err := d.UnfinishedTurns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(un) != 0 {
		t.Errorf("stored %d turns of a failed group, want none", len(un))
	}
	if _, _, err := d.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "after"}); err != nil {
		t.Fatalf("the next change: %v", err)
	}
}

// Killed (SIGKILL) while groups of many conversations are being written,
// the store keeps every message whose AddInbound returned, and every other
// change that returned before it (a group commits whole, in order).
func TestGroupsSurviveKill(t *testing.T) {
	if path := os.Getenv("CONCH_SQLITE_GROUP_KILL_DB"); path != "" {
		groupKillChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "conch.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestGroupsSurviveKill$")
	cmd.Env = append(os.Environ(), "CONCH_SQLITE_GROUP_KILL_DB="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child prints "ack <turn> <text>" after each AddInbound returned
	// and "done <turn>" after each FinishTurn returned.
	acked, done := map[int64]string{}, map[int64]bool{}
	kill := 400
	if testing.Short() {
		kill = 100
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		id, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "ack":
			acked[id] = f[2]
		case "done":
			done[id] = true
		}
		if len(acked) == kill {
			cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: got %v, want death by SIGKILL", err)
	}
	if len(acked) < kill {
		t.Fatalf("the child acknowledged %d messages before it died, want %d", len(acked), kill)
	}
	d, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var check string
	if err := d.r.QueryRowContext(t.Context(), `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity check: %q, %v", check, err)
	}
	for id, text := range acked {
		tr, err := d.Turn(t.Context(), conch.TurnID(id))
		if err != nil {
			t.Fatalf("acknowledged turn %d lost: %v", id, err)
		}
		if tr.Inbound.Text != text {
			t.Fatalf("turn %d: text %q, want %q", id, tr.Inbound.Text, text)
		}
		if done[id] && tr.Status != conch.TurnDone {
			t.Fatalf("turn %d: finished before the kill, now %s", id, tr.Status)
		}
		// The answer's event was queued (not waited for) before the turn
		// was finished: a finished turn has it.
		if tr.Status == conch.TurnDone {
			evs, err := d.EventsSince(t.Context(), tr.Key, 0, 10000)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(evs, func(ev conch.Event) bool { return ev.Turn == tr.ID }) {
				t.Fatalf("turn %d is done but its answer's event, queued before, is not kept", id)
			}
		}
	}
}

// groupKillChild writes turns in 50 conversations at once until killed.
func groupKillChild(path string) {
	d, err := Open(context.Background(), path)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Printf(format+"\n", args...)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for c := range 50 {
		wg.Go(func() {
			key := conch.ConversationKey{Channel: "web", ID: fmt.Sprint("c", c)}
			for n := 0; ; n++ {
				text := fmt.Sprintf("c%d-m%d", c, n)
				tr, _, err := d.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: text})
				if err != nil {
					say("error %v", err)
					os.Exit(2)
				}
				say("ack %d %s", tr.ID, text)
				if _, err := d.StartTurn(ctx, tr.ID); err != nil {
					os.Exit(2)
				}
				if err := d.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleAssistant, Text: "re: " + text}); err != nil {
					os.Exit(2)
				}
				// As the gateway's hub: the answer's event is queued, not
				// waited for, before the turn is finished.
				ev := conch.Event{Key: key, Seq: int64(n + 1), Turn: tr.ID, Data: conch.MessageEvent{Role: conch.RoleAssistant, Text: "re: " + text}}
				if err := d.AppendEventAsync(ev, func(err error) {
					if err != nil {
						say("error %v", err)
						os.Exit(2)
					}
				}); err != nil {
					os.Exit(2)
				}
				if err := d.FinishTurn(ctx, tr.ID, conch.TurnDone, ""); err != nil {
					os.Exit(2)
				}
				say("done %d", tr.ID)
			}
		})
	}
	wg.Wait()
}

// In a group, a one-statement change that is refused (a constraint, a
// missing turn) fails alone: the statement is undone by SQLite, the
// transaction goes on, and the others commit.
func TestGroupSingleStatementFailsAlone(t *testing.T) {
	ctx := t.Context()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key := conch.ConversationKey{Channel: "web", ID: "1"}
	tr, _, err := d.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.AppendEvent(ctx, conch.Event{Key: key, Seq: 1, Data: conch.TurnState{Status: conch.TurnPending}}); err != nil {
		t.Fatal(err)
	}
	beforeReq, beforeGroups := d.writes.requests, d.writes.groups
	release := holdWriter(t, d)
	var wg sync.WaitGroup
	var dupEvent, missingTurn, event2, step, answer error
	wg.Go(func() {
		dupEvent = d.AppendEvent(ctx, conch.Event{Key: key, Seq: 1, Data: conch.TurnState{Status: conch.TurnRunning}})
	})
	wg.Go(func() {
		missingTurn = d.AppendMessage(ctx, tr.ID+100, conch.Message{Role: conch.RoleAssistant, Text: "lost"})
	})
	wg.Go(func() {
		event2 = d.AppendEvent(ctx, conch.Event{Key: key, Seq: 2, Data: conch.TurnState{Status: conch.TurnRunning}})
	})
	wg.Go(func() { step = d.RecordStep(ctx, conch.Step{Turn: tr.ID, Kind: "model_call"}) })
	wg.Go(func() { answer = d.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleAssistant, Text: "hello"}) })
	release(beforeReq + 5)
	wg.Wait()
	if dupEvent == nil || conch.KindOf(missingTurn) != conch.KindNotFound {
		t.Errorf("refused changes: duplicate event %v, missing turn %v; want both refused", dupEvent, missingTurn)
	}
	if event2 != nil || step != nil || answer != nil {
		t.Errorf("changes beside them: event %v, step %v, answer %v; want all stored", event2, step, answer)
	}
	if g := d.writes.groups - beforeGroups; g > 2 {
		t.Errorf("5 changes took %d groups, want at most 2", g)
	}
	evs, err := d.EventsSince(ctx, key, 0, 10)
	if err != nil || len(evs) != 2 || evs[0].Data.(conch.TurnState).Status != conch.TurnPending {
		t.Errorf("events: %+v, %v; want the first pending and seq 2", evs, err)
	}
	steps, err := d.Steps(ctx, tr.ID)
	if err != nil || len(steps) != 1 {
		t.Errorf("steps: %+v, %v; want one", steps, err)
	}
}

// TestGroupPanicReleasesWriters: a change that panics (a bug) is every
// member's error, nothing of its group is stored, and the queue goes on:
// the next write is made.
func TestGroupPanicReleasesWriters(t *testing.T) {
	ctx := t.Context()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key := conch.ConversationKey{Channel: "web", ID: "1"}
	a := req(d, ctx, key, "a")
	bomb := &writeReq{ctx: ctx, wake: make(chan bool, 1), fn: func(context.Context, *sql.Tx) error { panic("a bug") }}
	runGroup(d, a.writeReq, bomb)
	for name, r := range map[string]*writeReq{"a": a.writeReq, "bomb": bomb} {
		if r.err == nil || !strings.Contains(r.err.Error(), "a bug") {
			t.Errorf("member %s: got %v, want the panic as its error", name, r.err)
		}
	}
	if un, err := d.UnfinishedTurns(ctx); err != nil || len(un) != 0 {
		t.Fatalf("after the panic: %d turns stored, %v; want none", len(un), err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := d.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "after", ExternalID: "after"})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the write after the panic: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the write after the panic never ran: the queue is wedged")
	}
}

// AppendEventAsync returns before its event is written; the event is
// committed no later than any change queued after it, its outcome reaches
// done (a refused one with its error, the others unharmed), and Close
// writes what is still queued.
func TestAppendEventAsync(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "c.db")
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	key := conch.ConversationKey{Channel: "web", ID: "a"}
	tr, _, err := d.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	ev := func(seq int64) conch.Event {
		return conch.Event{Key: key, Seq: seq, Turn: tr.ID, Data: conch.NoticeEvent{Text: fmt.Sprint(seq)}}
	}
	if err := d.AppendEventAsync(conch.Event{Key: key, Seq: 0, Data: conch.NoticeEvent{}}, func(error) { t.Error("done called for an event not queued") }); err == nil {
		t.Fatal("an event without Seq was queued")
	}

	release := holdWriter(t, d)
	before := d.writes.requests
	results := make(chan error, 3)
	for _, seq := range []int64{1, 2, 1} {
		if err := d.AppendEventAsync(ev(seq), func(err error) { results <- err }); err != nil {
			t.Fatal(err)
		}
	}
	finished := make(chan error, 1)
	go func() { finished <- d.FinishTurn(ctx, tr.ID, conch.TurnDone, "") }()
	release(before + 4)
	if err := <-finished; err != nil {
		t.Fatal(err)
	}
	// By the time a change queued after them returned, the events are kept.
	evs, err := d.EventsSince(ctx, key, 0, 10)
	if err != nil || len(evs) != 2 {
		t.Fatalf("after a later change returned: %d events (%v), want 2", len(evs), err)
	}
	var refused int
	for range 3 {
		if err := <-results; err != nil {
			refused++
			if !strings.Contains(err.Error(), "event 1 of web:a") {
				t.Errorf("refused event's error: %v", err)
			}
		}
	}
	if refused != 1 {
		t.Fatalf("%d events refused, want the duplicate only", refused)
	}

	for seq := int64(3); seq < 203; seq++ {
		if err := d.AppendEventAsync(ev(seq), func(error) {}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if last, err := d.LastEventSeq(ctx, key); err != nil || last != 202 {
		t.Fatalf("after Close and Open the last event is %d (%v), want 202", last, err)
	}
}

// A turn that does not decode fails StartTurn alone: another conversation's
// message and an event written in the same group are stored.
func TestGroupStartTurnFailsAlone(t *testing.T) {
	ctx := t.Context()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a := conch.ConversationKey{Channel: "web", ID: "a"}
	b := conch.ConversationKey{Channel: "web", ID: "b"}
	ta, _, err := d.AddInbound(ctx, conch.Inbound{Key: a, Sender: "u", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.w.ExecContext(ctx, `UPDATE turns SET attachments = '{not json' WHERE id = ?`, ta.ID); err != nil {
		t.Fatal(err)
	}
	queued := func(n int) {
		for {
			d.writes.mu.Lock()
			got := d.writes.requests
			d.writes.mu.Unlock()
			if got >= n {
				return
			}
			time.Sleep(time.Millisecond) // the queue has no signal to wait on
		}
	}
	release := holdWriter(t, d)
	before := d.writes.requests
	go d.SetCursor(ctx, "lead", "x") // writes the first group, held
	queued(before + 1)
	started := make(chan error, 1)
	go func() { _, err := d.StartTurn(ctx, ta.ID); started <- err }()
	queued(before + 2)
	added := make(chan error, 1)
	go func() {
		_, _, err := d.AddInbound(ctx, conch.Inbound{Key: b, Sender: "u", Text: "other"})
		added <- err
	}()
	queued(before + 3)
	evErr := make(chan error, 1)
	if err := d.AppendEventAsync(conch.Event{Key: b, Seq: 1, Data: conch.NoticeEvent{Text: "x"}}, func(err error) { evErr <- err }); err != nil {
		t.Fatal(err)
	}
	release(before + 4)
	if err := <-started; err == nil {
		t.Error("StartTurn of a turn that does not decode succeeded")
	}
	if err := <-added; err != nil {
		t.Errorf("another conversation's message in the same group: %v", err)
	}
	if err := <-evErr; err != nil {
		t.Errorf("an event in the same group: %v", err)
	}
}
