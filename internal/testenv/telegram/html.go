package telegram

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Entity is a MessageEntity as the Bot API returns it; offsets and lengths
// count UTF-16 code units.
type Entity struct {
	Type     string `json:"type"`
	Offset   int    `json:"offset"`
	Length   int    `json:"length"`
	URL      string `json:"url,omitempty"`
	Language string `json:"language,omitempty"`
	User     *User  `json:"user,omitempty"`
}

// tagEntity maps the start tags Telegram's HTML parse mode supports to the
// entity type they produce.
var tagEntity = map[string]string{
	"b": "bold", "strong": "bold",
	"i": "italic", "em": "italic",
	"u": "underline", "ins": "underline",
	"s": "strikethrough", "strike": "strikethrough", "del": "strikethrough",
	"tg-spoiler": "spoiler", "span": "spoiler",
	"a": "text_link", "code": "code", "pre": "pre",
	"blockquote": "blockquote", "tg-emoji": "custom_emoji",
}

// parseError is the text after "Bad Request: can't parse entities: ".
type parseError string

func (e parseError) Error() string { return string(e) }

// ParseHTML parses text the way the Bot API does for parse_mode=HTML and
// returns the plain text and its entities, or the parse error in the
// server's words.
func ParseHTML(s string) (string, []Entity, error) {
	type open struct {
		tag    string
		offset int // UTF-16 offset in the result
		ent    Entity
	}
	var b strings.Builder
	units := 0
	var stack []open
	var ents []Entity
	write := func(str string) {
		b.WriteString(str)
		units += len(utf16.Encode([]rune(str)))
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch c {
		case '&':
			j := strings.IndexByte(s[i:], ';')
			if j > 1 {
				name := s[i+1 : i+j]
				if r, ok := decodeEntity(name); ok {
					write(string(r))
					i += j + 1
					continue
				}
			}
			write("&")
			i++
		case '<':
			if i+1 < len(s) && s[i+1] == '/' {
				j := strings.IndexByte(s[i:], '>')
				if j < 0 {
					return "", nil, parseError(fmt.Sprintf("Unclosed end tag at byte offset %d", i))
				}
				name := strings.ToLower(strings.TrimSpace(s[i+2 : i+j]))
				if len(stack) == 0 {
					return "", nil, parseError(fmt.Sprintf("Unexpected end tag at byte offset %d", i))
				}
				top := stack[len(stack)-1]
				if name != top.tag {
					return "", nil, parseError(fmt.Sprintf("Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", i, top.tag, name))
				}
				stack = stack[:len(stack)-1]
				e := top.ent
				e.Offset, e.Length = top.offset, units-top.offset
				if e.Length > 0 {
					// <pre><code class="language-x"> is one pre entity.
					if e.Type == "code" && len(stack) > 0 && stack[len(stack)-1].tag == "pre" && e.Language != "" {
						stack[len(stack)-1].ent.Language = e.Language
					} else {
						ents = append(ents, e)
					}
				}
				i += j + 1
				continue
			}
			j := strings.IndexByte(s[i:], '>')
			if j < 0 {
				return "", nil, parseError(fmt.Sprintf("Unclosed start tag at byte offset %d", i))
			}
			inner := s[i+1 : i+j]
			name, attrs, _ := strings.Cut(inner, " ")
			name = strings.ToLower(name)
			typ, ok := tagEntity[name]
			if !ok {
				return "", nil, parseError(fmt.Sprintf("Unsupported start tag \"%s\" at byte offset %d", name, i))
			}
			e := Entity{Type: typ}
			attr := parseAttrs(attrs)
			switch name {
			case "a":
				href := attr["href"]
				if href == "" {
					return "", nil, parseError(fmt.Sprintf("Can't find end of href attribute at byte offset %d", i))
				}
				e.URL = href
			case "span":
				if attr["class"] != "tg-spoiler" {
					return "", nil, parseError(fmt.Sprintf("Tag \"span\" must have class \"tg-spoiler\" at byte offset %d", i))
				}
			case "code":
				if l, ok := strings.CutPrefix(attr["class"], "language-"); ok {
					e.Language = l
				}
			case "blockquote":
				if _, ok := attr["expandable"]; ok {
					e.Type = "expandable_blockquote"
				}
			}
			for _, o := range stack {
				if o.tag == "pre" || o.tag == "code" {
					if !(name == "code" && o.tag == "pre") {
						return "", nil, parseError(fmt.Sprintf("Can't parse entities inside pre or code at byte offset %d", i))
					}
				}
				if (name == "blockquote") && strings.HasSuffix(o.ent.Type, "blockquote") {
					return "", nil, parseError(fmt.Sprintf("Blockquote entities can't be nested at byte offset %d", i))
				}
			}
			stack = append(stack, open{tag: name, offset: units, ent: e})
			i += j + 1
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				return "", nil, parseError("Strings must be encoded in UTF-8")
			}
			write(s[i : i+size])
			i += size
		}
	}
	if len(stack) > 0 {
		return "", nil, parseError("Can't find end tag corresponding to start tag \"" + stack[len(stack)-1].tag + "\"")
	}
	return b.String(), ents, nil
}

func decodeEntity(name string) (rune, bool) {
	switch name {
	case "lt":
		return '<', true
	case "gt":
		return '>', true
	case "amp":
		return '&', true
	case "quot":
		return '"', true
	}
	if n, ok := strings.CutPrefix(name, "#"); ok {
		base := 10
		if h, ok := strings.CutPrefix(strings.ToLower(n), "x"); ok {
			n, base = h, 16
		}
		v, err := strconv.ParseInt(n, base, 32)
		if err == nil && v > 0 && v <= utf8.MaxRune {
			return rune(v), true
		}
	}
	return 0, false
}

// parseAttrs reads name="value" pairs (and bare names).
func parseAttrs(s string) map[string]string {
	out := map[string]string{}
	s = strings.TrimSpace(strings.TrimSuffix(s, "/"))
	for s != "" {
		k := strings.IndexAny(s, "= ")
		if k < 0 {
			out[strings.ToLower(s)] = ""
			break
		}
		name := strings.ToLower(s[:k])
		if s[k] == ' ' {
			out[name] = ""
			s = strings.TrimSpace(s[k+1:])
			continue
		}
		rest := s[k+1:]
		var val string
		if len(rest) > 0 && (rest[0] == '"' || rest[0] == '\'') {
			end := strings.IndexByte(rest[1:], rest[0])
			if end < 0 {
				val, rest = rest[1:], ""
			} else {
				val, rest = rest[1:1+end], rest[2+end:]
			}
		} else {
			end := strings.IndexByte(rest, ' ')
			if end < 0 {
				val, rest = rest, ""
			} else {
				val, rest = rest[:end], rest[end:]
			}
		}
		if r, ok := decodeAll(val); ok {
			val = r
		}
		out[name] = val
		s = strings.TrimSpace(rest)
	}
	return out
}

func decodeAll(s string) (string, bool) {
	if !strings.Contains(s, "&") {
		return s, false
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '&' {
			if j := strings.IndexByte(s[i:], ';'); j > 1 {
				if r, ok := decodeEntity(s[i+1 : i+j]); ok {
					b.WriteRune(r)
					i += j + 1
					continue
				}
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String(), true
}

// UTF16Len is the length Telegram counts for s.
func UTF16Len(s string) int { return len(utf16.Encode([]rune(s))) }
