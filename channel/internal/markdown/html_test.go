package markdown

import (
	"strings"
	"testing"

	"conch/channel/internal/markdown/markdowntest"
)

func TestMatrixHTML(t *testing.T) {
	f := MatrixHTML()
	tests := []struct {
		name, md  string
		want      []string
		forbidden []string
	}{
		{"plain paragraph has no wrapper", "hello", []string{"hello"}, []string{"<p>"}},
		{"emphasis", "**b** _i_ ~~s~~", []string{"<strong>b</strong>", "<em>i</em>", "<del>s</del>"}, nil},
		{"code fence keeps language", "```python\nprint(1)\n```", []string{`<pre><code class="language-python">print(1)`}, nil},
		{"raw html is dropped", "ok <b onclick=\"x()\">b</b> <script>alert(1)</script><img src=x onerror=alert(1)>", []string{"ok"}, []string{"<script", "onerror", "onclick", "<img"}},
		{"javascript links are dropped", "[x](javascript:alert(1))", nil, []string{"javascript:"}},
		{"https links are kept", "[x](https://example.org)", []string{`<a href="https://example.org"`}, nil},
		{"tables", "| a | b |\n|---|---|\n| 1 | 2 |", []string{"<table>", "<td>1</td>"}, nil},
		{"lists keep start", "3. three\n4. four", []string{`<ol start="3">`}, nil},
		{"images are not shown", "![alt](https://example.org/x.png)", nil, []string{"<img"}},
		{"two paragraphs keep theirs", "a\n\nb", []string{"<p>a</p>", "<p>b</p>"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.HTML(tt.md)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("got %q, want it to contain %q", got, w)
				}
			}
			for _, f := range tt.forbidden {
				if strings.Contains(got, f) {
					t.Errorf("got %q, want no %q", got, f)
				}
			}
		})
	}
}

func TestEmailHTML(t *testing.T) {
	got, err := EmailHTML().HTML("hello **you**\n\n[x](javascript:alert(1)) ![pic](https://example.org/p.png)\n\n<script>x</script>")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"<p>hello <strong>you</strong></p>", `<img src="https://example.org/p.png" alt="pic"`} {
		if !strings.Contains(got, w) {
			t.Errorf("got %q, want it to contain %q", got, w)
		}
	}
	markdowntest.CheckSafeHTML(t, got, false)
}

func TestWebHTMLDropsImages(t *testing.T) {
	f := WebHTML()
	for _, md := range []string{
		"look: ![tracker](https://evil.example/p.png?u=1)",
		"![](http://evil.example/a.gif)",
		"[![badge](https://evil.example/b.svg)](https://example.org/)",
		"![ref][1]\n\n[1]: https://evil.example/r.png",
		"<img src=\"https://evil.example/raw.png\">",
		"![local](/api/dashboard)",
		"![data](data:image/png;base64,iVBORw0KGgo=)",
	} {
		got, err := f.HTML(md)
		if err != nil {
			t.Fatal(err)
		}
		markdowntest.CheckSafeHTML(t, got, true)
	}
	got, _ := f.HTML("look: ![tracker](https://evil.example/p.png)")
	if !strings.Contains(got, "tracker") || !strings.Contains(got, `href="https://evil.example/p.png"`) {
		t.Errorf("a dropped image should leave its alt text as a link: %s", got)
	}
	got, _ = f.HTML("[![badge](https://evil.example/b.svg)](https://example.org/)")
	if strings.Contains(got, "evil.example") || !strings.Contains(got, "badge") {
		t.Errorf("an image inside a link should leave its alt text only: %s", got)
	}
	got, _ = f.HTML("[link](https://example.org/)")
	if !strings.Contains(got, `rel="nofollow`) || !strings.Contains(got, `target="_blank"`) {
		t.Errorf("links: %s", got)
	}
}

// TestOneParseManyTargets: a document parsed once renders the same in
// every target as the target's own entry point.
func TestOneParseManyTargets(t *testing.T) {
	md := "# T\n\n**b** [l](https://example.org) ![i](https://example.org/i.png)\n\n- a\n- b"
	d := Parse(md)
	for _, f := range []*HTMLFormat{MatrixHTML(), EmailHTML(), WebHTML()} {
		a, _ := d.HTML(f)
		b, _ := f.HTML(md)
		if a != b || a == "" {
			t.Errorf("%s: from the parsed document %q, from the text %q", f.name, a, b)
		}
	}
	if got := strings.Join(d.Telegram(), "\n\n"); got != telegramHTML(md) {
		t.Errorf("telegram: %q", got)
	}
}
