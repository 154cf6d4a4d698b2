package sqlite

import (
	"context"
	"database/sql"
	"errors"
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
