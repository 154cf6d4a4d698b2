package web

import (
	"bytes"
	"regexp"
	"strings"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// renderer turns a reply's Markdown into sanitised HTML: the page inserts
// only what went through the policy, never the model's raw text as HTML.
type renderer struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
}

func newRenderer() *renderer {
	p := bluemonday.UGCPolicy()
	p.AllowAttrs("class").Matching(regexp.MustCompile(`^language-[A-Za-z0-9_+#.-]{1,40}$`)).OnElements("code")
	p.RequireNoFollowOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	return &renderer{md: goldmark.New(goldmark.WithExtensions(extension.GFM)), policy: p}
}

// HTML renders markdown; on a rendering failure the text is shown escaped.
func (r *renderer) HTML(markdown string) string {
	var buf bytes.Buffer
	if err := r.md.Convert([]byte(markdown), &buf); err != nil {
		return "<pre>" + htmlEscape(markdown) + "</pre>"
	}
	return strings.TrimSpace(r.policy.Sanitize(buf.String()))
}
