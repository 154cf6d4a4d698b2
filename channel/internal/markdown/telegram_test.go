package markdown

import (
	"strings"
	"testing"

	tgfake "conch/internal/testenv/telegram"
)

func telegramHTML(md string) string { return strings.Join(Parse(md).Telegram(), "\n\n") }

func TestTelegramHTML(t *testing.T) {
	for _, tc := range []struct{ md, want string }{
		{"plain & <b>raw</b>", "plain &amp; &lt;b&gt;raw&lt;/b&gt;"},
		{"**bold** _it_ ~~gone~~ `x<y`", "<b>bold</b> <i>it</i> <s>gone</s> <code>x&lt;y</code>"},
		{"# Title\n\ntext", "<b>Title</b>\n\ntext"},
		{"[site](https://example.org/?a=1&b=\"2\")", `<a href="https://example.org/?a=1&amp;b=&quot;2&quot;">site</a>`},
		{"[bad](javascript:alert(1))", "bad"},
		{"```go\nif a < b {}\n```", `<pre><code class="language-go">if a &lt; b {}</code></pre>`},
		{"    indented()", "<pre>indented()</pre>"},
		{"> quoted\n>\n> > nested", "<blockquote>quoted\n\nnested</blockquote>"},
		{"- one\n- two\n  1. sub", "• one\n• two\n   1. sub"},
		{"- [x] done\n- [ ] todo", "• ☑ done\n• ☐ todo"},
		{"| a | bb |\n|---|---|\n| 1 | 2 |", "<pre>a | bb\n--+---\n1 | 2</pre>"},
		{"<script>alert(1)</script> after", "&lt;script&gt;alert(1)&lt;/script&gt; after"},
		{"line one\nline two", "line one\nline two"},
		{"---", "———"},
		{"bad \xff byte", "bad \uFFFD byte"},
	} {
		got := telegramHTML(tc.md)
		if got != tc.want {
			t.Errorf("render %q:\n got %q\nwant %q", tc.md, got, tc.want)
		}
		if _, _, err := tgfake.ParseHTML(got); err != nil {
			t.Errorf("render %q: Telegram would refuse %q: %v", tc.md, got, err)
		}
	}
}

// TestSplitTelegramKeepsMarkupValid: whatever the Markdown and the limit,
// every message parses as Telegram HTML, fits the limit, and together they
// show all the text.
func TestSplitTelegramKeepsMarkupValid(t *testing.T) {
	long := strings.Repeat("word ", 300)
	inputs := []string{
		"**" + long + "**",
		"_a " + long + "_ and [a link " + long + "](https://example.org)",
		"```\n" + strings.Repeat("code line <&>\n", 200) + "```",
		"> " + long + "\n\nafter",
		strings.Repeat("- item **bold** `code`\n", 120),
		"emoji 😀 " + strings.Repeat("😀", 600),
		strings.Repeat("x", 5000),
		"para one\n\n" + strings.Repeat("para *two* ", 100) + "\n\n```py\nprint(1)\n```",
	}
	for _, limit := range []int{64, 300, TelegramMaxText} {
		for i, md := range inputs {
			msgs := SplitTelegram(Parse(md).Telegram(), limit)
			var got strings.Builder
			for j, m := range msgs {
				plain, _, err := tgfake.ParseHTML(m)
				if err != nil {
					t.Fatalf("input %d limit %d part %d: invalid HTML %q: %v", i, limit, j, m, err)
				}
				if n := tgfake.UTF16Len(plain); n > limit {
					t.Fatalf("input %d limit %d part %d: %d characters", i, limit, j, n)
				}
				got.WriteString(plain)
			}
			want, _, _ := tgfake.ParseHTML(telegramHTML(md))
			if squash(got.String()) != squash(want) {
				t.Fatalf("input %d limit %d: the parts do not add up to the text\n got %.200q\nwant %.200q", i, limit, squash(got.String()), squash(want))
			}
		}
	}
}

func squash(s string) string { return strings.Join(strings.Fields(s), "") }

func TestTelegramPlainAndSplitPlain(t *testing.T) {
	h := `<b>Hi</b> &amp; <a href="https://x.org/?a=1&amp;b=2">x</a> <a href="https://y.org">https://y.org</a>`
	if got := TelegramPlain(h); got != "Hi & x (https://x.org/?a=1&b=2) https://y.org" {
		t.Fatalf("TelegramPlain %q", got)
	}
	parts := SplitPlain(strings.Repeat("abc def\n", 1000), 100)
	for _, p := range parts {
		if utf16Len(p) > 100 {
			t.Fatalf("part of %d units", utf16Len(p))
		}
	}
	if len(parts) < 80 {
		t.Fatalf("%d parts", len(parts))
	}
}
