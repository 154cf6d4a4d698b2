package matrix

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch/channel/internal/markdown"
	"conch/channel/internal/markdown/markdowntest"
)

// Fuzz targets for what arrives from outside: room events as a sync hands
// them over, and the model's Markdown rendered into Matrix HTML. `go test`
// runs the seeds (and testdata/fuzz) as regression tests; `make fuzz`
// explores further.

func FuzzEvent(f *testing.F) {
	for _, s := range []string{
		`{"type":"m.room.message","room_id":"!r:x","event_id":"$1","sender":"@alice:x","origin_server_ts":1700000000000,"content":{"msgtype":"m.text","body":"hello"}}`,
		`{"type":"m.room.message","room_id":"!r:x","event_id":"$2","sender":"@alice:x","content":{"msgtype":"m.emote","body":"waves","format":"org.matrix.custom.html","formatted_body":"<b>waves</b>"}}`,
		`{"type":"m.room.message","room_id":"!r:x","event_id":"$3","sender":"@alice:x","content":{"msgtype":"m.text","body":"> <@bob:x> quoted\n\nconch: the answer","m.relates_to":{"m.in_reply_to":{"event_id":"$0"}},"m.mentions":{"user_ids":["@conch:example.org"]}}}`,
		`{"type":"m.room.message","room_id":"!r:x","event_id":"$4","sender":"@alice:x","content":{"msgtype":"m.text","body":"* edit","m.new_content":{"msgtype":"m.text","body":"edit"},"m.relates_to":{"rel_type":"m.replace","event_id":"$1"}}}`,
		`{"type":"m.room.message","room_id":"!r:x","event_id":"$5","sender":"@alice:x","content":{"msgtype":"m.image","body":"x.png","url":"mxc://x/y"}}`,
		`{"type":"m.room.message","room_id":"!r:x","event_id":"$6","sender":"@alice:x","content":{"msgtype":"m.text","body":"   "}}`,
		`{"type":"m.room.message","room_id":"!r:x","event_id":"$7","sender":"@alice:x","content":{"msgtype":"m.text","body":42}}`,
		`{"type":"m.room.message","content":null}`,
		`{"type":"m.room.member","state_key":"@conch:example.org","content":{"membership":"invite"},"unsigned":{"prev_content":{"membership":"leave"}}}`,
		`{}`, `null`, `[]`,
	} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(`{"type":"m.room.message","room_id":"!g:x","event_id":"$8","sender":"@alice:x","content":{"msgtype":"m.text","body":"Conch Bot, hi","formatted_body":"<a href=\"https://matrix.to/#/@conch:example.org\">x</a>"}}`), true)
	f.Fuzz(func(t *testing.T, raw []byte, group bool) {
		var evt event.Event
		if err := json.Unmarshal(raw, &evt); err != nil {
			return
		}
		if evt.RoomID == "" {
			evt.RoomID = "!r:x" // a sync gives each timeline under its room's id
		}
		c := &Channel{
			opts:    Options{MaxInboundBytes: 4096, MentionOnly: true},
			log:     slog.New(slog.DiscardHandler),
			cli:     &mautrix.Client{UserID: "@conch:example.org", StateStore: mautrix.NewMemoryStateStore()},
			botName: "Conch Bot",
			others:  map[id.RoomID]int{},
		}
		if group {
			c.others[evt.RoomID] = 2
		} else {
			c.others[evt.RoomID] = 1
		}
		rec := newRecorder()
		rec.allow = []string{"*"}
		c.handler = rec
		if err := evt.Content.ParseRaw(evt.Type); err != nil && !c.onParseError(&evt, err) {
			return
		}
		_ = prevMembership(&evt)
		if evt.Type != event.EventMessage {
			return
		}
		if err := c.deliver(context.Background(), &evt); err != nil {
			t.Fatalf("deliver: %v", err)
		}
		for _, in := range rec.all() {
			if strings.TrimSpace(in.Text) == "" {
				t.Errorf("delivered an empty text: %+v", in)
			}
			if len(in.Text) > 4096+len("/me ") {
				t.Errorf("delivered %d bytes, over the limit", len(in.Text))
			}
			if in.ExternalID != evt.ID.String() || in.Key.ID == "" {
				t.Errorf("delivered id %q key %q for event %q in %q", in.ExternalID, in.Key.ID, evt.ID, evt.RoomID)
			}
		}
	})
}

func FuzzMention(f *testing.F) {
	f.Add("Conch Bot", "Conch Bot, hi", "")
	f.Add("Conch Bot", "conch: run tests", "")
	f.Add("", "@conch:example.org do it", `<a href="https://matrix.to/#/@conch:example.org">x</a>`)
	f.Add("Kit", "\u212Ait: hi", "")
	f.Add("ⱦ", "Ⱦ", "")
	f.Fuzz(func(t *testing.T, botName, text, formatted string) {
		c := &Channel{cli: &mautrix.Client{UserID: "@conch:example.org"}, botName: botName}
		content := &event.MessageEventContent{Body: text, FormattedBody: formatted}
		got, ok := c.mention(content, text)
		if !ok && got != text {
			t.Fatalf("not mentioned, but the text changed: %q → %q", text, got)
		}
		if len(got) > len(text) || !strings.HasSuffix(text, got) {
			t.Fatalf("mention(%q) = %q, not a tail of the text", text, got)
		}
	})
}

func FuzzSplitMarkdown(f *testing.F) {
	for _, s := range []string{
		"hello",
		strings.Repeat("a", 40) + "\n\n" + strings.Repeat("b", 40),
		"intro\n\n```go\n" + strings.Repeat("line of code\n", 20) + "```",
		"~~~\n" + strings.Repeat("z\n", 50) + "~~~",
		strings.Repeat("é", 120),
		"```\nunclosed " + strings.Repeat("x ", 80),
	} {
		f.Add(s, uint16(100))
	}
	f.Fuzz(func(t *testing.T, text string, lim uint16) {
		limit := 32 + int(lim)%4096
		parts := markdown.SplitSource(text, limit)
		for i, p := range parts {
			if len(p) > limit {
				t.Fatalf("part %d: %d bytes, over %d: %q", i, len(p), limit, p)
			}
			if utf8.ValidString(text) && !utf8.ValidString(p) {
				t.Fatalf("part %d is not valid UTF-8: %q", i, p)
			}
		}
		// Without fences (which a split closes and reopens) the parts hold
		// exactly the text's characters.
		if !strings.Contains(text, "```") && !strings.Contains(text, "~~~") {
			if got, want := squash(strings.Join(parts, "")), squash(text); got != want {
				t.Fatalf("parts do not add up to the text:\n got %q\nwant %q", got, want)
			}
		}
	})
}

func squash(s string) string { return strings.Join(strings.Fields(s), "") }

func FuzzHTML(f *testing.F) {
	for _, s := range []string{
		"**bold** _it_ `code` [link](https://example.org) ![img](https://example.org/x.png)",
		"<script>alert(1)</script><img src=x onerror=alert(1)>",
		"[x](javascript:alert(1)) [y](JaVaScRiPt:alert(1)) [z](data:text/html,x) [m](matrix:r/x)",
		"<a href=\"&#106;avascript:alert(1)\">x</a><font color=red onmouseover=x>f</font>",
		"```go\nfunc main() {}\n```\n\n| a | b |\n|:-|-:|\n| <b>1</b> | 2 |",
		"- [ ] task\n- [x] done\n\n> quote\n\n3. three",
		"<details><summary>s</summary><iframe src=x></iframe></details><svg onload=x>",
		"",
	} {
		f.Add(s)
	}
	r := newRenderer()
	f.Fuzz(func(t *testing.T, md string) {
		out, err := r.HTML(md)
		if err != nil {
			return
		}
		checkSafeHTML(t, out)
		msgs, err := r.messages(md, event.MsgText)
		if err != nil {
			return
		}
		for i, m := range msgs {
			if n := len(m.Body) + len(m.FormattedBody); n > maxContentBytes {
				t.Fatalf("message %d: %d bytes of body+html, over %d", i, n, maxContentBytes)
			}
			checkSafeHTML(t, m.FormattedBody)
		}
	})
}

// checkSafeHTML is the shared safety check (Matrix messages never carry images).
func checkSafeHTML(t *testing.T, out string) {
	t.Helper()
	markdowntest.CheckSafeHTML(t, out, true)
}
