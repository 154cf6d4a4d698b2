package web

import "conch/channel/internal/markdown"

// renderer turns a reply's Markdown into sanitised HTML: the page inserts
// only what went through the policy, never the model's raw text as HTML.
// Images are never rendered (channel/internal/markdown's WebHTML: an image
// becomes a link to its address, and no <img> gets through).
type renderer struct {
	html *markdown.HTMLFormat
}

func newRenderer() *renderer { return &renderer{html: markdown.WebHTML()} }

// HTML renders markdown; on a rendering failure the text is shown escaped.
func (r *renderer) HTML(md string) string {
	out, err := r.html.HTML(md)
	if err != nil {
		return "<pre>" + htmlEscape(md) + "</pre>"
	}
	return out
}
