package markdown

import (
	"fmt"
	"html"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
)

// TelegramMaxText is Telegram's limit on a message's text after entity
// parsing: 4096 characters, counted (like entity offsets) in UTF-16 units.
const TelegramMaxText = 4096

// Telegram renders the document as top-level blocks of the small HTML
// subset Telegram's parse_mode=HTML accepts: b, i, s, u, code, pre, a,
// blockquote, and the four named entities &lt; &gt; &amp; &quot;.
// Everything else (headings, lists, tables, raw HTML) becomes text in those
// terms. Blocks that render to nothing are left out.
func (d *Doc) Telegram() []string {
	w := &telegramWriter{src: d.src}
	var out []string
	for n := d.root.FirstChild(); n != nil; n = n.NextSibling() {
		if s := strings.Trim(w.block(n, 0, false), "\n"); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// TelegramEscape escapes text for Telegram HTML.
func TelegramEscape(s string) string { return escapeText(s) }

// TelegramLinkable reports whether Telegram accepts u as a link target.
func TelegramLinkable(u string) bool { return safeURL(u) }

// telegramWriter writes Telegram HTML from the syntax tree.
type telegramWriter struct {
	src []byte
}

// The escapers are built once (a Replacer is safe for concurrent use);
// built per call they were a large share of a turn's allocations.
var (
	textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	attrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
)

func escapeText(s string) string { return textEscaper.Replace(s) }

func escapeAttr(s string) string { return attrEscaper.Replace(s) }

// safeURL reports whether Telegram accepts u as a link target.
func safeURL(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	switch strings.ToLower(p.Scheme) {
	case "http", "https":
		return p.Host != ""
	case "tg", "mailto":
		return true
	}
	return false
}

func (w *telegramWriter) lines(n ast.Node) string { return nodeLines(w.src, n) }

// block renders one block node. depth is the list nesting; quoted is set
// inside a blockquote (Telegram does not nest quotes).
func (w *telegramWriter) block(n ast.Node, depth int, quoted bool) string {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		return w.inline(n)
	case *ast.Heading:
		return "<b>" + w.inline(n) + "</b>"
	case *ast.ThematicBreak:
		return "———"
	case *ast.FencedCodeBlock:
		code := strings.TrimRight(w.lines(n), "\n")
		lang := string(n.Language(w.src))
		if lang != "" && isLanguage(lang) {
			return `<pre><code class="language-` + escapeAttr(lang) + `">` + escapeText(code) + "</code></pre>"
		}
		return "<pre>" + escapeText(code) + "</pre>"
	case *ast.CodeBlock:
		return "<pre>" + escapeText(strings.TrimRight(w.lines(n), "\n")) + "</pre>"
	case *ast.HTMLBlock:
		s := w.lines(n)
		if n.HasClosure() {
			s += string(n.ClosureLine.Value(w.src))
		}
		return escapeText(strings.TrimRight(s, "\n"))
	case *ast.Blockquote:
		var parts []string
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			parts = append(parts, w.block(c, depth, true))
		}
		inner := strings.Join(parts, "\n\n")
		if quoted {
			return inner
		}
		return "<blockquote>" + inner + "</blockquote>"
	case *ast.List:
		var items []string
		num := n.Start
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			marker := "• "
			if n.IsOrdered() {
				marker = fmt.Sprintf("%d. ", num)
				num++
			}
			var parts []string
			for cc := c.FirstChild(); cc != nil; cc = cc.NextSibling() {
				parts = append(parts, w.block(cc, depth+1, quoted))
			}
			items = append(items, strings.Repeat("   ", depth)+marker+strings.Join(parts, "\n"))
		}
		if n.IsTight {
			return strings.Join(items, "\n")
		}
		return strings.Join(items, "\n\n")
	case *east.Table:
		return w.table(n)
	}
	// Unknown blocks: their children, or their text.
	if n.HasChildren() {
		var parts []string
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			parts = append(parts, w.block(c, depth, quoted))
		}
		return strings.Join(parts, "\n")
	}
	return escapeText(w.lines(n))
}

func isLanguage(s string) bool {
	if len(s) > 40 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("+#._-", r)) {
			return false
		}
	}
	return true
}

// table renders a GFM table as monospaced text.
func (w *telegramWriter) table(t *east.Table) string {
	var rows [][]string
	for r := t.FirstChild(); r != nil; r = r.NextSibling() {
		var cells []string
		for c := r.FirstChild(); c != nil; c = c.NextSibling() {
			cells = append(cells, strings.TrimSpace(TelegramPlain(w.inline(c))))
		}
		rows = append(rows, cells)
	}
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for ri, r := range rows {
		for i, c := range r {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)))
			}
		}
		b.WriteByte('\n')
		if ri == 0 {
			for i, wd := range widths {
				if i > 0 {
					b.WriteString("-+-")
				}
				b.WriteString(strings.Repeat("-", wd))
			}
			b.WriteByte('\n')
		}
	}
	return "<pre>" + escapeText(strings.TrimRight(b.String(), "\n")) + "</pre>"
}

// inline renders the inline children of n.
func (w *telegramWriter) inline(n ast.Node) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		w.inlineNode(&b, c)
	}
	return b.String()
}

func (w *telegramWriter) inlineNode(b *strings.Builder, n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		b.WriteString(escapeText(string(n.Segment.Value(w.src))))
		if n.SoftLineBreak() || n.HardLineBreak() {
			b.WriteByte('\n')
		}
	case *ast.String:
		b.WriteString(escapeText(string(n.Value)))
	case *ast.CodeSpan:
		code := codeSpanText(w.src, n)
		b.WriteString("<code>" + escapeText(code) + "</code>")
	case *ast.Emphasis:
		tag := "i"
		if n.Level >= 2 {
			tag = "b"
		}
		b.WriteString("<" + tag + ">" + w.inline(n) + "</" + tag + ">")
	case *east.Strikethrough:
		b.WriteString("<s>" + w.inline(n) + "</s>")
	case *ast.Link:
		dest := string(n.Destination)
		inner := w.inline(n)
		if !safeURL(dest) {
			b.WriteString(inner)
			return
		}
		if inner == "" {
			inner = escapeText(dest)
		}
		b.WriteString(`<a href="` + escapeAttr(dest) + `">` + inner + "</a>")
	case *ast.Image:
		dest := string(n.Destination)
		alt := w.inline(n)
		if alt == "" {
			alt = "image"
		}
		if safeURL(dest) {
			b.WriteString(`<a href="` + escapeAttr(dest) + `">` + alt + "</a>")
			return
		}
		b.WriteString(alt)
	case *ast.AutoLink:
		// Telegram links URLs and addresses in plain text by itself.
		b.WriteString(escapeText(string(n.Label(w.src))))
	case *ast.RawHTML:
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			b.WriteString(escapeText(string(seg.Value(w.src))))
		}
	case *east.TaskCheckBox:
		if n.IsChecked {
			b.WriteString("☑ ")
		} else {
			b.WriteString("☐ ")
		}
	default:
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			w.inlineNode(b, c)
		}
	}
}

// TelegramPlain is what Telegram would show for the Telegram HTML h, as
// text without markup; links keep their target in parentheses. It is the
// fallback when Telegram refuses the HTML.
func TelegramPlain(h string) string {
	var b strings.Builder
	var hrefs []string
	for _, t := range tokenize(h) {
		switch {
		case t.open && t.tag == "a":
			href := ""
			if i := strings.Index(t.s, `href="`); i >= 0 {
				rest := t.s[i+len(`href="`):]
				if j := strings.IndexByte(rest, '"'); j >= 0 {
					href = html.UnescapeString(rest[:j])
				}
			}
			hrefs = append(hrefs, href)
			b.WriteString("\x00") // marks where the link text starts
		case t.close && t.tag == "a":
			if n := len(hrefs); n > 0 {
				href := hrefs[n-1]
				hrefs = hrefs[:n-1]
				s := b.String()
				k := strings.LastIndexByte(s, 0)
				label := s[k+1:]
				b.Reset()
				b.WriteString(s[:k])
				b.WriteString(label)
				if href != "" && href != label {
					b.WriteString(" (" + href + ")")
				}
			}
		case t.open || t.close:
		default:
			b.WriteString(html.UnescapeString(t.s))
		}
	}
	return strings.ReplaceAll(b.String(), "\x00", "")
}
