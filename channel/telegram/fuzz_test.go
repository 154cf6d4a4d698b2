package telegram

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-telegram/bot/models"

	"conch/channel/internal/markdown"
	tgfake "conch/internal/testenv/telegram"
)

// Fuzz targets for what arrives from outside: updates as the Bot API sends
// them, and the model's Markdown rendered into Telegram HTML. `go test`
// runs the seeds (and testdata/fuzz) as regression tests; `make fuzz`
// explores further.

func FuzzUpdate(f *testing.F) {
	for _, s := range []string{
		`{"update_id":1,"message":{"message_id":5,"date":1700000000,"chat":{"id":42,"type":"private"},"from":{"id":42,"first_name":"Alice","username":"alice"},"text":"/start@conch_bot hi"}}`,
		`{"update_id":2,"message":{"message_id":6,"chat":{"id":-100,"type":"supergroup"},"from":{"id":7,"first_name":"Bob"},"text":"@conch_bot: do it","entities":[{"type":"mention","offset":0,"length":10}]}}`,
		`{"update_id":3,"message":{"message_id":7,"chat":{"id":-100,"type":"group"},"from":{"id":7,"first_name":"Bob"},"text":"😀/stop@conch_bot","entities":[{"type":"bot_command","offset":2,"length":14},{"type":"mention","offset":-3,"length":99}]}}`,
		`{"update_id":4,"message":{"message_id":8,"chat":{"id":1,"type":"private"},"from":{"id":1,"first_name":"A"},"caption":"look","photo":[{"file_id":"p1","width":10,"height":10,"file_size":100},{"file_id":"p2","width":9999,"height":9999,"file_size":99999999999}],"document":{"file_id":"d","file_name":"../../etc/passwd","mime_type":"text/plain","file_size":3}}}`,
		`{"update_id":5,"message":{"message_id":9,"chat":{"id":-5,"type":"supergroup","is_forum":true},"is_topic_message":true,"message_thread_id":3,"from":{"id":2,"first_name":"C"},"text":"x","reply_to_message":{"message_id":1,"chat":{"id":-5,"type":"supergroup"},"from":{"id":999,"is_bot":true,"first_name":"conch"}}}}`,
		`{"update_id":6,"my_chat_member":{"chat":{"id":-9,"type":"group"},"from":{"id":3,"first_name":"D"},"date":1,"old_chat_member":{"status":"member","user":{"id":999,"is_bot":true,"first_name":"conch"}},"new_chat_member":{"status":"kicked","user":{"id":999,"is_bot":true,"first_name":"conch"},"until_date":0}}}`,
		`{"update_id":7,"message":{"message_id":1,"chat":{"id":1,"type":"channel"},"text":"no from"}}`,
		`{"update_id":8,"message":{"message_id":1,"chat":{"id":1,"type":"private"},"from":{"id":1,"is_bot":true},"text":"bot"}}`,
		`{"update_id":9,"message":null}`,
		`[]`, `{}`, `null`, `{"update_id":"x"}`,
	} {
		f.Add([]byte(s))
	}
	ch, err := New(Options{Token: "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11", APIURL: "http://127.0.0.1:1", Cursors: newCursors(), Logger: testLogger(), MaxFileBytes: 1000})
	if err != nil {
		f.Fatal(err)
	}
	ch.me = models.User{ID: 999, IsBot: true, FirstName: "conch", Username: "conch_bot"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var u models.Update
		if err := json.Unmarshal(raw, &u); err != nil {
			return // getUpdates fails the whole batch with an error
		}
		h := newHandler()
		ch.handler = h
		for _, policy := range []string{GroupMention, GroupAll} {
			ch.opts.GroupPolicy = policy
			if err := ch.handle(context.Background(), &u); err != nil {
				t.Fatalf("handle: %v", err)
			}
		}
		for _, in := range h.inbound() {
			if in.Text == "" {
				t.Errorf("inbound with no text: %+v", in)
			}
			if in.Sender == "" || in.ExternalID == "" || in.Key.ID == "" {
				t.Errorf("inbound without sender, id or key: %+v", in)
			}
			chat, msg, ok := parseExternalID(in.ExternalID)
			if !ok || externalID(chat, msg) != in.ExternalID {
				t.Errorf("external id %q does not round-trip", in.ExternalID)
			}
			for _, a := range in.Attachments {
				if a.Name == "" || strings.ContainsAny(a.Name, "/\\\x00") || a.Name == "." || a.Name == ".." {
					t.Errorf("unsafe attachment name %q", a.Name)
				}
				if a.Size > 1000 {
					t.Errorf("attachment %q of %d bytes kept over the 1000-byte limit", a.Name, a.Size)
				}
			}
		}
	})
}

func FuzzUTF16Slice(f *testing.F) {
	f.Add("@conch_bot hi", 0, 10)
	f.Add("😀/stop", 2, 5)
	f.Add("x", -1, 1)
	f.Add("\xff\xfe", 0, 2)
	f.Fuzz(func(t *testing.T, s string, offset, length int) {
		got := utf16Slice(s, offset, length)
		if offset < 0 || length < 0 {
			if got != "" {
				t.Fatalf("utf16Slice(%q, %d, %d) = %q for a negative bound", s, offset, length, got)
			}
			return
		}
		if !utf8.ValidString(got) {
			t.Fatalf("utf16Slice(%q, %d, %d) = %q, not UTF-8", s, offset, length, got)
		}
		if n := tgfake.UTF16Len(got); n > length {
			t.Fatalf("utf16Slice(%q, %d, %d) = %q, %d units", s, offset, length, got, n)
		}
	})
}

func FuzzFormat(f *testing.F) {
	for _, s := range []string{
		"**bold** _it_ `code` [link](https://example.org) <b>raw</b> & < >",
		"[x](javascript:alert(1)) [y](tg://user?id=1) [z](http://) ![img](https://x/y.png)",
		"```go\nfunc main() { if a < b && c > d {} }\n```",
		"> quote **b**\n\n- a\n- b\n  - c\n\n1. x\n\n| a | b |\n|---|---|\n| 1 | 2 |",
		"emoji 😀 " + strings.Repeat("😀", 60),
		strings.Repeat("word ", 100),
		"***~~nested~~*** <script>x</script>",
		"",
	} {
		f.Add(s, uint16(64))
	}
	r := newRenderer()
	f.Fuzz(func(t *testing.T, md string, lim uint16) {
		limit := 16 + int(lim)%maxMessageLen
		msgs := r.messages(md, limit)
		var got strings.Builder
		for j, m := range msgs {
			plain, ents, err := tgfake.ParseHTML(m)
			if err != nil {
				t.Fatalf("limit %d part %d: Telegram would refuse %q: %v", limit, j, m, err)
			}
			if n := tgfake.UTF16Len(plain); n > limit {
				t.Fatalf("limit %d part %d: %d characters", limit, j, n)
			}
			for _, e := range ents {
				if e.URL != "" && !markdown.TelegramLinkable(e.URL) {
					t.Fatalf("part %d links to %q", j, e.URL)
				}
			}
			got.WriteString(plain)
		}
		want, _, err := tgfake.ParseHTML(strings.Join(r.blocks(md), "\n\n"))
		if err != nil {
			t.Fatalf("blocks: Telegram would refuse them: %v", err)
		}
		if squash(got.String()) != squash(want) {
			t.Fatalf("limit %d: the parts do not add up to the text\n got %.200q\nwant %.200q", limit, squash(got.String()), squash(want))
		}
		if s := r.single(md, limit); s != "" {
			plain, _, err := tgfake.ParseHTML(s)
			if err != nil || tgfake.UTF16Len(plain) > limit {
				t.Fatalf("single: %d characters over %d, err %v: %q", tgfake.UTF16Len(plain), limit, err, s)
			}
		}
	})
}
