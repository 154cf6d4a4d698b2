package markdown

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
)

// SlackMaxText is where long Slack answers are split. Slack truncates a
// message's text past 40,000 characters and recommends at most 4,000 for
// readability (a longer message is collapsed behind "Show more").
const SlackMaxText = 4000

// Slack renders the document as top-level blocks of Slack's mrkdwn: *bold*,
// _italic_, ~strike~, `code`, ```pre```, <url|label>, "> " quotes, and the
// three escapes &amp; &lt; &gt;. Headings become bold lines, lists "•" or
// numbered lines, tables a preformatted block. Blocks that render to
// nothing are left out.
func (d *Doc) Slack() []string {
	w := &slackWriter{src: d.src}
	var out []string
	for n := d.root.FirstChild(); n != nil; n = n.NextSibling() {
		if s := strings.Trim(w.block(n, 0), "\n"); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// SlackMessages renders Markdown into mrkdwn messages of at most limit
// characters.
func SlackMessages(markdown string, limit int) []string {
	parts := SplitSlack(Parse(markdown).Slack(), limit)
	if len(parts) == 0 && strings.TrimSpace(markdown) != "" {
		parts = SplitSlackText(SlackEscape(markdown), limit)
	}
	return parts
}

// SlackSingle renders Markdown as one mrkdwn message; if it is too long its
// end is kept (progress grows at the bottom) behind an ellipsis.
func SlackSingle(markdown string, limit int) string {
	parts := SlackMessages(markdown, limit-2)
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return "…\n" + parts[len(parts)-1]
}

var mrkdwnEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// SlackEscape escapes text for mrkdwn: only &, < and > (Slack's rule).
func SlackEscape(s string) string { return mrkdwnEscaper.Replace(s) }

func slackURL(u string) bool {
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

type slackWriter struct{ src []byte }

func (w *slackWriter) lines(n ast.Node) string { return nodeLines(w.src, n) }

func (w *slackWriter) block(n ast.Node, depth int) string {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		return w.inline(n)
	case *ast.Heading:
		return "*" + strings.Trim(w.inline(n), "*") + "*"
	case *ast.ThematicBreak:
		return "———"
	case *ast.FencedCodeBlock, *ast.CodeBlock:
		return "```\n" + SlackEscape(strings.TrimRight(w.lines(n), "\n")) + "\n```"
	case *ast.HTMLBlock:
		s := w.lines(n)
		if n.HasClosure() {
			s += string(n.ClosureLine.Value(w.src))
		}
		return SlackEscape(strings.TrimRight(s, "\n"))
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
	return SlackEscape(w.lines(n))
}

// table is a preformatted block with padded columns (mrkdwn has no tables).
func (w *slackWriter) table(t *east.Table) string {
	var rows [][]string
	for r := t.FirstChild(); r != nil; r = r.NextSibling() {
		var cells []string
		for c := r.FirstChild(); c != nil; c = c.NextSibling() {
			cells = append(cells, SlackPlain(w.inline(c)))
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

func (w *slackWriter) inline(n ast.Node) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		w.inlineNode(&b, c)
	}
	return b.String()
}

func (w *slackWriter) inlineNode(b *strings.Builder, n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		b.WriteString(SlackEscape(string(n.Segment.Value(w.src))))
		if n.SoftLineBreak() || n.HardLineBreak() {
			b.WriteByte('\n')
		}
	case *ast.String:
		b.WriteString(SlackEscape(string(n.Value)))
	case *ast.CodeSpan:
		code := codeSpanText(w.src, n)
		b.WriteString("`" + SlackEscape(strings.ReplaceAll(code, "`", "'")) + "`")
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
		inner := SlackPlain(w.inline(n))
		if !slackURL(dest) {
			b.WriteString(SlackEscape(inner))
			return
		}
		if inner == "" || inner == dest {
			b.WriteString("<" + dest + ">")
			return
		}
		b.WriteString("<" + dest + "|" + SlackEscape(strings.ReplaceAll(inner, "|", "¦")) + ">")
	case *ast.Image:
		dest := string(n.Destination)
		alt := SlackPlain(w.inline(n))
		if alt == "" {
			alt = "image"
		}
		if slackURL(dest) {
			b.WriteString("<" + dest + "|" + SlackEscape(alt) + ">")
			return
		}
		b.WriteString(SlackEscape(alt))
	case *ast.AutoLink:
		u := string(n.URL(w.src))
		if n.AutoLinkType == ast.AutoLinkEmail && !strings.HasPrefix(u, "mailto:") {
			u = "mailto:" + u
		}
		if slackURL(u) {
			b.WriteString("<" + u + "|" + SlackEscape(string(n.Label(w.src))) + ">")
			return
		}
		b.WriteString(SlackEscape(string(n.Label(w.src))))
	case *ast.RawHTML:
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			b.WriteString(SlackEscape(string(seg.Value(w.src))))
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

// SlackPlain strips mrkdwn's markup (the plain fallback): links become
// "label (url)", the markers of bold, italic, strike and code go; the
// escapes stay (Slack needs them in plain text too).
func SlackPlain(s string) string {
	s = linkMarkup.ReplaceAllString(s, "$2 ($1)")
	s = bareLink.ReplaceAllString(s, "$1")
	s = strings.ReplaceAll(s, "```", "")
	return slackMarkers.Replace(s)
}

// slackMarkers drops mrkdwn's markers; built once (safe for concurrent use).
var slackMarkers = strings.NewReplacer("*", "", "_", "", "~", "", "`", "")

// SplitSlack packs mrkdwn blocks (Doc.Slack) into messages of at most
// limit characters; a block that alone is too long is cut, a preformatted
// one closed and reopened in every piece, never inside an escape.
func SplitSlack(blocks []string, limit int) []string {
	return pack(blocks, limit, utf8.RuneCountInString, splitSlackBlock)
}

// splitSlackBlock cuts one long block; a preformatted block stays preformatted
// in every piece.
func splitSlackBlock(b string, limit int) []string {
	if inner, ok := strings.CutPrefix(b, "```\n"); ok && strings.HasSuffix(inner, "```") {
		inner = strings.TrimSuffix(strings.TrimSuffix(inner, "```"), "\n")
		var out []string
		for _, p := range SplitSlackText(inner, limit-8) {
			out = append(out, "```\n"+p+"\n```")
		}
		return out
	}
	return SplitSlackText(b, limit)
}

// SplitSlackText cuts s into pieces of at most limit characters, at a line
// break or space where one is near, never inside an escape (&amp;).
func SplitSlackText(s string, limit int) []string {
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
