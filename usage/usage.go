// Package usage turns model calls into money and keeps the budgets: the
// price table (prices.go), the Meter the agent asks before each model call
// and tells after it, and the texts of /usage and /status.
package usage

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"conch"
)

// Price is one model's rates in USD per million tokens.
type Price struct {
	// Model is a prefix of "provider/name".
	Model  string
	Input  float64
	Cached float64
	Output float64
	// Date and Source say when and where the rates were read.
	Date   string
	Source string
}

// Prices is the table with the operator's overrides.
type Prices struct{ rows []Price }

// NewPrices returns the built-in table with overrides applied: a row with
// the same Model replaces the built-in one, others are added.
func NewPrices(overrides ...Price) *Prices {
	rows := slices.Clone(table)
	for _, o := range overrides {
		if i := slices.IndexFunc(rows, func(p Price) bool { return p.Model == o.Model }); i >= 0 {
			rows[i] = o
		} else {
			rows = append(rows, o)
		}
	}
	// The longest prefix first.
	sort.SliceStable(rows, func(i, j int) bool { return len(rows[i].Model) > len(rows[j].Model) })
	return &Prices{rows: rows}
}

// Rows returns the table, the longest prefix first.
func (p *Prices) Rows() []Price { return slices.Clone(p.rows) }

// Lookup returns the price of model ("provider/name").
func (p *Prices) Lookup(model string) (Price, bool) {
	for _, r := range p.rows {
		if strings.HasPrefix(model, r.Model) {
			return r, true
		}
	}
	return Price{}, false
}

// Cost prices one call; known is false for a model without a price (its
// cost is then 0).
func (p *Prices) Cost(model string, u conch.Usage) (usd float64, known bool) {
	r, ok := p.Lookup(model)
	if !ok {
		return 0, false
	}
	cached := r.Cached
	if cached == 0 {
		cached = r.Input
	}
	fresh := max(u.InputTokens-u.CachedTokens, 0)
	return (float64(fresh)*r.Input + float64(u.CachedTokens)*cached + float64(u.OutputTokens)*r.Output) / 1e6, true
}

// Limits are the daily budgets (UTC days); zero means no limit.
type Limits struct {
	DailyUSD                float64
	DailyTokens             int
	ConversationDailyUSD    float64
	ConversationDailyTokens int
	PersonDailyUSD          float64
	PersonDailyTokens       int
}

// Store is what the Meter reads and writes. *sqlite.DB satisfies it.
type Store interface {
	conch.UsageStore
	// LastModel returns the model that answered the conversation's newest
	// call and whether it was a fallback ("" when none did).
	LastModel(ctx context.Context, key conch.ConversationKey) (string, bool, error)
}

// Options configures a Meter.
type Options struct {
	Store  Store
	Audit  conch.AuditStore
	Prices *Prices
	Limits Limits
	// OnRecord, when set, sees every priced call after it was stored (or
	// queued, with a store that queues it: sqlite.Queued).
	OnRecord func(conch.ModelCall)
	Now      func() time.Time
	Logger   *slog.Logger
}

// Meter prices and records model calls and refuses the ones that would
// pass a budget. It is safe for concurrent use.
type Meter struct{ o Options }

// NewMeter returns a Meter.
func NewMeter(o Options) *Meter {
	if o.Prices == nil {
		o.Prices = NewPrices()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Meter{o: o}
}

// Prices returns the Meter's price table.
func (m *Meter) Prices() *Prices { return m.o.Prices }

// Record prices a call, stores it and returns it priced.
func (m *Meter) Record(ctx context.Context, c conch.ModelCall) (conch.ModelCall, error) {
	if c.At.IsZero() {
		c.At = m.o.Now()
	}
	c.CostUSD, _ = m.o.Prices.Cost(c.Model, c.Usage)
	if err := m.o.Store.RecordUsage(ctx, c); err != nil {
		return c, fmt.Errorf("record usage: %w", err)
	}
	if m.o.OnRecord != nil {
		m.o.OnRecord(c)
	}
	return c, nil
}

// limit is one budget as Check applies it.
type limit struct {
	key   string // the configuration keys' stem: key + "daily_usd"
	what  string // "this conversation", "you", "all conversations"
	scope conch.UsageScope
	usd   float64
	toks  int
}

func (m *Meter) limits(c conch.ModelCall) []limit {
	l := m.o.Limits
	var out []limit
	if l.ConversationDailyUSD > 0 || l.ConversationDailyTokens > 0 {
		out = append(out, limit{"budget.conversation_", "this conversation", conch.UsageScope{Key: c.Key}, l.ConversationDailyUSD, l.ConversationDailyTokens})
	}
	if (l.PersonDailyUSD > 0 || l.PersonDailyTokens > 0) && c.Person.ID != "" {
		out = append(out, limit{"budget.person_", "you", conch.UsageScope{Person: c.Person}, l.PersonDailyUSD, l.PersonDailyTokens})
	}
	if l.DailyUSD > 0 || l.DailyTokens > 0 {
		out = append(out, limit{"budget.", "all conversations together", conch.UsageScope{}, l.DailyUSD, l.DailyTokens})
	}
	return out
}

// Check returns a *conch.BudgetError when the call c, with its estimated
// usage, would pass a daily limit, and audits the refusal. Other errors
// are the store's: the caller decides (the agent goes on and logs).
func (m *Meter) Check(ctx context.Context, c conch.ModelCall) error {
	ls := m.limits(c)
	if len(ls) == 0 {
		return nil
	}
	now := m.o.Now()
	day := conch.DayStart(now)
	cost, _ := m.o.Prices.Cost(c.Model, c.Usage)
	for _, l := range ls {
		spent, err := m.o.Store.UsageSince(ctx, l.scope, day)
		if err != nil {
			return fmt.Errorf("budget %s: %w", l.key, err)
		}
		var key, used, of string
		switch {
		case l.toks > 0 && spent.Tokens()+c.Usage.Total() > l.toks:
			key, used, of = l.key+"daily_tokens", tokens(spent.Tokens()), tokens(l.toks)+" tokens"
		case l.usd > 0 && spent.CostUSD+cost > l.usd:
			key, used, of = l.key+"daily_usd", dollars(spent.CostUSD), dollars(l.usd)
		default:
			continue
		}
		next := day.Add(24 * time.Hour)
		text := fmt.Sprintf("I have stopped here: %s used %s of the daily limit of %s today, and my next step would pass it (%s). "+
			"The operator can raise the limit; otherwise it starts again at 00:00 UTC, in %s.",
			l.what, used, of, key, next.Sub(now).Round(time.Minute))
		m.audit(ctx, c, key, spent, l)
		m.o.Logger.Info("model call refused by a budget", "conversation", c.Key, "turn", c.Turn, "limit", key, "spent_usd", spent.CostUSD, "spent_tokens", spent.Tokens())
		return &conch.BudgetError{Limit: key, Text: text}
	}
	return nil
}

// audit records a refusal; a failure to record is logged.
func (m *Meter) audit(ctx context.Context, c conch.ModelCall, key string, spent conch.UsageTotal, l limit) {
	detail := map[string]any{
		"limit": key, "turn": c.Turn, "person": c.Person.String(), "model": c.Model,
		"spent_usd": spent.CostUSD, "spent_tokens": spent.Tokens(), "limit_usd": l.usd, "limit_tokens": l.toks,
		"next_call_tokens": c.Usage.Total(),
	}
	if err := conch.RecordAudit(ctx, m.o.Audit, m.o.Now(), conch.AuditBudgetRefused, c.Key, detail); err != nil {
		m.o.Logger.Error("audit budget refusal", "err", err)
	}
}

// Report is the /usage text for a conversation and its person: today's
// usage of each scope against its limit.
func (m *Meter) Report(ctx context.Context, key conch.ConversationKey, person conch.UserKey) string {
	day := conch.DayStart(m.o.Now())
	l := m.o.Limits
	var b strings.Builder
	b.WriteString("Usage today (UTC):")
	line := func(what string, scope conch.UsageScope, usd float64, toks int) {
		t, err := m.o.Store.UsageSince(ctx, scope, day)
		if err != nil {
			m.o.Logger.Error("usage report", "err", err)
			fmt.Fprintf(&b, "\n%s: not available (%s)", what, "the store could not be read")
			return
		}
		fmt.Fprintf(&b, "\n%s: %s", what, Line(t))
		if lim := limitText(usd, toks); lim != "" {
			b.WriteString(" — limit " + lim)
		}
	}
	line("This conversation", conch.UsageScope{Key: key}, l.ConversationDailyUSD, l.ConversationDailyTokens)
	if person.ID != "" {
		line("You ("+person.String()+")", conch.UsageScope{Person: person}, l.PersonDailyUSD, l.PersonDailyTokens)
	}
	line("All conversations", conch.UsageScope{}, l.DailyUSD, l.DailyTokens)
	if t, err := m.o.Store.UsageSince(ctx, conch.UsageScope{Key: key}, time.Time{}); err == nil && t.Calls > 0 {
		fmt.Fprintf(&b, "\nThis conversation, all time: %s", Line(t))
	}
	if s := m.Status(ctx, key); s != "" {
		b.WriteString("\n" + s)
	}
	return b.String()
}

// Status is /status's line: which model answered last.
func (m *Meter) Status(ctx context.Context, key conch.ConversationKey) string {
	model, fallback, err := m.o.Store.LastModel(ctx, key)
	if err != nil || model == "" {
		return ""
	}
	if fallback {
		return "Last answer by " + model + " (a fallback: the primary model was unavailable)."
	}
	return "Last answer by " + model + "."
}

// Line renders a total: calls, tokens (cached and estimated noted) and cost.
func Line(t conch.UsageTotal) string {
	s := fmt.Sprintf("%s, %d call(s), %s in", dollars(t.CostUSD), t.Calls, tokens(t.InputTokens))
	if t.CachedTokens > 0 {
		s += " (" + tokens(t.CachedTokens) + " cached)"
	}
	s += ", " + tokens(t.OutputTokens) + " out"
	if t.Estimated > 0 {
		s += fmt.Sprintf(", %d estimated", t.Estimated)
	}
	return s
}

func limitText(usd float64, toks int) string {
	var parts []string
	if usd > 0 {
		parts = append(parts, dollars(usd))
	}
	if toks > 0 {
		parts = append(parts, tokens(toks)+" tokens")
	}
	return strings.Join(parts, " and ")
}

func dollars(v float64) string {
	if v != 0 && v < 0.01 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

func tokens(n int) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
