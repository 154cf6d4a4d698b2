package markdown

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"
)

// HTMLFormat is one target's HTML: goldmark's HTML renderer (raw HTML in
// the Markdown is omitted, never passed through) followed by the target's
// sanitising policy. A format is safe for concurrent use.
type HTMLFormat struct {
	name     string
	r        renderer.Renderer
	policy   *bluemonday.Policy
	unwrap   bool // a lone paragraph loses its <p> wrapper
	noImages bool // any <img> the policy let through is removed
}

// languageClass is the class goldmark gives a fenced code block's <code>.
var languageClass = regexp.MustCompile(`^language-[A-Za-z0-9_+#.-]{1,40}$`)

func htmlRenderer(opts ...renderer.Option) renderer.Renderer {
	return goldmark.New(goldmark.WithExtensions(extension.GFM), goldmark.WithRendererOptions(opts...)).Renderer()
}

// MatrixHTML is formatted_body for Matrix: the tags and attributes the
// spec recommends clients accept (client-server API, "m.room.message
// msgtypes", HTML subset), without images; a lone paragraph has no
// wrapper.
func MatrixHTML() *HTMLFormat {
	p := bluemonday.NewPolicy()
	p.AllowElements("font", "del", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "p", "a",
		"ul", "ol", "sup", "sub", "li", "b", "i", "u", "strong", "em", "s", "strike", "code", "hr", "br",
		"div", "table", "thead", "tbody", "tr", "th", "td", "caption", "pre", "span", "details", "summary")
	p.AllowAttrs("href").OnElements("a")
	p.AllowURLSchemes("http", "https", "ftp", "mailto", "magnet", "matrix")
	p.RequireParseableURLs(true)
	p.AllowAttrs("start").Matching(regexp.MustCompile(`^[0-9]{1,9}$`)).OnElements("ol")
	p.AllowAttrs("class").Matching(languageClass).OnElements("code")
	p.AllowAttrs("align").Matching(regexp.MustCompile(`^(left|right|center)$`)).OnElements("th", "td")
	p.AllowAttrs("checked", "disabled", "type").OnElements("input")
	p.AllowElements("input")
	return &HTMLFormat{name: "matrix", r: htmlRenderer(), policy: p, unwrap: true}
}

// EmailHTML is the HTML part of a reply mail: bluemonday's policy for
// user content (images included: mail clients ask before loading them).
func EmailHTML() *HTMLFormat {
	return &HTMLFormat{name: "email", r: htmlRenderer(), policy: bluemonday.UGCPolicy()}
}

// WebHTML is a reply on the web chat, which inserts only what went through
// the policy. Images are never rendered: an external one would tell its
// host that (and when) the page was read, with only the CSP in the way, and
// the host must not fetch arbitrary addresses on the page's behalf either.
// An image becomes a link to its address labelled with its alt text (just
// the text inside another link); an <img> that got past the policy is
// removed as a second line. Links get rel=nofollow, and target=_blank when
// fully qualified.
func WebHTML() *HTMLFormat {
	p := bluemonday.UGCPolicy()
	p.AllowAttrs("class").Matching(languageClass).OnElements("code")
	p.RequireNoFollowOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	r := htmlRenderer(renderer.WithNodeRenderers(util.Prioritized(imageAsLink{}, 100)))
	return &HTMLFormat{name: "web", r: r, policy: p, noImages: true}
}

// HTML renders markdown in the format f.
func (f *HTMLFormat) HTML(markdown string) (string, error) { return Parse(markdown).HTML(f) }

// HTML renders the document in the format f and sanitises the result.
func (d *Doc) HTML(f *HTMLFormat) (string, error) {
	var buf bytes.Buffer
	if err := f.r.Render(&buf, d.src, d.root); err != nil {
		return "", fmt.Errorf("render markdown as %s html: %w", f.name, err)
	}
	out := strings.TrimSpace(f.policy.Sanitize(buf.String()))
	if f.noImages {
		out = strings.TrimSpace(imgTag.ReplaceAllString(out, ""))
	}
	if f.unwrap && strings.HasPrefix(out, "<p>") && strings.HasSuffix(out, "</p>") && strings.Count(out, "<p>") == 1 {
		out = out[len("<p>") : len(out)-len("</p>")]
	}
	return out, nil
}

// imgTag finds an <img> the policy let through.
var imgTag = regexp.MustCompile(`(?i)<img\b[^>]*>`)

// imageAsLink renders Markdown images as links (see WebHTML).
type imageAsLink struct{}

func (imageAsLink) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
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
