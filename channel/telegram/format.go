package telegram

import (
	"fmt"
	"html"
	"net/url"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// maxMessageLen is Telegram's limit on a message's text after entity
// parsing: 4096 characters, counted (like entity offsets) in UTF-16 units.
const maxMessageLen = 4096

// renderer turns conch's Markdown into the small HTML subset Telegram's
// parse_mode=HTML accepts: b, i, s, u, code, pre, a, blockquote, and the
// four named entities &lt; &gt; &amp; &quot;. Everything else (headings,
// lists, tables, raw HTML) becomes text in those terms.
type renderer struct {
	md goldmark.Markdown
}

func newRenderer() *renderer {
	return &renderer{md: goldmark.New(goldmark.WithExtensions(extension.GFM))}
}

// blocks renders Markdown as top-level blocks of Telegram HTML, in order.
func (r *renderer) blocks(markdown string) []string {
	// Telegram refuses a message that is not UTF-8 ("Strings must be
	// encoded in UTF-8"); tool output shown in progress text may not be.
	src := []byte(strings.ToValidUTF8(markdown, "\uFFFD"))
	doc := r.md.Parser().Parse(text.NewReader(src))
	w := &htmlWriter{src: src}
	var out []string
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		if s := strings.Trim(w.block(n, 0, false), "\n"); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// messages renders Markdown into HTML messages of at most limit visible
// characters each, cut at block boundaries where possible and never inside
// a tag: a cut closes the open tags and the next message reopens them.
func (r *renderer) messages(markdown string, limit int) []string {
	return pack(r.blocks(markdown), limit)
}

// single renders Markdown as one message; if it is too long, its end is
// kept (progress text grows at the bottom) behind an ellipsis.
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

type htmlWriter struct {
	src []byte
}

func escapeText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func escapeAttr(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

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

func (w *htmlWriter) lines(n ast.Node) string {
	var b strings.Builder
	l := n.Lines()
	for i := 0; i < l.Len(); i++ {
		seg := l.At(i)
		b.Write(seg.Value(w.src))
	}
	return b.String()
}

// block renders one block node. depth is the list nesting; quoted is set
// inside a blockquote (Telegram does not nest quotes).
func (w *htmlWriter) block(n ast.Node, depth int, quoted bool) string {
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
func (w *htmlWriter) table(t *east.Table) string {
	var rows [][]string
	for r := t.FirstChild(); r != nil; r = r.NextSibling() {
		var cells []string
		for c := r.FirstChild(); c != nil; c = c.NextSibling() {
			cells = append(cells, strings.TrimSpace(plainText(w.inline(c))))
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
func (w *htmlWriter) inline(n ast.Node) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		w.inlineNode(&b, c)
	}
	return b.String()
}

func (w *htmlWriter) inlineNode(b *strings.Builder, n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		b.WriteString(escapeText(string(n.Segment.Value(w.src))))
		if n.SoftLineBreak() || n.HardLineBreak() {
			b.WriteByte('\n')
		}
	case *ast.String:
		b.WriteString(escapeText(string(n.Value)))
	case *ast.CodeSpan:
		var code strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if t, ok := c.(*ast.Text); ok {
				code.Write(t.Segment.Value(w.src))
			} else if s, ok := c.(*ast.String); ok {
				code.Write(s.Value)
			}
		}
		b.WriteString("<code>" + escapeText(code.String()) + "</code>")
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

// token is one piece of rendered HTML: a tag or one visible character
// (an entity counts as one).
type token struct {
	s     string
	tag   string // element name for tags
	open  bool
	close bool
	units int // UTF-16 units of visible text
}

func tokenize(h string) []token {
	var out []token
	for i := 0; i < len(h); {
		switch h[i] {
		case '<':
			j := strings.IndexByte(h[i:], '>')
			if j < 0 {
				out = append(out, token{s: h[i:], units: utf16Len(h[i:])})
				return out
			}
			s := h[i : i+j+1]
			name := strings.TrimPrefix(strings.Trim(s, "<>"), "/")
			if k := strings.IndexAny(name, " \t\n"); k >= 0 {
				name = name[:k]
			}
			out = append(out, token{s: s, tag: strings.ToLower(name), open: s[1] != '/', close: s[1] == '/'})
			i += j + 1
		case '&':
			j := strings.IndexByte(h[i:], ';')
			if j < 0 || j > 10 {
				out = append(out, token{s: "&", units: 1})
				i++
				continue
			}
			out = append(out, token{s: h[i : i+j+1], units: 1})
			i += j + 1
		default:
			r, size := utf8.DecodeRuneInString(h[i:])
			u := 1
			if r > 0xFFFF {
				u = 2
			}
			out = append(out, token{s: h[i : i+size], units: u})
			i += size
		}
	}
	return out
}

func utf16Len(s string) int { return len(utf16.Encode([]rune(s))) }

// visibleLen is the length of the text Telegram shows for h.
func visibleLen(h string) int {
	n := 0
	for _, t := range tokenize(h) {
		n += t.units
	}
	return n
}

// pack joins blocks into messages of at most limit visible characters.
func pack(blocks []string, limit int) []string {
	var out []string
	cur, curLen := "", 0
	for _, b := range blocks {
		bl := visibleLen(b)
		if cur != "" && curLen+2+bl <= limit {
			cur += "\n\n" + b
			curLen += 2 + bl
			continue
		}
		if cur != "" {
			out = append(out, cur)
			cur, curLen = "", 0
		}
		if bl <= limit {
			cur, curLen = b, bl
			continue
		}
		parts := splitHTML(b, limit)
		out = append(out, parts[:len(parts)-1]...)
		cur = parts[len(parts)-1]
		curLen = visibleLen(cur)
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

// splitHTML cuts one block of HTML into pieces of at most limit visible
// characters, preferring a line break, then a space; tags open at a cut
// are closed before it and reopened after it.
func splitHTML(h string, limit int) []string {
	toks := tokenize(h)
	var out []string
	var stack []token // open tags
	start := 0        // token index where the current piece starts
	prefix := ""      // reopened tags for the current piece
	count := 0
	var nl, sp *htmlCut
	join := func(from, to int) string { return joinTokens(toks[from:to]) }
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.open:
			stack = append(stack, t)
			continue
		case t.close:
			for j := len(stack) - 1; j >= 0; j-- {
				if stack[j].tag == t.tag {
					stack = append(stack[:j:j], stack[j+1:]...)
					break
				}
			}
			continue
		}
		if count+t.units > limit {
			c := pickCut(nl, sp, limit)
			var piece string
			var next int
			var st []token
			if c != nil && c.count > 0 {
				piece = prefix + join(start, c.at) + closeTags(c.stack)
				next, st = c.at+1, c.stack
			} else {
				piece = prefix + join(start, i) + closeTags(stack)
				next, st = i, cloneTags(stack)
			}
			out = append(out, piece)
			prefix = joinTokens(st)
			start = next
			// Replay the tags and text between the cut and i.
			stack = cloneTags(st)
			count = 0
			nl, sp = nil, nil
			i = next - 1
			continue
		}
		count += t.units
		if t.s == "\n" {
			nl = &htmlCut{at: i, stack: cloneTags(stack), count: count - 1}
		} else if t.s == " " {
			sp = &htmlCut{at: i, stack: cloneTags(stack), count: count - 1}
		}
	}
	out = append(out, prefix+join(start, len(toks)))
	return out
}

// htmlCut is a place splitHTML may cut a piece at.
type htmlCut struct {
	at    int // index of the separator token (dropped)
	stack []token
	count int
}

// pickCut chooses where to cut a piece that would exceed limit: at the last
// newline, unless that leaves less than half the piece and the last space
// leaves more; nil when there is neither.
func pickCut(nl, sp *htmlCut, limit int) *htmlCut {
	c := nl
	if c == nil || c.count < limit/2 {
		if sp != nil && (c == nil || sp.count > c.count) {
			c = sp
		}
	}
	return c
}

// closeTags closes the open tags st, innermost first.
func closeTags(st []token) string {
	var b strings.Builder
	for i := len(st) - 1; i >= 0; i-- {
		b.WriteString("</" + st[i].tag + ">")
	}
	return b.String()
}

// joinTokens concatenates the tokens' text (for open tags: reopens them).
func joinTokens(ts []token) string {
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(t.s)
	}
	return b.String()
}

func cloneTags(st []token) []token { return append([]token(nil), st...) }

// plainText is what Telegram would show for h, as text without markup;
// links keep their target in parentheses. It is the fallback when Telegram
// refuses the HTML.
func plainText(h string) string {
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

// splitPlain cuts plain text into pieces of at most limit UTF-16 units,
// at line breaks where possible.
func splitPlain(s string, limit int) []string {
	var out []string
	for utf16Len(s) > limit {
		// Largest rune prefix within limit.
		n, units := 0, 0
		for i, r := range s {
			u := 1
			if r > 0xFFFF {
				u = 2
			}
			if units+u > limit {
				break
			}
			units += u
			n = i + utf8.RuneLen(r)
		}
		cut := n
		if k := strings.LastIndexByte(s[:n], '\n'); k > n/2 {
			cut = k
		} else if k := strings.LastIndexByte(s[:n], ' '); k > n/2 {
			cut = k
		}
		out = append(out, s[:cut])
		s = strings.TrimLeft(s[cut:], "\n ")
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
