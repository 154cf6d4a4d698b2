package markdown

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplitSource(t *testing.T) {
	para := func(n int, c string) string { return strings.Repeat(c, n) }
	fence := "```go\n" + strings.Repeat("line of code\n", 50) + "```"
	tests := []struct {
		name  string
		text  string
		limit int
		want  int // number of parts
	}{
		{"short", "hello", 100, 1},
		{"paragraphs pack", para(40, "a") + "\n\n" + para(40, "b") + "\n\n" + para(40, "c"), 90, 2},
		{"fence split and reopened", "intro\n\n" + fence, 200, 5},
		{"one long line", para(250, "x"), 100, 3},
		{"multibyte never cut", strings.Repeat("é", 120), 101, 3},
		{"the end of a cut block takes the next", para(150, "x") + "\n\nshort", 100, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts := SplitSource(tt.text, tt.limit)
			if len(parts) != tt.want {
				t.Fatalf("parts: got %d %q, want %d", len(parts), parts, tt.want)
			}
			for i, p := range parts {
				if len(p) > tt.limit {
					t.Errorf("part %d: got %d bytes, want at most %d", i, len(p), tt.limit)
				}
				if !utf8.ValidString(p) {
					t.Errorf("part %d is not valid UTF-8", i)
				}
				if strings.Count(p, "```")%2 != 0 {
					t.Errorf("part %d has an unbalanced fence: %q", i, p)
				}
			}
		})
	}
}

func TestSplitSourceKeepsEveryCodeLine(t *testing.T) {
	var b strings.Builder
	b.WriteString("~~~\n")
	for i := range 400 {
		b.WriteString(strings.Repeat("z", i%70) + "\n")
	}
	b.WriteString("~~~")
	parts := SplitSource(b.String(), 1000)
	var lines []string
	for _, p := range parts {
		if !strings.HasPrefix(p, "~~~\n") || !strings.HasSuffix(p, "\n~~~") {
			t.Fatalf("part not wrapped in the fence: %q", p[:20])
		}
		lines = append(lines, strings.Split(strings.TrimSuffix(strings.TrimPrefix(p, "~~~\n"), "\n~~~"), "\n")...)
	}
	if len(lines) != 400 {
		t.Fatalf("code lines after split: got %d, want 400", len(lines))
	}
}

// A fence line too long to repeat around each piece is cut as plain lines,
// keeping all of its text.
func TestSplitSourceLongFenceLine(t *testing.T) {
	text := "```" + strings.Repeat("x", 90) + "\n" + strings.Repeat("code\n", 40) + "```"
	parts := SplitSource(text, 100)
	if got, want := squash(strings.Join(parts, "")), squash(text); got != want {
		t.Fatalf("parts do not add up to the text:\n got %q\nwant %q", got, want)
	}
}

func TestTruncate(t *testing.T) {
	got := Truncate(strings.Repeat("ü", 100), 50)
	if len(got) > 50 || !utf8.ValidString(got) || !strings.HasSuffix(got, "(truncated)") {
		t.Fatalf("got %q (%d bytes), want ≤ 50 valid bytes ending in the mark", got, len(got))
	}
	if got := Truncate("short", 50); got != "short" {
		t.Fatalf("got %q, want it unchanged", got)
	}
}
