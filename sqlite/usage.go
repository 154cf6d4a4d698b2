package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"conch"
)

var _ conch.UsageStore = (*DB)(nil)

const (
	sqlRecordUsage = `INSERT INTO model_usage (conversation_id, turn_id, channel, sender, model, purpose, fallback,
		input_tokens, cached_tokens, output_tokens, estimated, cost_usd, at)
		SELECT id, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM conversations WHERE channel = ? AND key_id = ?`

	usageSums = `COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(cached_tokens), 0),
		COALESCE(SUM(output_tokens), 0), COALESCE(SUM(estimated), 0), COALESCE(SUM(cost_usd), 0)`

	// The budget's sums, each through its index.
	sqlUsageSinceAll = `SELECT ` + usageSums + ` FROM model_usage WHERE at >= ?`

	sqlUsageSinceConversation = `SELECT ` + usageSums + ` FROM model_usage
		WHERE conversation_id = (SELECT id FROM conversations WHERE channel = ? AND key_id = ?) AND at >= ?`

	sqlUsageSincePerson = `SELECT ` + usageSums + ` FROM model_usage WHERE channel = ? AND sender = ? AND at >= ?`

	// From whole UTC days on, everybody's and a person's sums come from
	// usage_days (migration 0014): a row a day, not a row a call.
	daySums = `COALESCE(SUM(calls), 0), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(cached_tokens), 0),
		COALESCE(SUM(output_tokens), 0), COALESCE(SUM(estimated), 0), COALESCE(SUM(cost_usd), 0)`
	sqlUsageDaysAll    = `SELECT ` + daySums + ` FROM usage_days WHERE scope = 0 AND channel = '' AND sender = '' AND day >= ?`
	sqlUsageDaysPerson = `SELECT ` + daySums + ` FROM usage_days WHERE scope = 1 AND channel = ? AND sender = ? AND day >= ?`

	sqlTurnUsage = `SELECT ` + usageSums + `, COALESCE(GROUP_CONCAT(model, ','), '') FROM model_usage WHERE turn_id = ?`

	// sqlLastModel: the model that answered the conversation's newest call
	// (a summary's call aside).
	sqlLastModel = `SELECT model, fallback FROM model_usage
		WHERE conversation_id = (SELECT id FROM conversations WHERE channel = ? AND key_id = ?) AND at >= 0 AND purpose = ''
		ORDER BY conversation_id DESC, at DESC LIMIT 1`
)

// RecordUsage keeps one model call. A call of an unknown conversation is
// refused with KindNotFound.
func (d *DB) RecordUsage(ctx context.Context, c conch.ModelCall) error {
	args, err := d.usageArgs(c)
	if err != nil {
		return err
	}
	res, err := d.exec(ctx, d.ws.recordUsage, args...)
	if err != nil {
		return fmt.Errorf("record usage of %s: %w", c.Key, d.diskFull(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("record usage: %w", conch.Errorf(conch.KindNotFound, "no conversation %s", c.Key))
	}
	return nil
}

// usageArgs are the recordUsage statement's arguments for c.
func (d *DB) usageArgs(c conch.ModelCall) ([]any, error) {
	if err := validKey(c.Key); err != nil {
		return nil, fmt.Errorf("record usage: %w", err)
	}
	if c.At.IsZero() {
		c.At = d.now()
	}
	u := c.Usage
	return []any{c.Turn, c.Key.Channel, string(c.Person.ID), c.Model, c.Purpose, c.Fallback,
		u.InputTokens, u.CachedTokens, u.OutputTokens, u.Estimated, c.CostUSD, millis(c.At), c.Key.Channel, c.Key.ID}, nil
}

// msPerDay is a UTC day in unix milliseconds: usage_days' days start at
// its multiples.
const msPerDay = 24 * 60 * 60 * 1000

// UsageSince adds up the calls in scope at or after since. From the start of
// a UTC day (a budget's since), everybody's and a person's come from the
// days' sums.
func (d *DB) UsageSince(ctx context.Context, scope conch.UsageScope, since time.Time) (conch.UsageTotal, error) {
	var row *sql.Row
	at := millis(since)
	wholeDays := since.IsZero() || at%msPerDay == 0
	switch {
	case !scope.Key.IsZero():
		row = d.rs.usageSinceConversation.QueryRowContext(ctx, scope.Key.Channel, scope.Key.ID, at)
	case scope.Person != (conch.UserKey{}) && wholeDays:
		row = d.rs.usageDaysPerson.QueryRowContext(ctx, scope.Person.Channel, string(scope.Person.ID), at)
	case scope.Person != (conch.UserKey{}):
		row = d.rs.usageSincePerson.QueryRowContext(ctx, scope.Person.Channel, string(scope.Person.ID), at)
	case wholeDays:
		row = d.rs.usageDaysAll.QueryRowContext(ctx, at)
	default:
		row = d.rs.usageSinceAll.QueryRowContext(ctx, at)
	}
	var t conch.UsageTotal
	if err := row.Scan(&t.Calls, &t.InputTokens, &t.CachedTokens, &t.OutputTokens, &t.Estimated, &t.CostUSD); err != nil {
		return t, fmt.Errorf("usage since %s: %w", since.Format(time.RFC3339), err)
	}
	return t, nil
}

// TurnUsage adds up one turn's calls; Group lists the models that answered.
func (d *DB) TurnUsage(ctx context.Context, turn conch.TurnID) (conch.UsageTotal, error) {
	var t conch.UsageTotal
	err := d.rs.turnUsage.QueryRowContext(ctx, turn).Scan(&t.Calls, &t.InputTokens, &t.CachedTokens, &t.OutputTokens, &t.Estimated, &t.CostUSD, &t.Group)
	if err != nil {
		return t, fmt.Errorf("usage of turn %d: %w", turn, err)
	}
	// The models in the order they answered, each once (DISTINCT would
	// sort in a temporary tree).
	var models []string
	for m := range strings.SplitSeq(t.Group, ",") {
		if m != "" && !slices.Contains(models, m) {
			models = append(models, m)
		}
	}
	t.Group = strings.Join(models, ", ")
	return t, nil
}

// LastModel returns the model that answered the conversation's newest call
// and whether it was a fallback; "" when none did.
func (d *DB) LastModel(ctx context.Context, key conch.ConversationKey) (model string, fallback bool, err error) {
	err = d.rs.lastModel.QueryRowContext(ctx, key.Channel, key.ID).Scan(&model, &fallback)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("last model of %s: %w", key, err)
	}
	return model, fallback, nil
}

// usageGroupExpr is each report grouping's SQL key.
var usageGroupExpr = map[conch.UsageGroup]string{
	conch.ByConversation: `c.channel || ':' || c.key_id`,
	conch.ByPerson:       `u.channel || ':' || u.sender`,
	conch.ByDay:          `strftime('%Y-%m-%d', u.at / 1000, 'unixepoch')`,
	conch.ByModel:        `u.model`,
}

// UsageReport adds up the calls at or after since by group, the costliest
// first. It is an operator's report, run by hand: it reads the range
// through the time index and groups in a temporary tree.
func (d *DB) UsageReport(ctx context.Context, by conch.UsageGroup, since time.Time) ([]conch.UsageTotal, error) {
	expr, ok := usageGroupExpr[by]
	if !ok {
		return nil, conch.Errorf(conch.KindInvalid, "usage by %q: want conversation, person, day or model", by)
	}
	q := `SELECT ` + expr + `, COUNT(*), SUM(u.input_tokens), SUM(u.cached_tokens), SUM(u.output_tokens), SUM(u.estimated), SUM(u.cost_usd)
		FROM model_usage u JOIN conversations c ON c.id = u.conversation_id
		WHERE u.at >= ? GROUP BY 1 ORDER BY 7 DESC, 1`
	if by == conch.ByDay {
		q = q[:len(q)-len("ORDER BY 7 DESC, 1")] + "ORDER BY 1"
	}
	rows, err := d.r.QueryContext(ctx, q, millis(since))
	if err != nil {
		return nil, fmt.Errorf("usage by %s: %w", by, err)
	}
	defer rows.Close()
	var out []conch.UsageTotal
	for rows.Next() {
		var t conch.UsageTotal
		if err := rows.Scan(&t.Group, &t.Calls, &t.InputTokens, &t.CachedTokens, &t.OutputTokens, &t.Estimated, &t.CostUSD); err != nil {
			return nil, fmt.Errorf("usage by %s: %w", by, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage by %s: %w", by, err)
	}
	return out, nil
}
