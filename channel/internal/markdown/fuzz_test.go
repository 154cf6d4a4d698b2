package markdown

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"conch/channel/internal/markdown/markdowntest"
	tgfake "conch/internal/testenv/telegram"
)

// FuzzTargets renders one parsed document in every target and splits it to
// a random limit: the HTML targets are safe (Matrix and web without
// images), Telegram accepts every message and each fits, Slack's pieces fit
// and link only to safe URLs, the Markdown pieces fit and stay UTF-8.
func FuzzTargets(f *testing.F) {
	for _, s := range markdownSeeds() {
		f.Add(s, uint16(64))
	}
	matrix, email, web := MatrixHTML(), EmailHTML(), WebHTML()
	f.Fuzz(func(t *testing.T, md string, lim uint16) {
		d := Parse(md)
		for _, tf := range []struct {
			f        *HTMLFormat
			noImages bool
		}{{matrix, true}, {email, false}, {web, true}} {
			out, err := d.HTML(tf.f)
			if err != nil {
				t.Fatalf("%s: %v", tf.f.name, err)
			}
			if !utf8.ValidString(out) {
				t.Fatalf("%s: not UTF-8: %q", tf.f.name, out)
			}
			markdowntest.CheckSafeHTML(t, out, tf.noImages)
		}
		blocks := d.Telegram()
		limit := 16 + int(lim)%TelegramMaxText
		for j, m := range SplitTelegram(blocks, limit) {
			plain, ents, err := tgfake.ParseHTML(m)
			if err != nil {
				t.Fatalf("limit %d part %d: Telegram would refuse %q: %v", limit, j, m, err)
			}
			if n := tgfake.UTF16Len(plain); n > limit {
				t.Fatalf("limit %d part %d: %d characters", limit, j, n)
			}
			for _, e := range ents {
				if e.URL != "" && !TelegramLinkable(e.URL) {
					t.Fatalf("part %d links to %q", j, e.URL)
				}
			}
		}
		slackLimit := 16 + int(lim)%SlackMaxText
		for j, m := range SplitSlack(d.Slack(), slackLimit) {
			if n := utf8.RuneCountInString(m); n > slackLimit {
				t.Fatalf("limit %d Slack part %d: %d characters", slackLimit, j, n)
			}
			if !utf8.ValidString(m) {
				t.Fatalf("Slack part %d is not UTF-8: %q", j, m)
			}
			for _, l := range slackLinks.FindAllStringSubmatch(m, -1) {
				if !slackURL(l[1]) {
					t.Fatalf("Slack part %d links to %q", j, l[1])
				}
			}
		}
		srcLimit := 32 + int(lim)%4096
		for i, p := range SplitSource(md, srcLimit) {
			if len(p) > srcLimit {
				t.Fatalf("source part %d: %d bytes, over %d", i, len(p), srcLimit)
			}
			if utf8.ValidString(md) && !utf8.ValidString(p) {
				t.Fatalf("source part %d is not valid UTF-8: %q", i, p)
			}
		}
	})
}

// slackLinks finds mrkdwn links: <url> or <url|label>.
var slackLinks = regexp.MustCompile(`<([^<>|]+)(?:\|[^<>]*)?>`)

func markdownSeeds() []string {
	return append(append([]string(nil), markdowntest.Seeds...),
		"emoji 😀 "+strings.Repeat("😀", 60),
		"intro\n\n```go\n"+strings.Repeat("line of code\n", 20)+"```",
		"> quote **b**\n\n- a\n- b\n  - c\n\n1. x",
		"bad \xff\xfe bytes **b**",
	)
}
