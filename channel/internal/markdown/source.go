package markdown

import (
	"strings"
	"unicode/utf8"
)

// Matrix's limits. The homeserver refuses events over 65536 bytes;
// encryption adds a third (base64) plus an envelope, so one message's body
// (the Markdown) and formatted_body (its HTML) together stay under
// MatrixContentBytes.
const (
	MatrixChunkBytes   = 16000
	MatrixContentBytes = 40000
	// MatrixEditBytes bounds the Markdown of an edit (progress text), which
	// carries the text twice (fallback and m.new_content).
	MatrixEditBytes = 12000
)

// SplitSource splits Markdown source into pieces of at most limit bytes,
// at blank lines outside code fences where possible; a code fence that must
// be cut is closed and reopened around each piece. Each piece is Markdown
// again (Matrix sends it as the body beside its HTML).
func SplitSource(text string, limit int) []string {
	text = strings.TrimSpace(text)
	if len(text) <= limit {
		return []string{text}
	}
	return pack(sourceBlocks(text), limit, func(s string) int { return len(s) }, splitSourceBlock)
}

// sourceBlocks cuts text at blank lines outside code fences; a fenced code
// block (up to its closing fence, or the end) is a block of its own.
func sourceBlocks(text string) []string {
	var blocks []string
	var lines []string
	var closer string
	emit := func() {
		if len(lines) > 0 {
			blocks = append(blocks, strings.Join(lines, "\n"))
			lines = nil
		}
	}
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if closer != "" {
			lines = append(lines, line)
			if strings.HasPrefix(trimmed, closer) && strings.Trim(trimmed, closer[:1]+" \t") == "" {
				emit()
				closer = ""
			}
			continue
		}
		if m := fenceMarker(trimmed); m != "" {
			emit()
			closer = m
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

// splitSourceBlock splits one over-long block (from sourceBlocks) by
// lines; a fenced block's pieces are each wrapped in the fence again. Only
// a fenced block starts with a fence line.
func splitSourceBlock(b string, limit int) []string {
	src := strings.Split(b, "\n")
	wrapOpen, wrapClose := "", ""
	room := limit
	// A fence whose lines leave too little room is cut as plain lines.
	if m := fenceMarker(strings.TrimLeft(src[0], " ")); m != "" && limit-len(src[0])-1-len(m)-1 >= 64 {
		wrapOpen, wrapClose = src[0]+"\n", "\n"+m
		room = limit - len(wrapOpen) - len(wrapClose)
		src = src[1:]
		if n := len(src); n > 0 && strings.TrimSpace(src[n-1]) == m {
			src = src[:n-1]
		}
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
	if len(out) == 0 { // a fence with nothing inside: only its lines
		out = []string{wrapOpen + strings.TrimPrefix(wrapClose, "\n")}
	}
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

// Truncate shortens Markdown to at most limit bytes, marking the cut.
func Truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const mark = "\n\n… (truncated)"
	return s[:runeCut(s, limit-len(mark))] + mark
}
