package markdown

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Splitting keeps blocks whole where it can: blocks are packed into pieces
// two newlines apart; a block over the limit is cut (by lines, by spaces,
// at worst inside a word, never inside a character) and its last piece may
// take the blocks after it. Each target measures in its own unit.

// pack joins blocks into pieces of at most limit, measured by size; cut
// splits one block that is over the limit on its own.
func pack(blocks []string, limit int, size func(string) int, cut func(string, int) []string) []string {
	var out []string
	cur, curLen := "", 0
	for _, b := range blocks {
		bl := size(b)
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
		parts := cut(b, limit)
		out = append(out, parts[:len(parts)-1]...)
		cur = parts[len(parts)-1]
		curLen = size(cur)
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

// SplitTelegram packs Telegram HTML blocks (Doc.Telegram) into messages of
// at most limit characters of visible text (UTF-16 units, entities counted
// as the character they stand for), never cutting inside a tag: a cut
// closes the open tags and the next message reopens them.
func SplitTelegram(blocks []string, limit int) []string {
	return pack(blocks, limit, visibleLen, splitHTML)
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

// SplitPlain cuts plain text into pieces of at most limit UTF-16 units, at
// line breaks where possible (Telegram's limit for text sent without
// formatting).
func SplitPlain(s string, limit int) []string {
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
