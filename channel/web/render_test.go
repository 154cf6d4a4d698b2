package web

import (
	"strings"
	"testing"
)

// Images in a reply are never loaded: an external one would tell its host
// that (and when) the page was read, and only the CSP stood in the way. The
// sanitiser drops them; the address stays as a link a person may follow.
func TestRenderDropsImages(t *testing.T) {
	r := newRenderer()
	for _, md := range []string{
		"look: ![tracker](https://evil.example/p.png?u=1)",
		"![](http://evil.example/a.gif)",
		"[![badge](https://evil.example/b.svg)](https://example.org/)",
		"![ref][1]\n\n[1]: https://evil.example/r.png",
		"<img src=\"https://evil.example/raw.png\">",
		"![local](/api/dashboard)",
		"![data](data:image/png;base64,iVBORw0KGgo=)",
	} {
		got := r.HTML(md)
		if strings.Contains(strings.ToLower(got), "<img") {
			t.Errorf("%q rendered an image: %s", md, got)
		}
	}
	got := r.HTML("look: ![tracker](https://evil.example/p.png)")
	if !strings.Contains(got, "tracker") || !strings.Contains(got, `href="https://evil.example/p.png"`) {
		t.Errorf("a dropped image should leave its alt text as a link: %s", got)
	}
	if got := r.HTML("**bold** [link](https://example.org/)"); !strings.Contains(got, "<strong>bold</strong>") || !strings.Contains(got, `href="https://example.org/"`) {
		t.Errorf("ordinary Markdown: %s", got)
	}
}
