package matrix

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"maunium.net/go/mautrix/event"
)

// Size limits. The homeserver refuses events over 65536 bytes; encryption
// adds a third (base64) plus an envelope, so one message's body and
// formatted_body together stay under maxContentBytes.
const (
	maxChunkBytes   = 16000
	maxContentBytes = 40000
	// maxEditBytes bounds the Markdown of an edit (progress text), which
	// carries the text twice (fallback and m.new_content).
	maxEditBytes = 12000
)

// renderer turns Markdown into the HTML subset Matrix clients accept.
type renderer struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
}

func newRenderer() *renderer {
	md := goldmark.New(goldmark.WithExtensions(extension.GFM))
	// The tags and attributes the Matrix spec recommends clients accept
	// (client-server API, "m.room.message msgtypes", HTML subset).
	p := bluemonday.NewPolicy()
	p.AllowElements("font", "del", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "p", "a",
		"ul", "ol", "sup", "sub", "li", "b", "i", "u", "strong", "em", "s", "strike", "code", "hr", "br",
		"div", "table", "thead", "tbody", "tr", "th", "td", "caption", "pre", "span", "details", "summary")
	p.AllowAttrs("href").OnElements("a")
	p.AllowURLSchemes("http", "https", "ftp", "mailto", "magnet", "matrix")
	p.RequireParseableURLs(true)
	p.AllowAttrs("start").Matching(regexp.MustCompile(`^[0-9]{1,9}$`)).OnElements("ol")
	p.AllowAttrs("class").Matching(regexp.MustCompile(`^language-[A-Za-z0-9_+#.-]{1,40}$`)).OnElements("code")
	p.AllowAttrs("align").Matching(regexp.MustCompile(`^(left|right|center)$`)).OnElements("th", "td")
	p.AllowAttrs("checked", "disabled", "type").OnElements("input")
	p.AllowElements("input")
	return &renderer{md: md, policy: p}
}

// HTML renders Markdown and sanitises the result.
func (r *renderer) HTML(markdown string) (string, error) {
	var buf bytes.Buffer
	if err := r.md.Convert([]byte(markdown), &buf); err != nil {
		return "", fmt.Errorf("render markdown: %w", err)
	}
	html := strings.TrimSpace(r.policy.Sanitize(buf.String()))
	// A lone paragraph needs no wrapper.
	if strings.HasPrefix(html, "<p>") && strings.HasSuffix(html, "</p>") && strings.Count(html, "<p>") == 1 {
		html = html[len("<p>") : len(html)-len("</p>")]
	}
	return html, nil
}

// content builds a message: body is the Markdown source, formatted_body the HTML.
func (r *renderer) content(markdown string, msgType event.MessageType) (*event.MessageEventContent, error) {
	html, err := r.HTML(markdown)
	if err != nil {
		return nil, err
	}
	return &event.MessageEventContent{
		MsgType:       msgType,
		Body:          markdown,
		Format:        event.FormatHTML,
		FormattedBody: html,
		Mentions:      &event.Mentions{},
	}, nil
}

// messages renders text as one or more messages, each under the size limits.
func (r *renderer) messages(text string, msgType event.MessageType) ([]*event.MessageEventContent, error) {
	var out []*event.MessageEventContent
	var add func(chunk string, limit int) error
	add = func(chunk string, limit int) error {
		c, err := r.content(chunk, msgType)
		if err != nil {
			return err
		}
		if len(c.Body)+len(c.FormattedBody) <= maxContentBytes || limit < 256 {
			out = append(out, c)
			return nil
		}
		// The HTML grew past the limit (heavy escaping): split finer.
		for _, part := range splitMarkdown(chunk, limit/2) {
			if err := add(part, limit/2); err != nil {
				return err
			}
		}
		return nil
	}
	for _, chunk := range splitMarkdown(text, maxChunkBytes) {
		if err := add(chunk, maxChunkBytes); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// splitMarkdown splits text into pieces of at most limit bytes, preferring
// paragraph boundaries and never cutting inside a code fence without closing
// and reopening it.
func splitMarkdown(text string, limit int) []string {
	text = strings.TrimSpace(text)
	if len(text) <= limit {
		return []string{text}
	}
	var chunks []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			chunks = append(chunks, cur.String())
			cur.Reset()
		}
	}
	for _, b := range markdownBlocks(text) {
		if cur.Len() > 0 && cur.Len()+2+len(b.text) <= limit {
			cur.WriteString("\n\n")
			cur.WriteString(b.text)
			continue
		}
		flush()
		if len(b.text) <= limit {
			cur.WriteString(b.text)
			continue
		}
		chunks = append(chunks, splitBlock(b, limit)...)
	}
	flush()
	return chunks
}

type block struct {
	text  string
	fence string // the opening fence line of a fenced code block, "" otherwise
	close string // its closing marker
}

// markdownBlocks cuts text at blank lines outside code fences.
func markdownBlocks(text string) []block {
	var blocks []block
	var lines []string
	var open, closer string
	emit := func() {
		if len(lines) > 0 {
			blocks = append(blocks, block{text: strings.Join(lines, "\n"), fence: open, close: closer})
			lines = nil
		}
	}
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if open != "" {
			lines = append(lines, line)
			if strings.HasPrefix(trimmed, closer) && strings.Trim(trimmed, closer[:1]+" \t") == "" {
				emit()
				open, closer = "", ""
			}
			continue
		}
		if m := fenceMarker(trimmed); m != "" {
			emit()
			open, closer = line, m
			lines = append(lines, line)
			continue
		}
		if strings.TrimSpace(line) == "" {
			emit()
			continue
		}
		lines = append(lines, line)
	}
	emit()
	return blocks
}

// fenceMarker returns the run of ``` or ~~~ that opens a code fence, or "".
func fenceMarker(s string) string {
	for _, c := range []string{"`", "~"} {
		n := len(s) - len(strings.TrimLeft(s, c))
		if n >= 3 {
			return s[:n]
		}
	}
	return ""
}

// splitBlock splits one over-long block by lines; a fenced block's pieces
// are each wrapped in the fence again.
func splitBlock(b block, limit int) []string {
	src := strings.Split(b.text, "\n")
	wrapOpen, wrapClose := "", ""
	if b.fence != "" {
		wrapOpen, wrapClose = b.fence+"\n", "\n"+b.close
		src = src[1:]
		if n := len(src); n > 0 && strings.TrimSpace(src[n-1]) == b.close {
			src = src[:n-1]
		}
	}
	room := limit - len(wrapOpen) - len(wrapClose)
	if room < 64 {
		room, wrapOpen, wrapClose = limit, "", ""
	}
	var out []string
	var cur strings.Builder
	lines := 0 // lines in cur; an empty line counts
	flush := func() {
		if lines > 0 {
			out = append(out, wrapOpen+cur.String()+wrapClose)
			cur.Reset()
			lines = 0
		}
	}
	for _, line := range src {
		for len(line) > room {
			flush()
			cut := runeCut(line, room)
			out = append(out, wrapOpen+line[:cut]+wrapClose)
			line = line[cut:]
		}
		if lines > 0 && cur.Len()+1+len(line) > room {
			flush()
		}
		if lines > 0 {
			cur.WriteByte('\n')
		}
		cur.WriteString(line)
		lines++
	}
	flush()
	return out
}

// runeCut returns the largest index ≤ n that does not split a UTF-8 sequence.
func runeCut(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	if n == 0 {
		_, size := utf8.DecodeRuneInString(s)
		return size
	}
	return n
}

// truncate shortens Markdown to at most limit bytes, marking the cut.
func truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const mark = "\n\n… (truncated)"
	return s[:runeCut(s, limit-len(mark))] + mark
}
