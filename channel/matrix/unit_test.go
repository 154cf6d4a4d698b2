package matrix

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch"
)

// The rendering and splitting are tested in channel/internal/markdown;
// here the messages the channel builds from them.

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
