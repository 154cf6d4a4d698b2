package markdown

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSlackMrkdwn(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"**bold** and *it* and ~~gone~~", "*bold* and _it_ and ~gone~"},
		{"# Title\n\ntext", "*Title*\n\ntext"},
		{"a < b & c > d", "a &lt; b &amp; c &gt; d"},
		{"[site](https://example.org/?a=1&b=2)", "<https://example.org/?a=1&b=2|site>"},
		{"[bad](javascript:alert(1))", "bad"},
		{"<https://example.org>", "<https://example.org|https://example.org>"},
		{"- one\n- two\n  1. sub", "• one\n• two\n    1. sub"},
		{"> quoted\n> lines", "> quoted\n> lines"},
		{"```go\nif a < b {}\n```", "```\nif a &lt; b {}\n```"},
		{"`x|y`", "`x|y`"},
		{"| a | bb |\n|---|---|\n| 1 | 2 |", "```\na | bb\n--+---\n1 | 2 \n```"},
	} {
		if got := strings.Join(SlackMessages(tc.in, SlackMaxText), "\n---\n"); got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestSplitSlackKeepsCodeBlocksAndLimits(t *testing.T) {
	code := "```\n" + strings.Repeat("line of code <here>\n", 600) + "```"
	parts := SlackMessages("intro\n\n"+code, SlackMaxText)
	if len(parts) < 3 {
		t.Fatalf("%d parts", len(parts))
	}
	for i, p := range parts {
		if n := utf8.RuneCountInString(p); n > SlackMaxText {
			t.Fatalf("part %d has %d characters", i, n)
		}
		if i > 0 && (!strings.HasPrefix(p, "```\n") || !strings.HasSuffix(p, "```")) {
			t.Fatalf("part %d is not preformatted: %q…", i, p[:40])
		}
		if strings.Contains(p, "&l\n") || strings.HasSuffix(strings.TrimSuffix(p, "\n```"), "&") {
			t.Fatalf("part %d cuts an escape", i)
		}
	}
	if s := SlackSingle(strings.Repeat("word ", 2000), SlackMaxText); utf8.RuneCountInString(s) > SlackMaxText || !strings.HasPrefix(s, "…\n") {
		t.Fatalf("single: %d characters", utf8.RuneCountInString(s))
	}
}
