package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"conch"
)

// DefaultSystemPrompt is the built-in system prompt.
const DefaultSystemPrompt = `You are conch, an assistant with your own Linux computer for this conversation.
Use the tools to act on that computer: files live in /workspace and persist for the whole conversation.
Prefer doing over describing. Keep answers short and say what you did.
When you learn a stable fact about the person (name, preferences, projects), store it with remember; remove stale facts with forget.`

// systemPrompt assembles the base prompt, the enabled skills and the
// person's facts.
func (a *Agent) systemPrompt(ctx context.Context, env conch.ToolEnv) (string, error) {
	base := a.opts.SystemPrompt
	if base == "" {
		base = DefaultSystemPrompt
	}
	if a.opts.Skills != nil {
		if block := a.opts.Skills(ctx, env); block != "" {
			base += "\n\n" + block
		}
	}
	user := env.User
	if a.opts.Facts == nil || user.ID == "" {
		return base, nil
	}
	facts, err := a.opts.Facts.Facts(ctx, user)
	if err != nil {
		return "", fmt.Errorf("load facts: %w", err)
	}
	return base + "\n\n" + MemoryBlock(facts), nil
}

// MemoryBlock renders facts as the <memory> block of the system prompt.
func MemoryBlock(facts []conch.Fact) string {
	var b strings.Builder
	b.WriteString("<memory>\n")
	if len(facts) == 0 {
		b.WriteString("(nothing remembered yet)\n")
	}
	for _, f := range facts {
		fmt.Fprintf(&b, "- %s: %s\n", f.Key, oneLine(f.Value))
	}
	b.WriteString("</memory>")
	return b.String()
}

// repairHistory makes a stored history valid for every provider: a tool call
// left without a result by a crash gets one saying so, and results whose call
// is unknown are dropped. It never modifies its input.
func repairHistory(in []conch.Message) []conch.Message {
	out, _ := repairWithPos(in, nil)
	return out
}

// repairWithPos is repairHistory for a history with positions (pos may be
// nil): a synthetic result takes the position of the message before it, so
// a summary that runs through it runs through that message.
func repairWithPos(in []conch.Message, pos []conch.HistoryPos) ([]conch.Message, []conch.HistoryPos) {
	out := make([]conch.Message, 0, len(in)+2)
	var outPos []conch.HistoryPos
	if pos != nil {
		outPos = make([]conch.HistoryPos, 0, len(in)+2)
	}
	last := conch.HistoryPos{}
	add := func(m conch.Message, p conch.HistoryPos) {
		out = append(out, m)
		if pos != nil {
			outPos = append(outPos, p)
		}
		last = p
	}
	var pending []conch.ToolCall // calls of the last assistant message still unanswered
	flush := func() {
		for _, c := range pending {
			add(conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{
				CallID: c.ID, Name: c.Name, IsError: true,
				Content: interruptedResult,
			}}, last)
		}
		pending = nil
	}
	for i, m := range in {
		var p conch.HistoryPos
		if pos != nil {
			p = pos[i]
		}
		switch m.Role {
		case conch.RoleTool:
			if m.ToolResult == nil {
				continue
			}
			idx := -1
			for i, c := range pending {
				if c.ID == m.ToolResult.CallID {
					idx = i
					break
				}
			}
			if idx < 0 {
				continue
			}
			pending = append(pending[:idx:idx], pending[idx+1:]...)
			add(m, p)
		default:
			flush()
			add(m, p)
			if m.Role == conch.RoleAssistant {
				pending = append([]conch.ToolCall(nil), m.ToolCalls...)
			}
		}
	}
	flush()
	return out, outPos
}

// interruptedResult is the synthetic result of a call a crash left
// without one.
const interruptedResult = "interrupted: conch restarted before this call finished; it may or may not have taken effect, check before repeating it"

func canonicalJSON(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return string(raw)
	}
	return string(b)
}

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}

// describeCall renders a tool call for progress lines: the name and its
// arguments, shortened.
func describeCall(c conch.ToolCall) string {
	var args map[string]any
	if json.Unmarshal(c.Arguments, &args) != nil || len(args) == 0 {
		return c.Name
	}
	if len(args) == 1 {
		for _, v := range args {
			if s, ok := v.(string); ok {
				return c.Name + ": " + clip(oneLine(s), 120)
			}
		}
	}
	return c.Name + " " + clip(canonicalJSON(c.Arguments), 120)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func shortErr(err error) string {
	var me *conch.ModelError
	if errors.As(err, &me) && me.Status != 0 {
		return fmt.Sprintf("HTTP %d", me.Status)
	}
	return clip(err.Error(), 80)
}
