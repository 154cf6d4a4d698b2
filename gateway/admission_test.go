package gateway

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/fake"
	"conch/spool"
)

func TestAllowlistRule(t *testing.T) {
	al := NewAllowlist("@Alice:Example.org", "bob@example.org", "@corp.example", "@carol", "12345")
	for _, tc := range []struct {
		id   conch.UserID
		want bool
	}{
		{"@alice:example.org", true},       // Matrix id, any case
		{"@alice:example.org.evil", false}, // not the same id
		{"BOB@example.org", true},          // address, any case
		{"dave@corp.example", true},        // address at an allowed domain
		{"dave@sub.corp.example", false},   // a subdomain is another domain
		{"dave@corp.example.evil.org", false},
		{"@carol", true}, // a Telegram @username
		{"carol", false},
		{"x@carol", true}, // "@carol" read as a domain entry
		{"12345", true},   // a Telegram user id
		{"123456", false},
		{"@corp.example", true},
		{"a@b@corp.example", true},            // a quoted local part with an @ ("a@b"@corp.example): the domain follows the last @
		{"dave@corp.example@evil.org", false}, // … so this one is at evil.org
		{"", false},
	} {
		if got := al.Allows(tc.id); got != tc.want {
			t.Errorf("Allows(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
	if !NewAllowlist("*").Allows("anyone") || !NewAllowlist().Empty() {
		t.Error("* must allow everyone and an empty list nobody")
	}
}

func TestAdmissionUsesAliasesButNeverDisplayNames(t *testing.T) {
	e := newEnvWith(t, nil, func(o *Options) {
		o.Allow = map[conch.ChannelName]Allowlist{cli: NewAllowlist("@alice")}
	})
	e.start()
	e.model.Push(fake.Text("hi alice"))
	key := conch.ConversationKey{Channel: cli, ID: "a"}
	ctx := context.Background()
	// A display name that looks like an allowed id admits nobody.
	if err := e.gw.HandleInbound(ctx, conch.Inbound{Key: key, Sender: "999", SenderName: "@alice", Text: "let me in"}); err != nil {
		t.Fatal(err)
	}
	if err := e.gw.HandleInbound(ctx, conch.Inbound{Key: key, Sender: "42", SenderAliases: []conch.UserID{"@alice"}, Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the answer", func(out []conch.Outbound) bool { return len(out) > 0 && out[len(out)-1].Text == "hi alice" })
	e.idle()
	if n := len(e.model.Requests()); n != 1 {
		t.Fatalf("model called %d times, want 1 (the display name must not admit)", n)
	}
	if !e.gw.Admits(ctx, cli, "x", "@ALICE") || e.gw.Admits(ctx, conch.ChannelMatrix, "@alice") {
		t.Fatal("Admits: want any one id on the channel's own list")
	}
}

func TestSubmitBypassesAdmissionAndRecordsOrigin(t *testing.T) {
	e := newEnv(t, nil)
	e.start()
	e.model.Push(fake.Text("the build is green"))
	key := conch.ConversationKey{Channel: cli, ID: "sched"}
	turn, err := e.gw.Submit(context.Background(), conch.Inbound{
		Key: key, Text: "check the build", Origin: conch.Origin{Kind: conch.OriginSchedule, Ref: "hourly"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if turn.Inbound.Origin.Kind != conch.OriginSchedule || turn.Inbound.Sender != "conch:schedule" {
		t.Fatalf("turn inbound: %+v", turn.Inbound)
	}
	e.waitFor("the answer", func(out []conch.Outbound) bool { return len(out) > 0 && out[len(out)-1].Text == "the build is green" })
	// A channel may not pretend to be a schedule.
	err = e.gw.HandleInbound(context.Background(), conch.Inbound{Key: key, Sender: "alice", Text: "x", Origin: conch.Origin{Kind: conch.OriginSchedule}})
	if conch.KindOf(err) != conch.KindInvalid {
		t.Fatalf("channel message with a schedule origin: got %v, want KindInvalid", err)
	}
}

func TestEventsOfATurnInOrder(t *testing.T) {
	e := newEnv(t, nil)
	e.start()
	key := conch.ConversationKey{Channel: cli, ID: "ev"}
	sub, err := e.gw.Events().Subscribe(t.Context(), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.model.Push(fake.Call("c1", "echo", `{"x":1}`), fake.Text("done"))
	e.send("ev", "alice", "go")
	var types []string
	for ev := range sub {
		s := ev.Data.Type()
		if n, ok := ev.Data.(conch.NoticeEvent); ok {
			s += ":" + n.Text
		}
		if ts, ok := ev.Data.(conch.TurnState); ok {
			s += ":" + string(ts.Status)
		}
		types = append(types, s)
		if s == "turn:done" {
			break
		}
	}
	want := []string{"message", "turn:pending", "turn:running", "usage", "context", "tool_started", "tool_finished", "usage", "context", "message", "turn:done"}
	if !slices.Equal(types, want) {
		t.Fatalf("got events %v\nwant        %v", types, want)
	}
}

// releaser records what it was asked to release.
type releaser struct {
	mu   sync.Mutex
	keys []conch.ConversationKey
}

func (r *releaser) Release(_ context.Context, key conch.ConversationKey) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, key)
	return nil
}

func TestResetAndCloseReleaseEverythingHeld(t *testing.T) {
	rel := &releaser{}
	e := newEnvWith(t, nil, func(o *Options) { o.Releasers = []conch.Releaser{rel} })
	e.start()
	e.send("r", "alice", "/reset")
	e.waitFor("the reset notice", func(out []conch.Outbound) bool { return len(out) == 1 })
	key := conch.ConversationKey{Channel: cli, ID: "c"}
	if err := e.gw.ConversationClosed(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	want := []conch.ConversationKey{{Channel: cli, ID: "r"}, key}
	rel.mu.Lock()
	defer rel.mu.Unlock()
	if !slices.Equal(rel.keys, want) {
		t.Fatalf("released %v, want %v", rel.keys, want)
	}
}

func TestAttachmentsAreSpooledAndNamedToTheModel(t *testing.T) {
	sp, err := spool.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := &fakeRuntime{files: map[string][]byte{}}
	e := newEnvWith(t, nil, func(o *Options) {
		o.Attachments, o.MaxAttachmentBytes, o.Runtime = sp, 1024, rt
	})
	e.start()
	e.model.Push(fake.Text("got it"))
	opener := func(b []byte) func(context.Context) (io.ReadCloser, error) {
		return func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	err = e.gw.HandleInbound(context.Background(), conch.Inbound{
		Key: conch.ConversationKey{Channel: cli, ID: "files"}, Sender: "alice", Text: "look at these",
		Attachments: []conch.Attachment{
			{Name: "../../etc/report.csv", MediaType: "text/csv", Open: opener([]byte("a,b\n1,2\n"))},
			{Name: "huge.bin", Open: opener(bytes.Repeat([]byte("x"), 2048))},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := e.waitFor("the answer", func(out []conch.Outbound) bool { return len(out) > 0 && out[len(out)-1].Text == "got it" })
	if !strings.Contains(out[0].Text, "huge.bin") || !strings.Contains(out[0].Text, "larger than") {
		t.Fatalf("first message %q, want a notice that huge.bin was refused", out[0].Text)
	}
	reqs := e.model.Requests()
	user := reqs[0].Messages[0].Text
	if !strings.Contains(user, "look at these") || !strings.Contains(user, "/workspace/inbox/") || !strings.Contains(user, "-report.csv (text/csv, 8 bytes)") || strings.Contains(user, "huge") {
		t.Fatalf("the model read %q", user)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.files) != 1 {
		t.Fatalf("files in the sandbox: %v", rt.files)
	}
	for p, b := range rt.files {
		if !strings.HasPrefix(p, "/workspace/inbox/") || strings.Contains(p, "..") || string(b) != "a,b\n1,2\n" {
			t.Fatalf("sandbox got %s = %q", p, b)
		}
	}
}

// fakeRuntime is a conch.Runtime whose sandboxes only keep written files.
type fakeRuntime struct {
	mu    sync.Mutex
	files map[string][]byte
}

func (r *fakeRuntime) Sandbox(context.Context, conch.ConversationKey) (conch.Sandbox, error) {
	return fileSandbox{r}, nil
}
func (r *fakeRuntime) Remove(context.Context, conch.ConversationKey) error { return nil }
func (r *fakeRuntime) Reconcile(context.Context) error                     { return nil }
func (r *fakeRuntime) Close() error                                        { return nil }

type fileSandbox struct{ r *fakeRuntime }

func (s fileSandbox) ID() string { return "fake" }
func (s fileSandbox) Exec(context.Context, conch.ExecRequest) (conch.ExecResult, error) {
	return conch.ExecResult{}, nil
}
func (s fileSandbox) ReadFile(context.Context, string, int64) ([]byte, error) { return nil, nil }
func (s fileSandbox) WriteFile(_ context.Context, p string, b []byte, _ fs.FileMode) error {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.files[p] = b
	return nil
}
func (s fileSandbox) ListFiles(context.Context, string) ([]conch.FileInfo, error) { return nil, nil }

// editingChannel is a fake channel that edits progress in place and counts
// how often.
type editingChannel struct {
	*fake.Channel
	mu    sync.Mutex
	edits []string
	times []time.Time
}

func (c *editingChannel) SendEditable(_ context.Context, out conch.Outbound) (conch.MessageRef, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.edits, c.times = append(c.edits, out.Text), append(c.times, time.Now())
	return conch.MessageRef{Key: out.Key, ID: "p"}, nil
}

func (c *editingChannel) Edit(_ context.Context, _ conch.MessageRef, text string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.edits, c.times = append(c.edits, text), append(c.times, time.Now())
	return nil
}

func TestProgressIsThrottledInOnePlaceAndNothingIsLost(t *testing.T) {
	ch := &editingChannel{Channel: fake.NewChannel(cli)}
	e := newEnvWith(t, nil, func(o *Options) {
		o.Channels = []conch.Channel{ch}
		o.EditInterval = 200 * time.Millisecond
	})
	e.ch = ch.Channel
	e.start()
	// Twenty tool calls as fast as the model can make them.
	for i := range 20 {
		e.model.Push(fake.Call("c"+string(rune('a'+i%26))+string(rune('a'+i/26)), "echo", `{"i":"`+strings.Repeat("1", i+1)+`"}`))
	}
	e.model.Push(fake.Text("finished"))
	start := time.Now()
	e.send("p", "alice", "work")
	e.waitFor("the answer", func(out []conch.Outbound) bool { return len(out) > 0 && out[len(out)-1].Text == "finished" })
	took := time.Since(start)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if max := int(took/(200*time.Millisecond)) + 2; len(ch.edits) > max {
		t.Fatalf("%d progress updates in %v, want at most %d (one per 200ms)", len(ch.edits), took, max)
	}
	for i := 1; i < len(ch.times); i++ {
		if gap := ch.times[i].Sub(ch.times[i-1]); gap < 150*time.Millisecond {
			t.Fatalf("updates %d and %d only %v apart", i-1, i, gap)
		}
	}
	last := ch.edits[len(ch.edits)-1]
	if !strings.HasSuffix(last, "echo: "+strings.Repeat("1", 20)) {
		t.Fatalf("the last update %q does not show the last tool call: a coalesced line was lost", last)
	}
}
