package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"conch"
)

// Context management keeps every request under the model's context window.
//
// The agent counts tokens two ways and takes the larger: the provider's usage
// numbers of the previous call (input + output) plus an estimate of the
// messages added since, and an estimate of the whole request. The estimate is
// deliberately simple (EstimateTokens): the provider's numbers catch what it
// under-counts, the estimate covers providers that report nothing.
//
// Before a request would pass CompactAt of the window, the older messages are
// folded into a summary written by the model (a separate call with
// SummaryPrompt) and stored with the range it covers; the request then holds
// the summary (in the system prompt) and the recent messages, which take at
// most KeepFraction of the window. A cut never falls before a tool result, so
// a tool call and its results stay together. Tool results of earlier turns
// longer than oldResultMax are cut to their head and tail with a note.
const (
	// CompactAt is the share of the window a request may reach before the
	// older turns are summarized.
	CompactAt = 0.70
	// KeepFraction is the share of the window the recent messages kept
	// verbatim may take after a compaction.
	KeepFraction = 0.25

	// bytesPerToken: BPE tokenizers average about four bytes of English or
	// code per token.
	bytesPerToken = 4
	// messageOverhead is what the wire adds per message (role, ids, framing).
	messageOverhead = 8
	// oldResultMax caps, in bytes, a tool result of an earlier turn in a request.
	oldResultMax = 4096
)

// SummaryPrompt is the system prompt of the summarization call.
const SummaryPrompt = `You maintain the running summary of a long conversation between a person and an assistant that has its own Linux computer (files in /workspace persist).
You are given the previous summary (it may be empty) and the next part of the conversation, with tool calls and their results.
Write one new summary that replaces the previous one. Keep: what the person wants and asked for (the latest request verbatim if it is still open), decisions and preferences, facts learned, files, paths, commands and terminal state on the computer, what was done and what is still open.
Drop small talk and raw tool output that no longer matters. Write plain prose and short lists, no preamble.`

// EstimateTokens estimates the tokens of s: its bytes divided by four,
// rounded up. It under-counts scripts with many bytes per token the least
// and text in scripts with few bytes per character (CJK) the most; callers
// add a margin (estimateRequest adds 10 %).
func EstimateTokens(s string) int { return (len(s) + bytesPerToken - 1) / bytesPerToken }

// estimateMessage estimates one message as the wire carries it.
func estimateMessage(m conch.Message) int {
	n := len(m.Text)
	for _, c := range m.ToolCalls {
		n += len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	if r := m.ToolResult; r != nil {
		n += len(r.CallID) + len(r.Name) + len(r.Content)
	}
	return (n+bytesPerToken-1)/bytesPerToken + messageOverhead + imageCount(m)*imageTokens
}

func estimateMessages(ms []conch.Message) int {
	n := 0
	for _, m := range ms {
		n += estimateMessage(m)
	}
	return n
}

// estimateRequest estimates a whole request, with a 10 % margin.
func estimateRequest(req conch.ModelRequest) int {
	n := EstimateTokens(req.System)
	for _, t := range req.Tools {
		n += EstimateTokens(t.Name) + EstimateTokens(t.Description) + EstimateTokens(string(t.Parameters)) + messageOverhead
	}
	n += estimateMessages(req.Messages)
	return n + n/10
}

// CutMiddle shortens s to about max bytes: its head and its tail, with a
// note in between saying how much was left out and why. s is returned as it
// is when it fits. Cuts fall on UTF-8 boundaries.
func CutMiddle(s string, max int, why string) string {
	if len(s) <= max || max <= 0 {
		return s
	}
	head, tail := max/2, max-max/2
	h := head
	for h > 0 && s[h]&0xC0 == 0x80 {
		h--
	}
	t := len(s) - tail
	for t < len(s) && s[t]&0xC0 == 0x80 {
		t++
	}
	return fmt.Sprintf("%s\n[… %d bytes cut: %s …]\n%s", s[:h], t-h, why, s[t:])
}

const oldResultNote = "old tool result, head and tail kept"

// contextView is the model's view of the conversation during a turn:
// the newest summary and the messages after it with their positions
// (messages of the running turn not stored yet have the turn's id only).
type contextView struct {
	summary conch.Summary
	msgs    []conch.Message
	pos     []conch.HistoryPos
}

// loadView reads the model's view of the conversation through turn.
func (a *Agent) loadView(ctx context.Context, key conch.ConversationKey, turn conch.TurnID) (contextView, error) {
	h, err := a.opts.Store.ModelHistory(ctx, key, turn)
	if err != nil {
		return contextView{}, fmt.Errorf("load model history: %w", err)
	}
	if len(h.Pos) != len(h.Messages) {
		return contextView{}, fmt.Errorf("load model history: %d messages with %d positions", len(h.Messages), len(h.Pos))
	}
	msgs, pos := repairWithPos(h.Messages, h.Pos)
	return contextView{summary: h.Summary, msgs: msgs, pos: pos}, nil
}

// holdsTurn reports whether the view has turn's message: among its
// messages, or folded into its summary (a long turn compacted mid-way).
func (v contextView) holdsTurn(turn conch.TurnID) bool {
	if v.summary.Through.Turn >= turn {
		return len(v.msgs) > 0
	}
	for _, p := range v.pos {
		if p.Turn == turn {
			return true
		}
	}
	return false
}

// window returns the configured context window (0: not managed).
func (a *Agent) window() int { return a.opts.ContextWindow }

// estimateAnswer estimates an answer's tokens, for a provider that reports
// no usage.
func estimateAnswer(resp conch.ModelResponse) int {
	return estimateMessages([]conch.Message{{Role: conch.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls}})
}

// requestMessages returns the messages to send: tool results of turns other
// than turn are cut to oldResultMax, results of turn itself to the window
// (about a quarter of it in tokens), and a view that begins after a summary
// without a user message gets one pointing at the summary.
func (a *Agent) requestMessages(v contextView, turn conch.TurnID, window int) []conch.Message {
	oldMax, curMax := oldResultMax, window
	if w := window; w > 0 && w/2 < oldMax {
		oldMax = w / 2
	}
	out := make([]conch.Message, 0, len(v.msgs)+1)
	if v.summary.Text != "" && len(v.msgs) > 0 && v.msgs[0].Role != conch.RoleUser {
		out = append(out, conch.Message{Role: conch.RoleUser, Text: "(The conversation before this point is summarized in the system prompt.)"})
	}
	for i, m := range v.msgs {
		if r := m.ToolResult; r != nil {
			limit := curMax
			if i < len(v.pos) && v.pos[i].Turn != turn {
				limit = oldMax
			}
			if limit > 0 && len(r.Content) > limit {
				rr := *r
				rr.Content = CutMiddle(r.Content, limit, oldResultNote)
				m.ToolResult = &rr
			}
		}
		out = append(out, m)
	}
	return out
}

// withSummary adds the summary block to the system prompt.
func withSummary(system string, s conch.Summary) string {
	if s.Text == "" {
		return system
	}
	return system + "\n\nEarlier turns of this conversation are summarized here (they are kept in full in the record; you see only this summary):\n<conversation-summary>\n" +
		s.Text + "\n</conversation-summary>"
}

// errNoCut says a view has nothing that can be folded into a summary.
var errNoCut = errors.New("nothing to compact")

// chooseCut returns the index of the first message kept verbatim: the
// earliest message that is not a tool result and after which the messages
// fit keep tokens. When even the newest messages do not fit, it keeps as
// little as it can (from the last message that is not a tool result). The
// cut is at least 1, or errNoCut.
func chooseCut(msgs []conch.Message, keep int) (int, error) {
	cut, acc := -1, 0
	for i := len(msgs) - 1; i >= 1; i-- {
		acc += estimateMessage(msgs[i])
		if acc > keep {
			break
		}
		if msgs[i].Role != conch.RoleTool {
			cut = i
		}
	}
	if cut < 0 {
		for i := len(msgs) - 1; i >= 1; i-- {
			if msgs[i].Role != conch.RoleTool {
				cut = i
				break
			}
		}
	}
	if cut < 1 {
		return 0, errNoCut
	}
	return cut, nil
}

// renderForSummary renders messages as text for the summarization call;
// long tool results and arguments are cut to their head and tail.
func renderForSummary(ms []conch.Message, maxBytes int) string {
	var b strings.Builder
	for _, m := range ms {
		switch {
		case m.Role == conch.RoleTool && m.ToolResult != nil:
			r := m.ToolResult
			status := "result"
			if r.IsError {
				status = "error"
			}
			fmt.Fprintf(&b, "[tool %s %s]\n%s\n\n", r.Name, status, CutMiddle(r.Content, min(oldResultMax, maxBytes), oldResultNote))
			for _, im := range r.Images {
				fmt.Fprintf(&b, "[picture %s shown with the result]\n\n", im.Name)
			}
		default:
			for _, im := range m.Images {
				fmt.Fprintf(&b, "[%s sent the picture %s]\n\n", m.Role, im.Name)
			}
			if m.Text != "" {
				fmt.Fprintf(&b, "[%s]\n%s\n\n", m.Role, CutMiddle(m.Text, maxBytes, "long message"))
			}
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, "[%s calls %s] %s\n\n", m.Role, c.Name, CutMiddle(string(c.Arguments), min(1024, maxBytes), "long arguments"))
			}
		}
	}
	return b.String()
}

// CompactionDetail is a StepCompaction.
type CompactionDetail struct {
	// Messages is how many stored messages this compaction folded in.
	Messages int `json:"messages"`
	// Kept is how many messages stay verbatim after it.
	Kept int `json:"kept"`
	// TokensBefore is the estimated request size that triggered it.
	TokensBefore  int   `json:"tokens_before"`
	SummaryTokens int   `json:"summary_tokens"`
	Calls         int   `json:"calls"`
	DurationMS    int64 `json:"duration_ms"`
	Window        int   `json:"window"`
	// Summary is the stored summary the model reads from now on.
	Summary string `json:"summary"`
}

// compact folds the older part of the stored view into a new summary and
// stores it; it returns the view after it. The summary is stored in one
// transaction with the range it covers: a crash before that loses nothing,
// and the next request compacts again.
func (a *Agent) compact(ctx context.Context, c caller, before int) (contextView, int, error) {
	turn, key := c.turn, c.key
	start := a.opts.Now()
	v, err := a.loadView(ctx, key, turn)
	if err != nil {
		return v, 0, err
	}
	w := c.slot.window
	// The kept messages are sized as they will be sent.
	sent := a.requestMessages(contextView{msgs: v.msgs, pos: v.pos}, turn, w)
	cut, err := chooseCut(sent, int(float64(w)*KeepFraction))
	if err != nil {
		return v, 0, err
	}
	folded := 0
	for i := 0; i < cut; i++ {
		if i == 0 || v.pos[i] != v.pos[i-1] {
			folded++
		}
	}
	// Summarize in chunks that fit half the window with the running summary.
	summaryMax := min(max(w/10, 256), 4096)
	text, calls := v.summary.Text, 0
	for from := 0; from < cut; {
		budget := w/2 - EstimateTokens(SummaryPrompt) - EstimateTokens(text) - summaryMax
		budget = max(budget, w/8)
		to, size := from, 0
		for to < cut {
			t := EstimateTokens(renderForSummary(v.msgs[to:to+1], budget*bytesPerToken)) + messageOverhead
			if to > from && size+t > budget {
				break
			}
			size += t
			to++
		}
		chunk := renderForSummary(v.msgs[from:to], budget*bytesPerToken)
		user := "<previous-summary>\n" + text + "\n</previous-summary>\n\n<conversation-part>\n" + chunk + "</conversation-part>\n\nWrite the new summary."
		resp, n, err := a.generate(ctx, c, conch.ModelRequest{
			System: SummaryPrompt, Messages: []conch.Message{{Role: conch.RoleUser, Text: user}}, MaxTokens: summaryMax,
		}, "summary", func(conch.EventData) {})
		calls += n
		if err != nil {
			return v, calls, fmt.Errorf("compact context: %w", err)
		}
		if strings.TrimSpace(resp.Text) == "" {
			return v, calls, fmt.Errorf("compact context: %w", conch.Errorf(conch.KindTransient, "the model returned an empty summary"))
		}
		text = strings.TrimSpace(resp.Text)
		from = to
	}
	s := conch.Summary{Text: text, Through: v.pos[cut-1], Messages: v.summary.Messages + folded}
	if err := a.opts.Context.AddSummary(ctx, key, s); err != nil {
		if ctx.Err() != nil {
			return v, calls, fmt.Errorf("compact context: %w", context.Cause(ctx))
		}
		return v, calls, fmt.Errorf("compact context: %w", err)
	}
	a.record(ctx, turn, conch.StepCompaction, CompactionDetail{
		Messages: folded, Kept: len(v.msgs) - cut, TokensBefore: before, SummaryTokens: EstimateTokens(text),
		Calls: calls, DurationMS: a.opts.Now().Sub(start).Milliseconds(), Window: w, Summary: text,
	})
	a.opts.Logger.Info("context compacted", "turn", turn, "folded", folded, "kept", len(v.msgs)-cut, "tokens_before", before, "window", w)
	return contextView{summary: s, msgs: v.msgs[cut:], pos: v.pos[cut:]}, calls, nil
}
