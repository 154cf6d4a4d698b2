package conch

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// auditTimeout bounds recording one audit event.
const auditTimeout = 10 * time.Second

// RecordAudit records one audit event: detail is marshalled as its JSON
// object. It is the one way events are recorded. What happened is recorded
// even when ctx was cancelled meanwhile (a turn stopped while its command
// ran): the store gets a context of its own, bounded by 10 s. A nil store
// records nothing.
func RecordAudit(ctx context.Context, store AuditStore, at time.Time, kind AuditKind, key ConversationKey, detail any) error {
	if store == nil {
		return nil
	}
	b, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("audit %s: %w", kind, err)
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	if err := store.Audit(actx, AuditEvent{At: at, Kind: kind, Conversation: key, Detail: b}); err != nil {
		return fmt.Errorf("audit %s: %w", kind, err)
	}
	return nil
}
