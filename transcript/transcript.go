// Package transcript renders a conversation's turns as recorded — the
// messages, tool calls and results, the agent's steps (model calls with
// timings and tokens, fallbacks, errors, compactions, stops) and usage — as
// JSON lines or Markdown, for `conch transcript`. It reads the store
// through Store and renders the agent's step details, so it lives beside
// what it renders, not in the command.
package transcript

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"conch"
	"conch/agent"
	"conch/usage"
)

// Store is what a transcript reads. *sqlite.DB satisfies it.
type Store interface {
	Turns(ctx context.Context, key conch.ConversationKey, limit int) ([]conch.Turn, error)
	Turn(ctx context.Context, id conch.TurnID) (conch.Turn, error)
	TurnMessages(ctx context.Context, id conch.TurnID) ([]conch.TurnMessage, error)
	Steps(ctx context.Context, id conch.TurnID) ([]conch.Step, error)
	TurnUsage(ctx context.Context, id conch.TurnID) (conch.UsageTotal, error)
}

// Turn is one turn with what it recorded, in order.
type Turn struct {
	Turn    conch.Turn
	Entries []Entry
}

// Entry is one line of a JSONL transcript: the turn itself
// ("turn"), a message ("message") or a recorded step (its kind, with the
// recorded detail as it is).
type Entry struct {
	Turn       conch.TurnID     `json:"turn"`
	At         time.Time        `json:"at"`
	Type       string           `json:"type"`
	Status     conch.TurnStatus `json:"status,omitempty"`
	Reason     string           `json:"reason,omitempty"`
	Attempts   int              `json:"attempts,omitempty"`
	Sender     conch.UserID     `json:"sender,omitempty"`
	Origin     conch.OriginKind `json:"origin,omitempty"`
	Role       conch.Role       `json:"role,omitempty"`
	Text       string           `json:"text,omitempty"`
	Note       bool             `json:"note,omitempty"`
	ToolCalls  []Call           `json:"tool_calls,omitempty"`
	ToolResult *Result          `json:"tool_result,omitempty"`
	Detail     json.RawMessage  `json:"detail,omitempty"`
	// Usage is on the turn's line: its model calls added up.
	Usage   *Usage             `json:"usage,omitempty"`
	step    conch.StepKind     // for ordering and rendering
	message *conch.TurnMessage // for rendering
}

// Usage is what a turn's model calls used; Models lists the models
// that answered ("provider/name", in order).
type Usage struct {
	Calls        int     `json:"calls"`
	InputTokens  int     `json:"input_tokens"`
	CachedTokens int     `json:"cached_tokens"`
	OutputTokens int     `json:"output_tokens"`
	Estimated    int     `json:"estimated_calls,omitempty"`
	CostUSD      float64 `json:"cost_usd"`
	Models       string  `json:"models,omitempty"`
}

type Call struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments,omitempty"`
}

type Result struct {
	CallID  string `json:"call_id"`
	Name    string `json:"name"`
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
}

// Load reads the conversation's turns, oldest first, or only the
// one asked for.
func Load(ctx context.Context, st Store, key conch.ConversationKey, only conch.TurnID) ([]Turn, error) {
	var turns []conch.Turn
	if only != 0 {
		t, err := st.Turn(ctx, only)
		if err != nil {
			return nil, err
		}
		if t.Key != key {
			return nil, conch.Errorf(conch.KindNotFound, "turn %d belongs to %s, not %s", only, t.Key, key)
		}
		turns = []conch.Turn{t}
	} else {
		ts, err := st.Turns(ctx, key, 1<<30)
		if err != nil {
			return nil, err
		}
		if len(ts) == 0 {
			return nil, conch.Errorf(conch.KindNotFound, "conversation %s has no turns", key)
		}
		slices.Reverse(ts)
		turns = ts
	}
	out := make([]Turn, 0, len(turns))
	for _, t := range turns {
		ms, err := st.TurnMessages(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		steps, err := st.Steps(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		u, err := st.TurnUsage(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		es := merge(t, ms, steps)
		if u.Calls > 0 {
			es[0].Usage = &Usage{Calls: u.Calls, InputTokens: u.InputTokens, CachedTokens: u.CachedTokens, OutputTokens: u.OutputTokens,
				Estimated: u.Estimated, CostUSD: u.CostUSD, Models: u.Group}
		}
		out = append(out, Turn{Turn: t, Entries: es})
	}
	return out, nil
}

// merge interleaves a turn's messages and steps by time. Both are
// written as they happen, so at equal times (the store keeps milliseconds)
// the recording order decides: a step is written before the message it
// produced (model call → answer, tool result → tool message, stop → notice),
// except a tool call, which follows the assistant message that asked for it.
func merge(t conch.Turn, ms []conch.TurnMessage, steps []conch.Step) []Entry {
	head := Entry{Turn: t.ID, At: t.CreatedAt, Type: "turn", Status: t.Status, Reason: t.StoppedReason,
		Attempts: t.Attempts, Sender: t.Inbound.Sender, Origin: t.Inbound.Origin.Kind}
	es := []Entry{head}
	i, j := 0, 0
	for i < len(ms) || j < len(steps) {
		takeStep := false
		switch {
		case i == len(ms):
			takeStep = true
		case j == len(steps):
		default:
			m, s := ms[i], steps[j]
			switch {
			case s.At.Before(m.At):
				takeStep = true
			case s.At.Equal(m.At):
				takeStep = s.Kind != conch.StepToolCall || m.Role == conch.RoleTool
			}
			// The user message opens the turn whatever the clocks say.
			if m.Role == conch.RoleUser && !m.Note {
				takeStep = false
			}
		}
		if takeStep {
			s := steps[j]
			j++
			es = append(es, Entry{Turn: t.ID, At: s.At, Type: string(s.Kind), Detail: s.Detail, step: s.Kind})
			continue
		}
		m := ms[i]
		i++
		e := Entry{Turn: t.ID, At: m.At, Type: "message", Role: m.Role, Text: m.Text, Note: m.Note, message: &m}
		for _, c := range m.ToolCalls {
			e.ToolCalls = append(e.ToolCalls, Call{ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)})
		}
		if r := m.ToolResult; r != nil {
			e.ToolResult = &Result{CallID: r.CallID, Name: r.Name, Content: r.Content, IsError: r.IsError}
		}
		es = append(es, e)
	}
	return es
}

func WriteJSONL(w io.Writer, turns []Turn) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, t := range turns {
		for _, e := range t.Entries {
			e.At = e.At.UTC()
			if err := enc.Encode(e); err != nil {
				return fmt.Errorf("write transcript: %w", err)
			}
		}
	}
	return nil
}

func WriteMarkdown(w io.Writer, key conch.ConversationKey, turns []Turn) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Transcript of %s\n", key)
	for _, t := range turns {
		writeTurnMD(&b, t)
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write transcript: %w", err)
	}
	return nil
}

func writeTurnMD(b *strings.Builder, t Turn) {
	last := t.Turn.CreatedAt
	if n := len(t.Entries); n > 0 {
		last = t.Entries[n-1].At
	}
	status := string(t.Turn.Status)
	if t.Turn.StoppedReason != "" {
		status += " (" + t.Turn.StoppedReason + ")"
	}
	fmt.Fprintf(b, "\n## Turn %d · %s · %s · %s", t.Turn.ID, status, mdTime(t.Turn.CreatedAt), last.Sub(t.Turn.CreatedAt).Round(time.Millisecond))
	if t.Turn.Attempts > 1 {
		fmt.Fprintf(b, " · %d attempts", t.Turn.Attempts)
	}
	if u := t.Entries[0].Usage; u != nil {
		fmt.Fprintf(b, "\n\n_usage: %s · %s_", usage.Line(conch.UsageTotal{Calls: u.Calls, InputTokens: u.InputTokens,
			CachedTokens: u.CachedTokens, OutputTokens: u.OutputTokens, Estimated: u.Estimated, CostUSD: u.CostUSD}), u.Models)
	}
	b.WriteString("\n")
	for _, e := range t.Entries[1:] {
		at := mdClock(e.At)
		if e.message != nil {
			writeMessageMD(b, e, at, t.Turn.Inbound.Sender)
			continue
		}
		b.WriteString("\n" + stepLineMD(e, at) + "\n")
	}
}

func writeMessageMD(b *strings.Builder, e Entry, at string, sender conch.UserID) {
	switch e.Role {
	case conch.RoleUser:
		if e.Note {
			fmt.Fprintf(b, "\n**conch note** · %s\n\n%s\n", at, quoteMD(e.Text))
			break
		}
		fmt.Fprintf(b, "\n**user** %s · %s\n\n%s\n", sender, at, quoteMD(e.Text))
	case conch.RoleAssistant:
		if e.Text != "" {
			fmt.Fprintf(b, "\n**assistant** · %s\n\n%s\n", at, e.Text)
		}
		for _, c := range e.ToolCalls {
			fmt.Fprintf(b, "\n**assistant** calls `%s` (%s) · %s\n\n%s", c.Name, c.ID, at, fenceMD("json", c.Arguments))
		}
	case conch.RoleTool:
		r := e.ToolResult
		what := "result"
		if r.IsError {
			what = "error"
		}
		fmt.Fprintf(b, "\n**tool** `%s` %s (%s) · %s\n\n%s", r.Name, what, r.CallID, at, fenceMD("", r.Content))
	}
}

// stepLineMD renders a recorded step as one line.
func stepLineMD(e Entry, at string) string {
	switch e.step {
	case conch.StepModelCall:
		var d agent.ModelCallDetail
		if json.Unmarshal(e.Detail, &d) == nil {
			what := "model call"
			if d.Purpose != "" {
				what += " (" + d.Purpose + ")"
			}
			model := d.Model
			if d.Via != "" {
				model += " via " + d.Via
			}
			if d.Fallback {
				model += " (fallback)"
			}
			tokens := fmt.Sprintf("%d tokens in", d.InputTokens)
			if d.CachedTokens > 0 {
				tokens += fmt.Sprintf(" (%d cached)", d.CachedTokens)
			}
			tokens += fmt.Sprintf(", %d out", d.OutputTokens)
			if d.Estimated {
				tokens += " (estimated)"
			}
			if d.Via != "" { // recorded with its price (steps before usage was kept have none)
				tokens += fmt.Sprintf(", $%.4f", d.CostUSD)
			}
			return fmt.Sprintf("_%s · %s: %s, %s, %s, stop %s_", at, what, model, ms(d.DurationMS), tokens, d.StopReason)
		}
	case conch.StepFallback:
		var d agent.FallbackDetail
		if json.Unmarshal(e.Detail, &d) == nil {
			return fmt.Sprintf("_%s · %s unavailable (%s): the turn goes on with %s_", at, d.From, oneLineMD(d.Error), d.To)
		}
	case conch.StepModelError:
		var d agent.ModelErrorDetail
		if json.Unmarshal(e.Detail, &d) == nil {
			return fmt.Sprintf("_%s · model error (attempt %d, %s): %s_", at, d.Attempt, d.Kind, oneLineMD(d.Error))
		}
	case conch.StepToolCall:
		var d agent.ToolCallDetail
		if json.Unmarshal(e.Detail, &d) == nil {
			return fmt.Sprintf("_%s · tool `%s` (%s) started_", at, d.Name, d.ID)
		}
	case conch.StepToolResult:
		var d agent.ToolResultDetail
		if json.Unmarshal(e.Detail, &d) == nil {
			s := fmt.Sprintf("_%s · tool `%s` (%s) finished in %s, %d bytes", at, d.Name, d.ID, ms(d.DurationMS), d.Bytes)
			if d.ExitCode != nil {
				s += fmt.Sprintf(", exit %d", *d.ExitCode)
			}
			if d.IsError {
				s += ", failed"
			}
			if d.Error != "" {
				s += ": " + oneLineMD(d.Error)
			}
			return s + "_"
		}
	case conch.StepStopped:
		var d agent.StoppedDetail
		if json.Unmarshal(e.Detail, &d) == nil {
			return fmt.Sprintf("_%s · stopped: %s_", at, d.Reason)
		}
	case conch.StepCompaction:
		var d agent.CompactionDetail
		if json.Unmarshal(e.Detail, &d) == nil {
			line := fmt.Sprintf("_%s · context compacted: %d messages summarized, %d kept, %d of %d tokens before, in %s_",
				at, d.Messages, d.Kept, d.TokensBefore, d.Window, ms(d.DurationMS))
			if d.Summary != "" {
				line += "\n\n**summary** the model reads from here on:\n\n" + quoteMD(d.Summary)
			}
			return line
		}
	}
	return fmt.Sprintf("_%s · %s %s_", at, e.Type, string(e.Detail))
}

func ms(n int64) string { return (time.Duration(n) * time.Millisecond).String() }

func mdTime(t time.Time) string  { return t.UTC().Format("2006-01-02 15:04:05 UTC") }
func mdClock(t time.Time) string { return t.UTC().Format("15:04:05.000") }

func oneLineMD(s string) string { return strings.Join(strings.Fields(s), " ") }

func quoteMD(s string) string {
	return "> " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n> ")
}

// fenceMD puts s in a code fence longer than any run of backticks in it.
func fenceMD(lang, s string) string {
	n, run := 3, 0
	for _, r := range s {
		if r == '`' {
			run++
			n = max(n, run+1)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", n)
	return f + lang + "\n" + strings.TrimRight(s, "\n") + "\n" + f + "\n"
}
