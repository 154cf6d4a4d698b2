package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"conch"
)

// Approvals (migration 0013): questions a person answers before a tool call
// goes on, keyed by the call, and the conversation-wide grants.
const (
	sqlApprovalCols = `id, channel, conversation, turn, call_id, request, status, choice, reason, decided_by, created_at, deadline, decided_at, used_at, shown_at`
	sqlAddApproval  = `INSERT INTO approvals (id, channel, conversation, turn, call_id, request, status, created_at, deadline)
		VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?) ON CONFLICT (turn, call_id) DO NOTHING`
	sqlApprovalByCall = `SELECT ` + sqlApprovalCols + ` FROM approvals WHERE turn = ? AND call_id = ?`
	sqlApprovalByID   = `SELECT ` + sqlApprovalCols + ` FROM approvals WHERE id = ?`
	sqlDecideApproval = `UPDATE approvals SET status = 'decided', choice = ?, reason = ?, decided_by = ?, decided_at = ?
		WHERE id = ? AND status = 'open'`
	sqlOpenApprovals    = `SELECT ` + sqlApprovalCols + ` FROM approvals WHERE status = 'open' AND channel = ? AND conversation = ? ORDER BY created_at, id`
	sqlAllOpenApprovals = `SELECT ` + sqlApprovalCols + ` FROM approvals WHERE status = 'open' ORDER BY created_at, id`
	sqlTurnApprovals    = `SELECT ` + sqlApprovalCols + ` FROM approvals WHERE turn = ?`
	sqlUseApproval      = `UPDATE approvals SET used_at = ? WHERE id = ? AND used_at = 0`
	sqlShownApproval    = `UPDATE approvals SET shown_at = ? WHERE id = ? AND shown_at = 0`
	sqlGrant            = `INSERT INTO approval_grants (channel, conversation, scope, granted_at) VALUES (?, ?, ?, ?)
		ON CONFLICT DO NOTHING`
	sqlGranted     = `SELECT 1 FROM approval_grants WHERE channel = ? AND conversation = ? AND scope = ?`
	sqlClearGrants = `DELETE FROM approval_grants WHERE channel = ? AND conversation = ?`
)

var _ conch.ApprovalStore = (*DB)(nil)

// AddApproval implements conch.ApprovalStore.
func (d *DB) AddApproval(ctx context.Context, a conch.Approval) (conch.Approval, bool, error) {
	if err := validKey(a.Key); err != nil {
		return conch.Approval{}, false, fmt.Errorf("add approval: %w", err)
	}
	if a.ID == "" || a.Turn <= 0 {
		return conch.Approval{}, false, fmt.Errorf("add approval: %w", conch.Errorf(conch.KindInvalid, "an approval needs an id and a turn"))
	}
	req, err := json.Marshal(a.Request)
	if err != nil {
		return conch.Approval{}, false, fmt.Errorf("add approval: %w", err)
	}
	res, err := d.execSQL(ctx, sqlAddApproval, a.ID, string(a.Key.Channel), a.Key.ID, int64(a.Turn), a.CallID, string(req),
		millis(a.Created), millis(a.Deadline))
	if err != nil {
		return conch.Approval{}, false, fmt.Errorf("add approval: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return conch.Approval{}, false, fmt.Errorf("add approval: %w", err)
	}
	got, err := scanApproval(d.w.QueryRowContext(ctx, sqlApprovalByCall, int64(a.Turn), a.CallID))
	if err != nil {
		return conch.Approval{}, false, fmt.Errorf("add approval: %w", err)
	}
	return got, n == 1, nil
}

// Approval implements conch.ApprovalStore.
func (d *DB) Approval(ctx context.Context, id string) (conch.Approval, error) {
	a, err := scanApproval(d.r.QueryRowContext(ctx, sqlApprovalByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return conch.Approval{}, conch.Errorf(conch.KindNotFound, "no question %q", id)
	}
	if err != nil {
		return conch.Approval{}, fmt.Errorf("approval %q: %w", id, err)
	}
	return a, nil
}

// DecideApproval implements conch.ApprovalStore.
func (d *DB) DecideApproval(ctx context.Context, id string, dec conch.ApprovalDecision, at time.Time) (conch.Approval, bool, error) {
	res, err := d.execSQL(ctx, sqlDecideApproval, string(dec.Choice), dec.Reason, string(dec.By), millis(at), id)
	if err != nil {
		return conch.Approval{}, false, fmt.Errorf("decide approval %q: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return conch.Approval{}, false, fmt.Errorf("decide approval %q: %w", id, err)
	}
	a, err := scanApproval(d.w.QueryRowContext(ctx, sqlApprovalByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return conch.Approval{}, false, conch.Errorf(conch.KindNotFound, "no question %q", id)
	}
	if err != nil {
		return conch.Approval{}, false, fmt.Errorf("decide approval %q: %w", id, err)
	}
	return a, n == 1, nil
}

// UseApproval implements conch.ApprovalStore.
func (d *DB) UseApproval(ctx context.Context, id string, at time.Time) error {
	if _, err := d.execSQL(ctx, sqlUseApproval, millis(at), id); err != nil {
		return fmt.Errorf("use approval %q: %w", id, err)
	}
	return nil
}

// ApprovalShown implements conch.ApprovalStore.
func (d *DB) ApprovalShown(ctx context.Context, id string, at time.Time) error {
	if _, err := d.execSQL(ctx, sqlShownApproval, millis(at), id); err != nil {
		return fmt.Errorf("approval %q shown: %w", id, err)
	}
	return nil
}

// OpenApprovals implements conch.ApprovalStore.
func (d *DB) OpenApprovals(ctx context.Context, key conch.ConversationKey) ([]conch.Approval, error) {
	var rows *sql.Rows
	var err error
	if key.IsZero() {
		rows, err = d.r.QueryContext(ctx, sqlAllOpenApprovals)
	} else {
		rows, err = d.r.QueryContext(ctx, sqlOpenApprovals, string(key.Channel), key.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("open approvals: %w", err)
	}
	defer rows.Close()
	var out []conch.Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, fmt.Errorf("open approvals: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("open approvals: %w", err)
	}
	return out, nil
}

// TurnApprovals implements conch.ApprovalStore.
func (d *DB) TurnApprovals(ctx context.Context, turn conch.TurnID) (map[string]conch.Approval, error) {
	rows, err := d.r.QueryContext(ctx, sqlTurnApprovals, int64(turn))
	if err != nil {
		return nil, fmt.Errorf("approvals of turn %d: %w", turn, err)
	}
	defer rows.Close()
	out := map[string]conch.Approval{}
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, fmt.Errorf("approvals of turn %d: %w", turn, err)
		}
		out[a.CallID] = a
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("approvals of turn %d: %w", turn, err)
	}
	return out, nil
}

// Grant implements conch.ApprovalStore.
func (d *DB) Grant(ctx context.Context, key conch.ConversationKey, scope string, at time.Time) error {
	if err := validKey(key); err != nil || scope == "" {
		return fmt.Errorf("grant: %w", conch.Errorf(conch.KindInvalid, "a grant needs a conversation and a scope"))
	}
	if _, err := d.execSQL(ctx, sqlGrant, string(key.Channel), key.ID, scope, millis(at)); err != nil {
		return fmt.Errorf("grant %q: %w", scope, err)
	}
	return nil
}

// Granted implements conch.ApprovalStore.
func (d *DB) Granted(ctx context.Context, key conch.ConversationKey, scope string) (bool, error) {
	var one int
	err := d.r.QueryRowContext(ctx, sqlGranted, string(key.Channel), key.ID, scope).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("granted %q: %w", scope, err)
	}
	return true, nil
}

// ClearGrants implements conch.ApprovalStore.
func (d *DB) ClearGrants(ctx context.Context, key conch.ConversationKey) error {
	if _, err := d.execSQL(ctx, sqlClearGrants, string(key.Channel), key.ID); err != nil {
		return fmt.Errorf("clear grants of %s: %w", key, err)
	}
	return nil
}

type rowScanner interface{ Scan(...any) error }

func scanApproval(r rowScanner) (conch.Approval, error) {
	var a conch.Approval
	var ch, req, status, choice, by string
	var turn, created, deadline, decided, used, shown int64
	if err := r.Scan(&a.ID, &ch, &a.Key.ID, &turn, &a.CallID, &req, &status, &choice, &a.Reason, &by, &created, &deadline, &decided, &used, &shown); err != nil {
		return conch.Approval{}, err
	}
	if err := json.Unmarshal([]byte(req), &a.Request); err != nil {
		return conch.Approval{}, fmt.Errorf("approval %q: request: %w", a.ID, err)
	}
	a.Key.Channel = conch.ChannelName(ch)
	a.Turn = conch.TurnID(turn)
	a.Status = conch.ApprovalStatus(status)
	a.Choice = conch.ApprovalChoice(choice)
	a.By = conch.UserID(by)
	a.Created, a.Deadline = fromMillis(created), fromMillis(deadline)
	if decided > 0 {
		a.Decided = fromMillis(decided)
	}
	if used > 0 {
		a.Used = fromMillis(used)
	}
	if shown > 0 {
		a.Shown = fromMillis(shown)
	}
	return a, nil
}
