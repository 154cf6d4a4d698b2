package email

import (
	"regexp"
	"strings"
)

// Quoted history and signatures are cut from what the model reads; the
// full text stays with the message (see Channel.inbound).

// attributionRE matches the line a mail client writes above a quote
// ("On Mon, 1 Jan 2026 at 10:00, Alice <a@x> wrote:") in common languages.
var attributionRE = regexp.MustCompile(`(?i)^(on|am|le|el|il|op|em|den|dne|w dniu)\s.*(wrote|schrieb|a écrit|escribió|ha scritto|schreef|escreveu|skrev|napisał).*:$`)

// outlookRE matches the separators Outlook and webmailers put above the
// original message when replying on top.
var outlookRE = regexp.MustCompile(`(?i)^(-{2,}\s*(original message|ursprüngliche nachricht|message d'origine|mensaje original)\s*-{2,}|_{10,})$`)

// headerBlockRE matches the first line of a quoted header block
// ("From: Alice <a@x>" followed by Sent:/Date: and To:/Subject: lines).
var headerBlockRE = regexp.MustCompile(`(?i)^\*?(from|von|de|van)\s?:\*?\s`)

var headerFollowRE = regexp.MustCompile(`(?i)^\*?(sent|date|gesendet|datum|envoyé|enviado|to|an|subject|betreff|objet)\s?:\*?\s`)

// mobileSignatureRE matches the one-line signatures phones add.
var mobileSignatureRE = regexp.MustCompile(`(?i)^(sent from my \w+|sent from (outlook|mail) for \w+|get outlook for \w+|von meinem \w+ gesendet|envoyé de mon \w+)`)

// trimReply returns the new part of a mail body: quoted history below the
// reply (an attribution line with the quote under it, an Outlook-style
// original-message block, a trailing block of "> " lines) and the
// signature (after the "-- " delimiter, or a phone's one-liner) are cut.
// Quotes with new text after them (inline replies) stay: they give that
// text its context. A body that is nothing but history is returned whole.
func trimReply(text string) string {
	lines := strings.Split(text, "\n")
	cut := len(lines)
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if outlookRE.MatchString(l) && i > 0 {
			cut = i
			break
		}
		if headerBlockRE.MatchString(l) && i > 0 && i+1 < len(lines) && headerFollowRE.MatchString(strings.TrimSpace(lines[i+1])) {
			cut = i
			break
		}
		attribution := attributionRE.MatchString(l)
		end := i + 1
		if !attribution && i+1 < len(lines) {
			// Clients wrap long attribution lines.
			if attributionRE.MatchString(l + " " + strings.TrimSpace(lines[i+1])) {
				attribution, end = true, i+2
			}
		}
		if attribution && i > 0 && onlyQuotesAfter(lines[end:]) {
			cut = i
			break
		}
	}
	lines = lines[:cut]
	// A trailing quote block without an attribution line.
	for len(lines) > 0 {
		l := strings.TrimSpace(lines[len(lines)-1])
		if l == "" || strings.HasPrefix(l, ">") {
			lines = lines[:len(lines)-1]
			continue
		}
		break
	}
	// The signature: from the last delimiter line.
	for i := len(lines) - 1; i > 0; i-- {
		if lines[i] == "-- " || lines[i] == "--" {
			lines = lines[:i]
			break
		}
	}
	for len(lines) > 1 {
		l := strings.TrimSpace(lines[len(lines)-1])
		if l == "" || mobileSignatureRE.MatchString(l) {
			lines = lines[:len(lines)-1]
			continue
		}
		break
	}
	out := strings.TrimSpace(strings.Join(lines, "\n"))
	if out == "" {
		return strings.TrimSpace(text)
	}
	return out
}

// onlyQuotesAfter reports whether the lines are quoted or blank (and at
// least one is quoted): the history below an attribution line.
func onlyQuotesAfter(lines []string) bool {
	quoted := false
	for _, l := range lines {
		l = strings.TrimSpace(l)
		switch {
		case l == "":
		case strings.HasPrefix(l, ">"):
			quoted = true
		default:
			return false
		}
	}
	return quoted
}
