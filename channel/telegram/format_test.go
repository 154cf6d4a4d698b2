package telegram

import (
	"strings"
	"testing"

	tgfake "conch/internal/testenv/telegram"
)

// The rendering and splitting are tested in channel/internal/markdown;
// here what the channel adds.

func squash(s string) string { return strings.Join(strings.Fields(s), "") }

func TestSingleKeepsTheEnd(t *testing.T) {
	r := newRenderer()
	var b strings.Builder
	for i := range 500 {
		b.WriteString("⚙ step " + strings.Repeat("x", 20) + " " + string(rune('a'+i%26)) + "\n\n")
	}
	b.WriteString("⚙ the last step")
	s := r.single(b.String(), maxMessageLen)
	plain, _, err := tgfake.ParseHTML(s)
	if err != nil || tgfake.UTF16Len(plain) > maxMessageLen || !strings.HasSuffix(plain, "the last step") || !strings.HasPrefix(plain, "…") {
		t.Fatalf("single: %d chars, err %v, %.80q…%.40q", tgfake.UTF16Len(plain), err, plain, plain[max(0, len(plain)-40):])
	}
}

func TestValidToken(t *testing.T) {
	for tok, want := range map[string]bool{
		"123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11": true,
		"123456:short":           false,
		"abc:ABCDEFGHIJKLMN":     false,
		"123456":                 false,
		"123456:has space in it": false,
	} {
		if ValidToken(tok) != want {
			t.Errorf("ValidToken(%q) = %v", tok, !want)
		}
	}
}
