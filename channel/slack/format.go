package slack

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// maxMessageLen is where long answers are split. Slack truncates a
// message's text past 40,000 characters and recommends at most 4,000 for
// readability (a longer message is collapsed behind "Show more"); 4,000 it
// is.
const maxMessageLen = 4000

// renderer turns conch's Markdown into Slack's mrkdwn: *bold*, _italic_,
// ~strike~, `code`, ```pre```, <url|label>, "> " quotes, and the three
// escapes &amp; &lt; &gt;. Headings become bold lines, lists "•" or
// numbered lines, tables a preformatted block.
type renderer struct {
	md goldmark.Markdown
}

func newRenderer() *renderer {
	return &renderer{md: goldmark.New(goldmark.WithExtensions(extension.GFM))}
}

// blocks renders Markdown as top-level mrkdwn blocks, in order.
func (r *renderer) blocks(markdown string) []string {
	src := []byte(strings.ToValidUTF8(markdown, "\uFFFD"))
	doc := r.md.Parser().Parse(text.NewReader(src))
	w := &writer{src: src}
	var out []string
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		if s := strings.Trim(w.block(n, 0), "\n"); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// messages renders Markdown into messages of at most limit characters.
func (r *renderer) messages(markdown string, limit int) []string {
	parts := pack(r.blocks(markdown), limit)
	if len(parts) == 0 && strings.TrimSpace(markdown) != "" {
		parts = splitText(escape(markdown), limit)
	}
	return parts
}

// single renders Markdown as one message; if it is too long its end is
// kept (progress grows at the bottom) behind an ellipsis.
func (r *renderer) single(markdown string, limit int) string {
	parts := r.messages(markdown, limit-2)
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return "…\n" + parts[len(parts)-1]
}

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func escape(s string) string { return escaper.Replace(s) }

func safeURL(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	switch strings.ToLower(p.Scheme) {
	case "http", "https", "mailto":
		return !strings.ContainsAny(u, "<>| \n")
	}
	return false
}

type writer struct{ src []byte }

func (w *writer) lines(n ast.Node) string {
	var b strings.Builder
	l := n.Lines()
	for i := 0; i < l.Len(); i++ {
		seg := l.At(i)
		b.Write(seg.Value(w.src))
	}
	return b.String()
}

func (w *writer) block(n ast.Node, depth int) string {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		return w.inline(n)
	case *ast.Heading:
		return "*" + strings.Trim(w.inline(n), "*") + "*"
	case *ast.ThematicBreak:
		return "———"
	case *ast.FencedCodeBlock, *ast.CodeBlock:
		return "```\n" + escape(strings.TrimRight(w.lines(n), "\n")) + "\n```"
	case *ast.HTMLBlock:
		s := w.lines(n)
		if n.HasClosure() {
			s += string(n.ClosureLine.Value(w.src))
		}
		return escape(strings.TrimRight(s, "\n"))
	case *ast.Blockquote:
		var parts []string
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			parts = append(parts, w.block(c, depth))
		}
		lines := strings.Split(strings.Join(parts, "\n\n"), "\n")
		for i, l := range lines {
			lines[i] = "> " + strings.TrimPrefix(l, "> ")
		}
		return strings.Join(lines, "\n")
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
				parts = append(parts, w.block(cc, depth+1))
			}
			items = append(items, strings.Repeat("    ", depth)+marker+strings.Join(parts, "\n"))
		}
		if n.IsTight {
			return strings.Join(items, "\n")
		}
		return strings.Join(items, "\n\n")
	case *east.Table:
		return w.table(n)
	}
	if n.HasChildren() {
		var parts []string
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			parts = append(parts, w.block(c, depth))
		}
		return strings.Join(parts, "\n")
	}
	return escape(w.lines(n))
}

// table is a preformatted block with padded columns (mrkdwn has no tables).
func (w *writer) table(t *east.Table) string {
	var rows [][]string
	for r := t.FirstChild(); r != nil; r = r.NextSibling() {
		var cells []string
		for c := r.FirstChild(); c != nil; c = c.NextSibling() {
			cells = append(cells, plainMrkdwn(w.inline(c)))
		}
		rows = append(rows, cells)
	}
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			for len(widths) <= i {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	b.WriteString("```\n")
	for ri, r := range rows {
		for i, c := range r {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(c + strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)))
		}
		b.WriteString("\n")
		if ri == 0 {
			for i, wd := range widths {
				if i > 0 {
					b.WriteString("-+-")
				}
				b.WriteString(strings.Repeat("-", wd))
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("```")
	return b.String()
}

func (w *writer) inline(n ast.Node) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		w.inlineNode(&b, c)
	}
	return b.String()
}

func (w *writer) inlineNode(b *strings.Builder, n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		b.WriteString(escape(string(n.Segment.Value(w.src))))
		if n.SoftLineBreak() || n.HardLineBreak() {
			b.WriteByte('\n')
		}
	case *ast.String:
		b.WriteString(escape(string(n.Value)))
	case *ast.CodeSpan:
		var code strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if t, ok := c.(*ast.Text); ok {
				code.Write(t.Segment.Value(w.src))
			} else if s, ok := c.(*ast.String); ok {
				code.Write(s.Value)
			}
		}
		b.WriteString("`" + escape(strings.ReplaceAll(code.String(), "`", "'")) + "`")
	case *ast.Emphasis:
		mark := "_"
		if n.Level >= 2 {
			mark = "*"
		}
		b.WriteString(mark + w.inline(n) + mark)
	case *east.Strikethrough:
		b.WriteString("~" + w.inline(n) + "~")
	case *ast.Link:
		dest := string(n.Destination)
		inner := plainMrkdwn(w.inline(n))
		if !safeURL(dest) {
			b.WriteString(escape(inner))
			return
		}
		if inner == "" || inner == dest {
			b.WriteString("<" + dest + ">")
			return
		}
		b.WriteString("<" + dest + "|" + escape(strings.ReplaceAll(inner, "|", "¦")) + ">")
	case *ast.Image:
		dest := string(n.Destination)
		alt := plainMrkdwn(w.inline(n))
		if alt == "" {
			alt = "image"
		}
		if safeURL(dest) {
			b.WriteString("<" + dest + "|" + escape(alt) + ">")
			return
		}
		b.WriteString(escape(alt))
	case *ast.AutoLink:
		u := string(n.URL(w.src))
		if n.AutoLinkType == ast.AutoLinkEmail && !strings.HasPrefix(u, "mailto:") {
			u = "mailto:" + u
		}
		if safeURL(u) {
			b.WriteString("<" + u + "|" + escape(string(n.Label(w.src))) + ">")
			return
		}
		b.WriteString(escape(string(n.Label(w.src))))
	case *ast.RawHTML:
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			b.WriteString(escape(string(seg.Value(w.src))))
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

var (
	linkMarkup = regexp.MustCompile(`<([^<>|]+)\|([^<>]*)>`)
	bareLink   = regexp.MustCompile(`<([^<>|]+)>`)
)

// plainMrkdwn strips mrkdwn's markup (the plain fallback): links become
// "label (url)", the markers of bold, italic, strike and code go; the
// escapes stay (Slack needs them in plain text too).
func plainMrkdwn(s string) string {
	s = linkMarkup.ReplaceAllString(s, "$2 ($1)")
	s = bareLink.ReplaceAllString(s, "$1")
	s = strings.ReplaceAll(s, "```", "")
	return strings.NewReplacer("*", "", "_", "", "~", "", "`", "").Replace(s)
}

// pack joins blocks into messages of at most limit characters, splitting a
// block that alone is too long (a code block is closed and reopened).
func pack(blocks []string, limit int) []string {
	var out []string
	cur := ""
	flush := func() {
		if cur != "" {
			out = append(out, cur)
			cur = ""
		}
	}
	for _, b := range blocks {
		if utf8.RuneCountInString(b) > limit {
			flush()
			out = append(out, splitBlock(b, limit)...)
			continue
		}
		switch {
		case cur == "":
			cur = b
		case utf8.RuneCountInString(cur)+2+utf8.RuneCountInString(b) <= limit:
			cur += "\n\n" + b
		default:
			flush()
			cur = b
		}
	}
	flush()
	return out
}

// splitBlock cuts one long block; a preformatted block stays preformatted
// in every piece.
func splitBlock(b string, limit int) []string {
	if inner, ok := strings.CutPrefix(b, "```\n"); ok && strings.HasSuffix(inner, "```") {
		inner = strings.TrimSuffix(strings.TrimSuffix(inner, "```"), "\n")
		var out []string
		for _, p := range splitText(inner, limit-8) {
			out = append(out, "```\n"+p+"\n```")
		}
		return out
	}
	return splitText(b, limit)
}

// splitText cuts s into pieces of at most limit characters, at a line
// break or space where one is near, never inside an escape (&amp;).
func splitText(s string, limit int) []string {
	var out []string
	for utf8.RuneCountInString(s) > limit {
		rs := []rune(s)
		cut := limit
		if i := strings.LastIndex(string(rs[:limit]), "\n"); i > 0 && utf8.RuneCountInString(string(rs[:limit])[:i]) > limit/2 {
			cut = utf8.RuneCountInString(string(rs[:limit])[:i])
		} else if i := strings.LastIndex(string(rs[:limit]), " "); i > 0 && utf8.RuneCountInString(string(rs[:limit])[:i]) > limit/2 {
			cut = utf8.RuneCountInString(string(rs[:limit])[:i])
		}
		if amp := strings.LastIndex(string(rs[:cut]), "&"); amp >= 0 && !strings.Contains(string(rs[:cut])[amp:], ";") && cut-utf8.RuneCountInString(string(rs[:cut])[:amp]) < 6 {
			cut = utf8.RuneCountInString(string(rs[:cut])[:amp])
		}
		piece := strings.TrimRight(string(rs[:cut]), " \n")
		if piece != "" {
			out = append(out, piece)
		}
		s = strings.TrimLeft(string(rs[cut:]), " \n")
	}
	if strings.TrimSpace(s) != "" {
		out = append(out, s)
	}
	return out
}
