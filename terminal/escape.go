package terminal

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// decodeOctal undoes tmux control mode's escaping of %output data: bytes
// below 0x20 and the backslash arrive as a backslash and three octal digits.
func decodeOctal(b []byte) []byte {
	if bytes.IndexByte(b, '\\') < 0 {
		return append([]byte(nil), b...)
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+3 < len(b) && isOctal(b[i+1]) && isOctal(b[i+2]) && isOctal(b[i+3]) {
			out = append(out, (b[i+1]-'0')<<6|(b[i+2]-'0')<<3|(b[i+3]-'0'))
			i += 3
			continue
		}
		out = append(out, b[i])
	}
	return out
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// The marker conch's shell and hooks print: an OSC sequence with a private
// number, ESC ] 7770 ; conch ; <nonce> ; <fields> BEL. tmux ignores an OSC it
// does not know, so the marker never reaches the screen the model reads;
// control mode passes the raw bytes on, so conch sees it. The nonce is the
// terminal's own secret (kept in an unexported shell variable), so output
// that merely contains a marker (cat of a log) cannot fake a completion.
const (
	oscPrefix = "\x1b]7770;conch;"
	oscEnd    = '\a'
	// maxMarker bounds a marker's length; a longer "marker" is not one.
	maxMarker = 4096
)

// marker is one decoded conch marker.
type marker struct {
	// kind is "start" (a command began), "done" (the shell is back at its
	// prompt), "exit" (the shell or program ended), "turn" (a coding
	// agent's turn-end hook ran) or "ready" (its session-start hook ran).
	kind string
	// status is the exit status of done and exit markers.
	status int
	// arg is the working directory of a done marker, the profile of a turn.
	arg string
}

func parseMarker(body string) (marker, bool) {
	f := strings.SplitN(body, ";", 3)
	m := marker{kind: f[0]}
	switch m.kind {
	case "start":
		return m, true
	case "done", "exit":
		if len(f) < 2 {
			return m, false
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			return m, false
		}
		m.status = n
		if len(f) == 3 {
			m.arg = f[2]
		}
		return m, true
	case "turn", "ready":
		if len(f) >= 2 {
			m.arg = strings.Join(f[1:], ";")
		}
		return m, true
	}
	return m, false
}

// markerScanner finds conch markers in a pane's output stream. A marker may
// be split across %output lines, so a partial one is kept for the next chunk.
// Only markers with the terminal's nonce count; with no nonce, none do.
type markerScanner struct {
	nonce   string
	partial []byte
}

// scan returns the markers completed by chunk, in order.
func (s *markerScanner) scan(chunk []byte) []marker {
	data := chunk
	if len(s.partial) > 0 {
		data = append(s.partial, chunk...)
		s.partial = nil
	}
	var out []marker
	for len(data) > 0 {
		i := bytes.Index(data, []byte(oscPrefix))
		if i < 0 {
			// Keep a tail that could begin a marker.
			s.keepPrefixTail(data)
			return out
		}
		rest := data[i+len(oscPrefix):]
		j := bytes.IndexByte(rest, oscEnd)
		if j < 0 {
			if len(rest) < maxMarker {
				s.partial = append([]byte(nil), data[i:]...)
			}
			return out
		}
		if nonce, body, ok := strings.Cut(string(rest[:j]), ";"); ok && s.nonce != "" && nonce == s.nonce {
			if m, ok := parseMarker(body); ok {
				out = append(out, m)
			}
		}
		data = rest[j+1:]
	}
	return out
}

func (s *markerScanner) keepPrefixTail(data []byte) {
	for k := min(len(oscPrefix)-1, len(data)); k > 0; k-- {
		if bytes.HasSuffix(data, []byte(oscPrefix[:k])) {
			s.partial = append([]byte(nil), data[len(data)-k:]...)
			return
		}
	}
}

// Bracketed paste (DEC private mode 2004): a program switches it on when its
// input is ready to take a paste, and off when it leaves or hands the
// terminal to another program.
const (
	pasteOn  = "\x1b[?2004h"
	pasteOff = "\x1b[?2004l"
)

// pasteScanner follows a pane's bracketed-paste mode through its output
// stream; a sequence may be split across %output chunks.
type pasteScanner struct {
	tail []byte
}

// scan returns the last mode change in chunk: +1 on, -1 off, 0 none.
func (s *pasteScanner) scan(chunk []byte) int {
	data := chunk
	if len(s.tail) > 0 {
		data = append(s.tail, chunk...)
	}
	change, at := 0, -1
	if i := bytes.LastIndex(data, []byte(pasteOn)); i >= 0 {
		change, at = 1, i
	}
	if i := bytes.LastIndex(data, []byte(pasteOff)); i > at {
		change = -1
	}
	s.tail = nil
	for k := min(len(pasteOn)-1, len(data)); k > 0; k-- {
		if bytes.HasSuffix(data, []byte(pasteOn[:k])) {
			s.tail = append([]byte(nil), data[len(data)-k:]...)
			break
		}
	}
	return change
}

// quote quotes s as one word for tmux's command parser. Inside single
// quotes nothing is special; a single quote is closed, escaped and reopened.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// keyNames are the tmux key names `terminal_type` sends as keys rather than
// text.
var keyNames = map[string]bool{
	"Enter": true, "Tab": true, "BTab": true, "Escape": true, "Space": true, "BSpace": true,
	"Up": true, "Down": true, "Left": true, "Right": true, "Home": true, "End": true,
	"PageUp": true, "PageDown": true, "PPage": true, "NPage": true, "IC": true, "DC": true,
	"F1": true, "F2": true, "F3": true, "F4": true, "F5": true, "F6": true,
	"F7": true, "F8": true, "F9": true, "F10": true, "F11": true, "F12": true,
}

// isKey reports whether s is a key name: one of keyNames, or C-x / M-x
// with x a single character or key name.
func isKey(s string) bool {
	if keyNames[s] {
		return true
	}
	for _, p := range []string{"C-", "M-", "S-"} {
		if rest, ok := strings.CutPrefix(s, p); ok {
			if len(rest) == 1 && rest[0] > ' ' && rest[0] < 0x7f {
				return true
			}
			return isKey(rest)
		}
	}
	return false
}

// parseKeys splits text into key names when every space-separated word is
// one ("C-c", "Up Up Enter"); otherwise it returns nil: text to type.
func parseKeys(text string) []string {
	words := strings.Fields(text)
	if len(words) == 0 {
		return nil
	}
	for _, w := range words {
		if !isKey(w) {
			return nil
		}
	}
	return words
}

// pasteBuffer is the tmux buffer used to paste text into a CLI.
const pasteBuffer = "conch-paste"

// pasteCommands returns the tmux command lines that paste text into target
// as one bracketed paste (when the program asked for bracketed paste mode,
// as the TUIs do), so no character of it is taken as a key binding. Line
// breaks become spaces: a tmux command line cannot hold one, and text with
// line breaks reaches a coding agent through a file instead.
func pasteCommands(target, text string) []string {
	text = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			return ' '
		case r < 0x20 || r == 0x7f:
			return -1
		}
		return r
	}, text)
	return []string{
		fmt.Sprintf("set-buffer -b %s -- %s", pasteBuffer, quote(text)),
		fmt.Sprintf("paste-buffer -p -d -b %s -t %s", pasteBuffer, quote(target)),
	}
}

// typeCommands returns the tmux command lines that type text into target
// literally: printable runs with send-keys -l, line breaks as Enter, other
// control bytes as hex keys (a tmux command line cannot hold a line break).
func typeCommands(target, text string) []string {
	var cmds []string
	var run strings.Builder
	flush := func() {
		if run.Len() > 0 {
			cmds = append(cmds, fmt.Sprintf("send-keys -t %s -l %s", quote(target), quote(run.String())))
			run.Reset()
		}
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '\r' && i+1 < len(text) && text[i+1] == '\n':
			// CRLF is one line break.
		case c == '\n' || c == '\r':
			flush()
			cmds = append(cmds, fmt.Sprintf("send-keys -t %s Enter", quote(target)))
		case c < 0x20 || c == 0x7f:
			flush()
			cmds = append(cmds, fmt.Sprintf("send-keys -t %s -H %02x", quote(target), c))
		default:
			run.WriteByte(c)
		}
	}
	flush()
	return cmds
}
