package web

import (
	"bytes"
	"regexp"
	"strings"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	gmrenderer "github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"
)

// renderer turns a reply's Markdown into sanitised HTML: the page inserts
// only what went through the policy, never the model's raw text as HTML.
//
// Images are never rendered: an external one would tell its host that (and
// when) the page was read, with only the CSP in the way, and the host must
// not fetch arbitrary addresses on the page's behalf either. An image
// becomes a link to its address labelled with its alt text (just the text
// inside another link); raw HTML is omitted by goldmark, and the policy
// allows no <img> as a second line.
type renderer struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
}

func newRenderer() *renderer {
	p := bluemonday.UGCPolicy()
	p.AllowAttrs("class").Matching(regexp.MustCompile(`^language-[A-Za-z0-9_+#.-]{1,40}$`)).OnElements("code")
	p.RequireNoFollowOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	md := goldmark.New(goldmark.WithExtensions(extension.GFM),
		goldmark.WithRendererOptions(gmrenderer.WithNodeRenderers(util.Prioritized(imageAsLink{}, 100))))
	return &renderer{md: md, policy: p}
}

// HTML renders markdown; on a rendering failure the text is shown escaped.
func (r *renderer) HTML(markdown string) string {
	var buf bytes.Buffer
	if err := r.md.Convert([]byte(markdown), &buf); err != nil {
		return "<pre>" + htmlEscape(markdown) + "</pre>"
	}
	return strings.TrimSpace(imgTag.ReplaceAllString(r.policy.Sanitize(buf.String()), ""))
}

// imgTag finds an <img> the policy let through (none should be left).
var imgTag = regexp.MustCompile(`(?i)<img\b[^>]*>`)

// imageAsLink renders Markdown images as links (see renderer).
type imageAsLink struct{}

func (imageAsLink) RegisterFuncs(reg gmrenderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindImage, renderImageAsLink)
}

func renderImageAsLink(w util.BufWriter, _ []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	n := node.(*ast.Image)
	inLink := false
	for p := n.Parent(); p != nil; p = p.Parent() {
		if p.Kind() == ast.KindLink || p.Kind() == ast.KindImage || p.Kind() == ast.KindAutoLink {
			inLink = true
			break
		}
	}
	dest := util.URLEscape(n.Destination, true)
	link := !inLink && !html.IsDangerousURL(dest) && (bytes.HasPrefix(dest, []byte("https://")) || bytes.HasPrefix(dest, []byte("http://")))
	if entering {
		if link {
			_, _ = w.WriteString(`<a href="`)
			_, _ = w.Write(util.EscapeHTML(dest))
			_, _ = w.WriteString(`">`)
		}
		if n.FirstChild() == nil {
			_, _ = w.WriteString("image")
		}
		return ast.WalkContinue, nil // the alt text, rendered as text
	}
	if link {
		_, _ = w.WriteString("</a>")
	}
	return ast.WalkContinue, nil
}
