package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"conch"
)

// inboundMember is a group member storing one inbound, as AddInbound
// queues it.
type inboundMember struct {
	*writeReq
	in *inboundReq
}

func req(d *DB, ctx context.Context, key conch.ConversationKey, ext string) inboundMember {
	r := &inboundReq{in: conch.Inbound{Key: key, Sender: "u", Text: ext, ExternalID: ext}, now: time.Now()}
	w := &writeReq{ctx: ctx, durable: true, wake: make(chan bool, 1),
		fn: func(ctx context.Context, tx *sql.Tx) error { return d.addInboundTx(ctx, tx, r) }}
	return inboundMember{w, r}
}

// runGroup writes members as one group, as the leader of a queue holding
// exactly them would.
func runGroup(d *DB, members ...*writeReq) {
	d.writes.mu.Lock()
	d.writes.pending = append(d.writes.pending, members...)
	d.writes.leading = true
	d.writes.mu.Unlock()
	d.writeGroup()
}

// One bad request in a group fails alone (its savepoint is rolled back);
// one whose caller gave up is skipped; the others are stored, in one
// transaction.
func TestInboundBatchIsolatesFailures(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, t.TempDir()+"/c.db")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	key := conch.ConversationKey{Channel: "web", ID: "1"}
	reqs := []inboundMember{
		req(d, ctx, key, "a"),
		req(d, ctx, conch.ConversationKey{ID: "no channel"}, "b"), // bypasses validation: the CHECK refuses it
		req(d, canceled, key, "c"),
		req(d, ctx, key, "d"),
		req(d, ctx, key, "a"), // a duplicate of the first, in the same batch
	}
	var ws []*writeReq
	for _, r := range reqs {
		ws = append(ws, r.writeReq)
	}
	runGroup(d, ws...)
	if d.writes.groups != 1 || d.writes.synced != 1 {
		t.Errorf("%d groups, %d synced, want one synced group", d.writes.groups, d.writes.synced)
	}
	for i, wantErr := range []bool{false, true, true, false, false} {
		if got := reqs[i].err != nil; got != wantErr {
			t.Errorf("request %d: got error %v, want error: %v", i, reqs[i].err, wantErr)
		}
	}
	if !errors.Is(reqs[2].err, context.Canceled) {
		t.Errorf("canceled request: got %v, want context.Canceled", reqs[2].err)
	}
	if !reqs[4].in.dup || reqs[4].in.t.ID != reqs[0].in.t.ID {
		t.Errorf("duplicate in the batch: got dup=%v turn %d, want dup of turn %d", reqs[4].in.dup, reqs[4].in.t.ID, reqs[0].in.t.ID)
	}
	un, err := d.UnfinishedTurns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(un) != 2 || un[0].Inbound.Text != "a" || un[1].Inbound.Text != "d" {
		t.Errorf("stored turns: got %+v, want a and d", un)
	}
}

// Concurrent callers are committed in shared batches, and every caller gets
// its own result.
func TestInboundGroupCommit(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, t.TempDir()+"/c.db")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const callers = 64
	// Hold the writer so that every caller queues behind the first batch.
	conn, err := d.w.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	turns := make([]conch.Turn, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			key := conch.ConversationKey{Channel: "web", ID: string(rune('a' + i%8))}
			turns[i], _, errs[i] = d.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: string(rune(i)), ExternalID: string(rune(i + 1000))})
		})
	}
	// Wait until every caller is queued, then free the writer.
	for {
		d.writes.mu.Lock()
		n := d.writes.requests
		d.writes.mu.Unlock()
		if n == callers {
			break
		}
		time.Sleep(time.Millisecond) // the queue has no signal to wait on
	}
	var before int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM turns`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	wg.Wait()
	seen := map[conch.TurnID]bool{}
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if turns[i].Inbound.Text != string(rune(i)) || seen[turns[i].ID] {
			t.Errorf("caller %d: got turn %d %q, want its own new turn", i, turns[i].ID, turns[i].Inbound.Text)
		}
		seen[turns[i].ID] = true
	}
	if before != 0 {
		t.Errorf("turns stored while the writer was held: %d, want 0", before)
	}
	// The first leader's batch, then everybody who queued behind it.
	if d.writes.groups > 2 {
		t.Errorf("%d callers took %d groups, want at most 2", callers, d.writes.groups)
	}
}

// StageInbound with start stores the turn started in the message's own
// commit: running, its first attempt, its message in the model's view at
// once (also through a view kept from before); a redelivery returns the
// turn as it stands.
func TestStageInboundStarted(t *testing.T) {
	ctx := t.Context()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key := conch.ConversationKey{Channel: "web", ID: "s"}
	first, _, err := d.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.StartTurn(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.FinishTurn(ctx, first.ID, conch.TurnDone, ""); err != nil {
		t.Fatal(err)
	}
	if h, err := d.ModelHistory(ctx, key, 0); err != nil || len(h.Messages) != 1 { // keeps the view
		t.Fatalf("view before: %+v, %v", h.Messages, err)
	}
	tr, dup, durable, err := d.StageInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "two", ExternalID: "x2"}, true)
	if err != nil || dup || durable(ctx) != nil {
		t.Fatalf("stage started: %v, dup %v", err, dup)
	}
	if tr.Status != conch.TurnRunning || tr.Attempts != 1 {
		t.Fatalf("returned %+v, want running at attempt 1", tr)
	}
	stored, err := d.Turn(ctx, tr.ID)
	if err != nil || stored.Status != conch.TurnRunning || stored.Attempts != 1 {
		t.Fatalf("stored %+v (%v), want running at attempt 1", stored, err)
	}
	h, err := d.ModelHistory(ctx, key, tr.ID)
	if err != nil || len(h.Messages) != 2 || h.Messages[1].Text != "two" {
		t.Fatalf("view through the started turn: %+v (%v)", h.Messages, err)
	}
	again, dup, durable, err := d.StageInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "two", ExternalID: "x2"}, true)
	if err != nil || !dup || durable(ctx) != nil || again.ID != tr.ID || again.Attempts != 1 {
		t.Fatalf("redelivery: %+v dup %v (%v)", again, dup, err)
	}
}
