package conch

import (
	"context"
	"testing"
	"time"
)

type auditRecorder struct{ evs []AuditEvent }

func (a *auditRecorder) Audit(ctx context.Context, ev AuditEvent) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a.evs = append(a.evs, ev)
	return nil
}

// RecordAudit records with the kind, time and key given, the detail as JSON,
// also when the caller's ctx has ended; a nil store records nothing.
func TestRecordAudit(t *testing.T) {
	var rec auditRecorder
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	key := ConversationKey{Channel: ChannelCLI, ID: "local"}
	if err := RecordAudit(ctx, &rec, at, AuditExec, key, map[string]any{"argv": []string{"ls"}}); err != nil {
		t.Fatal(err)
	}
	if len(rec.evs) != 1 {
		t.Fatalf("got %d events, want 1", len(rec.evs))
	}
	ev := rec.evs[0]
	if ev.Kind != AuditExec || !ev.At.Equal(at) || ev.Conversation != key || string(ev.Detail) != `{"argv":["ls"]}` {
		t.Errorf("got %+v (detail %s), want exec at %s in %s with the argv", ev, ev.Detail, at, key)
	}
	if err := RecordAudit(ctx, &rec, at, AuditExec, key, map[string]any{"bad": func() {}}); err == nil {
		t.Error("a detail that cannot be marshalled: got nil, want an error")
	}
	if err := RecordAudit(ctx, nil, at, AuditExec, key, nil); err != nil {
		t.Errorf("nil store: %v", err)
	}
}
