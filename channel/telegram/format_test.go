package telegram

import (
	"strings"
	"testing"

	tgfake "conch/internal/testenv/telegram"
)

func TestRenderHTML(t *testing.T) {
	r := newRenderer()
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
	} {
		got := strings.Join(r.blocks(tc.md), "\n\n")
		if got != tc.want {
			t.Errorf("render %q:\n got %q\nwant %q", tc.md, got, tc.want)
		}
		if _, _, err := tgfake.ParseHTML(got); err != nil {
			t.Errorf("render %q: Telegram would refuse %q: %v", tc.md, got, err)
		}
	}
}

// TestSplitKeepsMarkupValid: whatever the Markdown and the limit, every
// message parses as Telegram HTML, fits the limit, and together they show
// all the text.
func TestSplitKeepsMarkupValid(t *testing.T) {
	r := newRenderer()
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
	for _, limit := range []int{64, 300, maxMessageLen} {
		for i, md := range inputs {
			msgs := r.messages(md, limit)
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
			want, _, _ := tgfake.ParseHTML(strings.Join(r.blocks(md), "\n\n"))
			if squash(got.String()) != squash(want) {
				t.Fatalf("input %d limit %d: the parts do not add up to the text\n got %.200q\nwant %.200q", i, limit, squash(got.String()), squash(want))
			}
		}
	}
}

func squash(s string) string { return strings.Join(strings.Fields(s), "") }

func TestPlainTextAndSplitPlain(t *testing.T) {
	h := `<b>Hi</b> &amp; <a href="https://x.org/?a=1&amp;b=2">x</a> <a href="https://y.org">https://y.org</a>`
	if got := plainText(h); got != "Hi & x (https://x.org/?a=1&b=2) https://y.org" {
		t.Fatalf("plainText %q", got)
	}
	parts := splitPlain(strings.Repeat("abc def\n", 1000), 100)
	for _, p := range parts {
		if utf16Len(p) > 100 {
			t.Fatalf("part of %d units", utf16Len(p))
		}
	}
	if len(parts) < 80 {
		t.Fatalf("%d parts", len(parts))
	}
}

func TestSingleKeepsTheEnd(t *testing.T) {
	r := newRenderer()
	var b strings.Builder
	for i := range 500 {
		b.WriteString("⚙ step " + strings.Repeat("x", 20) + " " + string(rune('a'+i%26)) + "\n\n")
	}
	b.WriteString("⚙ the last step")
	s := r.single(b.String(), maxMessageLen)
	plain, _, err := tgfake.ParseHTML(s)
	if err != nil || tgfake.UTF16Len(plain) > maxMessageLen || !strings.HasSuffix(plain, "the last step") || !strings.HasPrefix(plain, "…") {
		t.Fatalf("single: %d chars, err %v, %.80q…%.40q", tgfake.UTF16Len(plain), err, plain, plain[max(0, len(plain)-40):])
	}
}

func TestValidToken(t *testing.T) {
	for tok, want := range map[string]bool{
		"123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11": true,
		"123456:short":           false,
		"abc:ABCDEFGHIJKLMN":     false,
		"123456":                 false,
		"123456:has space in it": false,
	} {
		if ValidToken(tok) != want {
			t.Errorf("ValidToken(%q) = %v", tok, !want)
		}
	}
}
