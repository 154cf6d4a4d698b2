package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"conch"
)

func TestEstimateTokens(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0},
		{"a", 1},
		{"abcd", 1},
		{"abcde", 2},
		{strings.Repeat("x", 4000), 1000},
		{"héllo", 2}, // bytes, not runes
	} {
		if got := EstimateTokens(tc.in); got != tc.want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
	m := conch.Message{Role: conch.RoleAssistant, Text: "abcd", ToolCalls: []conch.ToolCall{{ID: "id", Name: "ls", Arguments: json.RawMessage(`{}`)}}}
	if got, want := estimateMessage(m), 3+messageOverhead; got != want { // 4+2+2+2 bytes, rounded up
		t.Errorf("estimateMessage = %d, want %d", got, want)
	}
	req := conch.ModelRequest{System: strings.Repeat("s", 400), Messages: []conch.Message{{Role: conch.RoleUser, Text: strings.Repeat("u", 400)}}}
	if got, want := estimateRequest(req), (100+100+messageOverhead)*11/10; got != want {
		t.Errorf("estimateRequest = %d, want %d (10 %% margin)", got, want)
	}
}

func TestCutMiddle(t *testing.T) {
	long := strings.Repeat("a", 100) + strings.Repeat("m", 1000) + strings.Repeat("z", 100)
	got := CutMiddle(long, 200, "old tool result")
	if !strings.HasPrefix(got, strings.Repeat("a", 100)+"\n[… 1000 bytes cut: old tool result …]\n") || !strings.HasSuffix(got, strings.Repeat("z", 100)) {
		t.Errorf("CutMiddle = %q", got)
	}
	if got := CutMiddle("short", 200, "x"); got != "short" {
		t.Errorf("CutMiddle(short) = %q, want it unchanged", got)
	}
	// Cuts fall on rune boundaries.
	s := strings.Repeat("é", 300) // 600 bytes
	got = CutMiddle(s, 101, "x")
	head, _, _ := strings.Cut(got, "\n")
	if !strings.HasPrefix(got, "é") || strings.ContainsRune(got, '\uFFFD') || len(head)%2 != 0 {
		t.Errorf("CutMiddle split a rune: %q", got)
	}
	for _, part := range strings.Split(got, "\n") {
		if !strings.HasPrefix(part, "[") && strings.Trim(part, "é") != "" {
			t.Errorf("part %q is not whole runes", part)
		}
	}
}

func TestChooseCutKeepsToolPairs(t *testing.T) {
	user := func(s string) conch.Message { return conch.Message{Role: conch.RoleUser, Text: s} }
	text := func(s string) conch.Message { return conch.Message{Role: conch.RoleAssistant, Text: s} }
	call := conch.Message{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{{ID: "1", Name: "a"}, {ID: "2", Name: "b"}}}
	res := func(id, content string) conch.Message {
		return conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: id, Name: "a", Content: content}}
	}
	big := strings.Repeat("x", 4000) // ~1000 tokens
	for _, tc := range []struct {
		name string
		msgs []conch.Message
		keep int
		want int
	}{
		{"keeps what fits", []conch.Message{user("u1"), text("a1"), user("u2"), text("a2")}, 1000, 1},
		{"cuts at a turn", []conch.Message{user(big), text(big), user("u2"), text("a2")}, 100, 2},
		{"never before a result", []conch.Message{user(big), call, res("1", big), res("2", "ok"), text("done")}, 1100, 1},
		{"keeps the pair when even it is too big", []conch.Message{user("u"), text("a"), user(big), call, res("1", big), res("2", big)}, 100, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := chooseCut(tc.msgs, tc.keep)
			if err != nil || got != tc.want {
				t.Fatalf("chooseCut = %d, %v; want %d", got, err, tc.want)
			}
			if tc.msgs[got].Role == conch.RoleTool {
				t.Errorf("cut before a tool result")
			}
		})
	}
	if _, err := chooseCut([]conch.Message{user("only")}, 10); err != errNoCut {
		t.Errorf("chooseCut(one message) err = %v, want errNoCut", err)
	}
}

func TestRequestMessagesCutsOldResults(t *testing.T) {
	a := &Agent{opts: Options{ContextWindow: 100000}}
	big := strings.Repeat("r", 50000)
	v := contextView{
		summary: conch.Summary{Text: "s"},
		msgs: []conch.Message{
			{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{{ID: "1", Name: "cat"}}},
			{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "1", Name: "cat", Content: big}},
			{Role: conch.RoleUser, Text: "now"},
			{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{{ID: "2", Name: "cat"}}},
			{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "2", Name: "cat", Content: big}},
		},
		pos: []conch.HistoryPos{{Turn: 1, Message: 5}, {Turn: 1, Message: 6}, {Turn: 2, Message: 7}, {Turn: 2}, {Turn: 2}},
	}
	got := a.requestMessages(v, 2, a.window())
	if len(got) != 6 || got[0].Role != conch.RoleUser || !strings.Contains(got[0].Text, "summarized") {
		t.Fatalf("a view starting after a summary with an assistant message needs a leading user message; got %d messages, first %+v", len(got), got[0])
	}
	if old := got[2].ToolResult.Content; len(old) > oldResultMax+100 || !strings.Contains(old, "bytes cut: "+oldResultNote) {
		t.Errorf("old result is %d bytes: %.80q", len(old), old)
	}
	if cur := got[5].ToolResult.Content; cur != big {
		t.Errorf("the current turn's result (%d bytes, under the window) was cut to %d", len(big), len(cur))
	}
	if v.msgs[1].ToolResult.Content != big {
		t.Error("requestMessages changed the view")
	}
}
