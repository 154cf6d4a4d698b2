package sqlite

import (
	"conch/internal/testenv"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"conch"
)

// Queued's bookkeeping returns before it is written, is on disk once a
// change made after it returned, and a change the store refuses is logged
// with what it was; bad input is still refused at once.
func TestQueuedBookkeeping(t *testing.T) {
	ctx := t.Context()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var logged testenv.SyncBuffer
	q := d.Queued(slog.New(slog.NewTextHandler(&logged, nil)))
	key := conch.ConversationKey{Channel: "web", ID: "q"}
	tr, _, err := d.AddInbound(ctx, conch.Inbound{Key: key, Sender: "u", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.StartTurn(ctx, tr.ID); err != nil {
		t.Fatal(err)
	}

	release := holdWriter(t, d)
	before := d.writes.requests
	if err := q.RecordStep(ctx, conch.Step{Turn: tr.ID, Kind: conch.StepModelCall, Detail: []byte(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := q.RecordUsage(ctx, conch.ModelCall{Key: key, Turn: tr.ID, Model: "m", Usage: conch.Usage{InputTokens: 7}}); err != nil {
		t.Fatal(err)
	}
	if err := q.RecordContextUse(ctx, key, conch.ContextUse{InputTokens: 7, Window: 100}); err != nil {
		t.Fatal(err)
	}
	// Refused by the store only when written: a step of no turn, the
	// usage of no conversation.
	if err := q.RecordStep(ctx, conch.Step{Turn: tr.ID + 100, Kind: conch.StepModelCall, Detail: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	other := conch.ConversationKey{Channel: "web", ID: "nobody"}
	if err := q.RecordUsage(ctx, conch.ModelCall{Key: other, Turn: tr.ID, Model: "m2"}); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		answered <- d.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleAssistant, Text: "there"})
	}()
	release(before + 6)
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	steps, err := d.Steps(ctx, tr.ID)
	if err != nil || len(steps) != 1 {
		t.Fatalf("steps once the answer was stored: %d (%v), want 1", len(steps), err)
	}
	tu, err := d.TurnUsage(ctx, tr.ID)
	if err != nil || tu.InputTokens != 7 {
		t.Fatalf("usage once the answer was stored: %+v (%v)", tu, err)
	}
	st, err := d.ContextStatus(ctx, key)
	if err != nil || st.Window != 100 {
		t.Fatalf("context use once the answer was stored: %+v (%v)", st, err)
	}
	for _, want := range []string{"model_call step of turn", "usage of a m2 call of web:nobody"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logged.String())
		}
	}

	if err := q.RecordStep(ctx, conch.Step{Turn: tr.ID}); conch.KindOf(err) != conch.KindInvalid {
		t.Errorf("a step without a kind: got %v, want KindInvalid at once", err)
	}
	if err := q.RecordUsage(ctx, conch.ModelCall{Turn: tr.ID}); err == nil {
		t.Error("usage without a conversation was queued")
	}
}
