package cli

import (
	"strings"
	"unicode"
)

// Sanitize removes what a terminal would act on instead of showing: escape
// sequences (CSI such as a screen clear or cursor move, OSC such as a window
// title or a hyperlink, DCS, …) and control characters other than newline
// and tab. Text from the model or a program's output is untrusted; the store
// keeps it as it was, only the terminal gets the cleaned form.
func Sanitize(s string) string {
	if !hasControl(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == 0x1b: // ESC
			i = skipEscape(rs, i)
		case r == 0x9b: // 8-bit CSI
			i = skipCSI(rs, i+1)
		case r == 0x9d || r == 0x90 || r == 0x9e || r == 0x9f || r == 0x98: // 8-bit OSC, DCS, PM, APC, SOS
			i = skipString(rs, i+1)
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == '\r':
			// A lone CR rewrites the line it is on: keep line endings only.
			if i+1 < len(rs) && rs[i+1] == '\n' {
				continue
			}
		case unicode.IsControl(r), r == 0x7f:
		case r >= 0x200e && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			// Bidirectional overrides can make shown text differ from what it is.
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func hasControl(s string) bool {
	for _, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) ||
			(r >= 0x200e && r <= 0x200f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			return true
		}
	}
	return false
}

// skipEscape returns the index of the last rune of the escape sequence
// starting at rs[i] (an ESC).
func skipEscape(rs []rune, i int) int {
	if i+1 >= len(rs) {
		return i
	}
	switch rs[i+1] {
	case '[':
		return skipCSI(rs, i+2)
	case ']', 'P', '^', '_', 'X':
		return skipString(rs, i+2)
	}
	// Two- or three-character sequences: ESC, intermediates 0x20–0x2f, a final.
	j := i + 1
	for j < len(rs) && rs[j] >= 0x20 && rs[j] <= 0x2f {
		j++
	}
	if j < len(rs) {
		return j
	}
	return len(rs) - 1
}

// skipCSI skips parameters and intermediates up to the final byte 0x40–0x7e.
func skipCSI(rs []rune, j int) int {
	for ; j < len(rs); j++ {
		if rs[j] >= 0x40 && rs[j] <= 0x7e {
			return j
		}
		if rs[j] < 0x20 || rs[j] > 0x7e {
			return j - 1 // malformed: what follows is looked at on its own
		}
	}
	return len(rs) - 1
}

// skipString skips an OSC/DCS/PM/APC/SOS string up to BEL, ST (ESC \\) or 0x9c.
func skipString(rs []rune, j int) int {
	for ; j < len(rs); j++ {
		switch {
		case rs[j] == 0x07 || rs[j] == 0x9c:
			return j
		case rs[j] == 0x1b && j+1 < len(rs) && rs[j+1] == '\\':
			return j + 1
		}
	}
	return len(rs) - 1
}
