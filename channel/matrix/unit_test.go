package matrix

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch"
)

func TestHTML(t *testing.T) {
	r := newRenderer()
	tests := []struct {
		name, md  string
		want      []string
		forbidden []string
	}{
		{"plain paragraph has no wrapper", "hello", []string{"hello"}, []string{"<p>"}},
		{"emphasis", "**b** _i_ ~~s~~", []string{"<strong>b</strong>", "<em>i</em>", "<del>s</del>"}, nil},
		{"code fence keeps language", "```python\nprint(1)\n```", []string{`<pre><code class="language-python">print(1)`}, nil},
		{"raw html is dropped", "ok <b onclick=\"x()\">b</b> <script>alert(1)</script><img src=x onerror=alert(1)>", []string{"ok"}, []string{"<script", "onerror", "onclick", "<img"}},
		{"javascript links are dropped", "[x](javascript:alert(1))", nil, []string{"javascript:"}},
		{"https links are kept", "[x](https://example.org)", []string{`<a href="https://example.org"`}, nil},
		{"tables", "| a | b |\n|---|---|\n| 1 | 2 |", []string{"<table>", "<td>1</td>"}, nil},
		{"lists keep start", "3. three\n4. four", []string{`<ol start="3">`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.HTML(tt.md)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("got %q, want it to contain %q", got, w)
				}
			}
			for _, f := range tt.forbidden {
				if strings.Contains(got, f) {
					t.Errorf("got %q, want no %q", got, f)
				}
			}
		})
	}
}

func TestSplitMarkdown(t *testing.T) {
	para := func(n int, c string) string { return strings.Repeat(c, n) }
	fence := "```go\n" + strings.Repeat("line of code\n", 50) + "```"
	tests := []struct {
		name  string
		text  string
		limit int
		want  int // number of parts
	}{
		{"short", "hello", 100, 1},
		{"paragraphs pack", para(40, "a") + "\n\n" + para(40, "b") + "\n\n" + para(40, "c"), 90, 2},
		{"fence split and reopened", "intro\n\n" + fence, 200, 5},
		{"one long line", para(250, "x"), 100, 3},
		{"multibyte never cut", strings.Repeat("é", 120), 101, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts := splitMarkdown(tt.text, tt.limit)
			if len(parts) != tt.want {
				t.Fatalf("parts: got %d %q, want %d", len(parts), parts, tt.want)
			}
			for i, p := range parts {
				if len(p) > tt.limit {
					t.Errorf("part %d: got %d bytes, want at most %d", i, len(p), tt.limit)
				}
				if !utf8.ValidString(p) {
					t.Errorf("part %d is not valid UTF-8", i)
				}
				if strings.Count(p, "```")%2 != 0 {
					t.Errorf("part %d has an unbalanced fence: %q", i, p)
				}
			}
		})
	}
}

func TestSplitKeepsEveryCodeLine(t *testing.T) {
	var b strings.Builder
	b.WriteString("~~~\n")
	for i := range 400 {
		b.WriteString(strings.Repeat("z", i%70) + "\n")
	}
	b.WriteString("~~~")
	parts := splitMarkdown(b.String(), 1000)
	var lines []string
	for _, p := range parts {
		if !strings.HasPrefix(p, "~~~\n") || !strings.HasSuffix(p, "\n~~~") {
			t.Fatalf("part not wrapped in the fence: %q", p[:20])
		}
		lines = append(lines, strings.Split(strings.TrimSuffix(strings.TrimPrefix(p, "~~~\n"), "\n~~~"), "\n")...)
	}
	if len(lines) != 400 {
		t.Fatalf("code lines after split: got %d, want 400", len(lines))
	}
}

func TestMessagesStayUnderEventLimit(t *testing.T) {
	r := newRenderer()
	// '<' becomes "&lt;" in HTML: four times the bytes.
	msgs, err := r.messages(strings.Repeat("<", 60000), event.MsgText)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for i, m := range msgs {
		if n := len(m.Body) + len(m.FormattedBody); n > maxContentBytes {
			t.Errorf("message %d: %d bytes of body+html, want at most %d", i, n, maxContentBytes)
		}
		total += len(m.Body)
	}
	if total != 60000 {
		t.Fatalf("bodies: got %d bytes in all, want 60000", total)
	}
}

func TestTruncate(t *testing.T) {
	got := truncate(strings.Repeat("ü", 100), 50)
	if len(got) > 50 || !utf8.ValidString(got) || !strings.HasSuffix(got, "(truncated)") {
		t.Fatalf("got %q (%d bytes), want ≤ 50 valid bytes ending in the mark", got, len(got))
	}
	if got := truncate("short", 50); got != "short" {
		t.Fatalf("got %q, want it unchanged", got)
	}
}

type mapCursors map[string]string

func (m mapCursors) Cursor(_ context.Context, n string) (string, error) { return m[n], nil }
func (m mapCursors) SetCursor(_ context.Context, n, v string) error     { m[n] = v; return nil }

func validOptions(t *testing.T) Options {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "unused.db")) // New does not connect
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return Options{
		Homeserver: "https://matrix.example.org", UserID: "@conch:example.org", AccessToken: "t",
		AllowFrom: []string{"@alice:example.org"}, DB: db, Cursors: mapCursors{}, PickleKey: []byte("k"),
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
		want   string // substring of the error, "" for valid
	}{
		{"valid", func(*Options) {}, ""},
		{"no homeserver", func(o *Options) { o.Homeserver = "" }, "homeserver"},
		{"homeserver without scheme", func(o *Options) { o.Homeserver = "matrix.example.org" }, "homeserver"},
		{"bad user id", func(o *Options) { o.UserID = "conch" }, "user id"},
		{"no credentials", func(o *Options) { o.AccessToken = "" }, "access token"},
		{"bad allow entry", func(o *Options) { o.AllowFrom = []string{"alice"} }, "allow_from"},
		{"bad group policy", func(o *Options) { o.GroupPolicy = "maybe" }, "group policy"},
		{"no db", func(o *Options) { o.DB = nil }, "database"},
		{"no cursors", func(o *Options) { o.Cursors = nil }, "cursor store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions(t)
			tt.change(&o)
			_, err := New(o)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error about %s", err, tt.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	c := &Channel{opts: Options{BackoffBase: time.Second, BackoffMax: 10 * time.Second}}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := c.backoffPolicy().Delay(i + 1); got != w {
			t.Errorf("attempt %d: got %s, want %s", i+1, got, w)
		}
	}
}

func TestMention(t *testing.T) {
	c := &Channel{cli: &mautrix.Client{UserID: "@conch:example.org"}, botName: "Conch Bot"}
	tests := []struct {
		name     string
		content  event.MessageEventContent
		wantText string
		wantOK   bool
	}{
		{"localpart prefix", event.MessageEventContent{Body: "conch: run tests"}, "run tests", true},
		{"display name prefix", event.MessageEventContent{Body: "Conch Bot, hi"}, "hi", true},
		{"full id", event.MessageEventContent{Body: "@conch:example.org do it"}, "do it", true},
		{"intentional mention", event.MessageEventContent{Body: "look at this", Mentions: &event.Mentions{UserIDs: []id.UserID{"@conch:example.org"}}}, "look at this", true},
		{"pill", event.MessageEventContent{Body: "hey you", FormattedBody: `hey <a href="https://matrix.to/#/@conch:example.org">you</a>`}, "hey you", true},
		{"other word", event.MessageEventContent{Body: "conchology is fun"}, "conchology is fun", false},
		{"not addressed", event.MessageEventContent{Body: "just chatting"}, "just chatting", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, ok := c.mention(&tt.content, tt.content.Body)
			if text != tt.wantText || ok != tt.wantOK {
				t.Fatalf("got %q %v, want %q %v", text, ok, tt.wantText, tt.wantOK)
			}
		})
	}
}

func TestLoadOrCreatePickleKey(t *testing.T) {
	dir := t.TempDir()
	if k, err := LoadOrCreatePickleKey("given", "", dir); err != nil || string(k) != "given" {
		t.Fatalf("explicit key: got %q %v, want \"given\"", k, err)
	}
	k1, err := LoadOrCreatePickleKey("", "", dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) < 32 {
		t.Fatalf("generated key: got %d bytes, want at least 32", len(k1))
	}
	info, err := os.Stat(filepath.Join(dir, PickleKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: got %v, want 0600", info.Mode().Perm())
	}
	k2, err := LoadOrCreatePickleKey("", "", dir)
	if err != nil || string(k2) != string(k1) {
		t.Fatalf("second call: got %q %v, want the same key", k2, err)
	}
	file := filepath.Join(dir, "other.key")
	if err := os.WriteFile(file, []byte("fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := LoadOrCreatePickleKey("", file, dir); err != nil || string(k) != "fromfile" {
		t.Fatalf("key file: got %q %v, want \"fromfile\"", k, err)
	}
	if _, err := LoadOrCreatePickleKey("", filepath.Join(dir, "missing"), dir); err == nil {
		t.Fatal("missing key file: got nil, want an error")
	}
}

func TestCursorSyncStore(t *testing.T) {
	ctx := context.Background()
	s := cursorSyncStore{cursors: mapCursors{}}
	u := id.UserID("@conch:example.org")
	if v, err := s.LoadNextBatch(ctx, u); err != nil || v != "" {
		t.Fatalf("empty store: got %q %v, want \"\"", v, err)
	}
	if err := s.SaveNextBatch(ctx, u, "s42"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveFilterID(ctx, u, "7"); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.LoadNextBatch(ctx, u); v != "s42" {
		t.Fatalf("next batch: got %q, want s42", v)
	}
	if v, _ := s.LoadFilterID(ctx, u); v != "7" {
		t.Fatalf("filter: got %q, want 7", v)
	}
	if v, _ := s.LoadNextBatch(ctx, "@other:example.org"); v != "" {
		t.Fatalf("other user's token: got %q, want \"\"", v)
	}
}

func TestStatusOtherChannel(t *testing.T) {
	c, err := New(validOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	c.onUndecryptable(&event.Event{RoomID: "!r:example.org", ID: "$e"}, errNoE2EE)
	if got := c.Status(context.Background(), conch.ConversationKey{Channel: conch.ChannelEmail, ID: "!r:example.org"}); len(got) != 0 {
		t.Fatalf("status for another channel: got %q, want nothing", got)
	}
	if got := c.Status(context.Background(), keyOf("!r:example.org")); len(got) != 1 {
		t.Fatalf("status for the room: got %q, want one line", got)
	}
}
