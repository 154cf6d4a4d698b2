package obs

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"conch"
)

type memAudit struct{ got []conch.AuditEvent }

func (m *memAudit) Audit(_ context.Context, ev conch.AuditEvent) error {
	m.got = append(m.got, ev)
	return nil
}

func TestAuditWritesLineAndStore(t *testing.T) {
	var buf bytes.Buffer
	store := &memAudit{}
	a := NewAudit(&buf, store, nil)
	ev := conch.AuditEvent{
		At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Kind: "exec",
		Conversation: conch.ConversationKey{Channel: "matrix", ID: "!r:x"},
		Detail:       json.RawMessage(`{"argv":["ls"],"exit_code":0}`),
	}
	if err := a.Audit(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	want := `{"at":"2026-01-02T03:04:05.000Z","kind":"exec","conversation":"matrix:!r:x","detail":{"argv":["ls"],"exit_code":0}}` + "\n"
	if buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
	if len(store.got) != 1 {
		t.Fatalf("store got %d events", len(store.got))
	}
}

func TestNewLoggerRejectsBadInput(t *testing.T) {
	if _, err := NewLogger(&bytes.Buffer{}, "loud", "text"); err == nil || !strings.Contains(err.Error(), "debug, info") {
		t.Fatalf("got %v", err)
	}
	if _, err := NewLogger(&bytes.Buffer{}, "info", "xml"); err == nil {
		t.Fatal("xml format accepted")
	}
}
