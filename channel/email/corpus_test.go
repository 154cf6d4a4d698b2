package email

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
)

// memCursors is a CursorStore and a SentStore in memory.
type memCursors struct {
	mu   sync.Mutex
	m    map[string]string
	sent map[string]conch.ConversationKey
}

func (s *memCursors) Cursor(_ context.Context, name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[name], nil
}

func (s *memCursors) SetCursor(_ context.Context, name, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]string{}
	}
	s.m[name] = value
	return nil
}

func (s *memCursors) RecordSent(_ context.Context, key conch.ConversationKey, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent == nil {
		s.sent = map[string]conch.ConversationKey{}
	}
	s.sent[string(key.Channel)+"\x00"+id] = key
	return nil
}

func (s *memCursors) SentConversation(_ context.Context, channel conch.ChannelName, id string) (conch.ConversationKey, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key, ok := s.sent[string(channel)+"\x00"+id]
	return key, ok, nil
}

var (
	_ conch.CursorStore = (*memCursors)(nil)
	_ conch.SentStore   = (*memCursors)(nil)
)

func testOptions() Options {
	store := &memCursors{}
	return Options{
		Address: "conch@example.org", IMAPAddr: "127.0.0.1:1", IMAPUsername: "conch", IMAPPassword: "pw",
		SMTPAddr: "127.0.0.1:2", Cursors: store, Sent: store,
	}.withConfigDefaults()
}

// withConfigDefaults fills what config/default.toml's [email] gives
// (tls, mailbox, session, idle_refresh, poll_interval, the limits,
// start_attempts) where o leaves it zero: the channel itself has no
// defaults for them.
func (o Options) withConfigDefaults() Options {
	if o.IMAPTLS == "" {
		o.IMAPTLS = TLSImplicit
	}
	if o.SMTPTLS == "" {
		o.SMTPTLS = TLSStartTLS
	}
	if o.Mailbox == "" {
		o.Mailbox = "INBOX"
	}
	if o.Session == "" {
		o.Session = SessionThread
	}
	if o.IdleRefresh == 0 {
		o.IdleRefresh = 10 * time.Minute
	}
	if o.PollInterval == 0 {
		o.PollInterval = 30 * time.Second
	}
	if o.MaxMessageBytes == 0 {
		o.MaxMessageBytes = 40 << 20
	}
	if o.MaxAttachmentBytes == 0 {
		o.MaxAttachmentBytes = conch.MaxAttachmentSize
	}
	if o.MaxPerHour == 0 {
		o.MaxPerHour = 30
	}
	if o.StartAttempts == 0 {
		o.StartAttempts = 5
	}
	return o
}

// admits stands in for the gateway's admission (gateway.Allowlist, whose
// own tests hold the rule): addresses, @domain entries matched against the
// domain after an address's last @, and "*".
type admits []string

func (a admits) Admits(_ context.Context, ch conch.ChannelName, ids ...conch.UserID) bool {
	if ch != conch.ChannelEmail {
		return false
	}
	for _, id := range ids {
		addr := strings.ToLower(string(id))
		for _, e := range a {
			if e == "*" || e == addr {
				return true
			}
			if i := strings.LastIndexByte(addr, '@'); i > 0 && strings.HasPrefix(e, "@") && addr[i:] == e {
				return true
			}
		}
	}
	return false
}

// testAdmits is who the tests' gateway admits unless a test says otherwise.
var testAdmits = admits{"alice@example.org", "@friends.example"}

func newTestChannel(t *testing.T, mod func(*Options)) *Channel {
	t.Helper()
	o := testOptions()
	if mod != nil {
		mod(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rawMail builds a raw message from header lines and a body (CRLF line ends).
func rawMail(headers []string, body string) []byte {
	var b strings.Builder
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	b.WriteString(strings.ReplaceAll(body, "\n", "\r\n"))
	return []byte(b.String())
}

func std(from, subject, id string, extra ...string) []string {
	return append([]string{
		"From: " + from, "To: conch@example.org", "Subject: " + subject,
		"Message-ID: <" + id + ">", "Date: Mon, 23 Nov 2026 10:00:00 +0000", "MIME-Version: 1.0",
	}, extra...)
}

func headerOf(raw []byte) []byte {
	if i := bytes.Index(raw, []byte("\r\n\r\n")); i >= 0 {
		return raw[:i+4]
	}
	return raw
}

func readAll(t *testing.T, a conch.Attachment) []byte {
	t.Helper()
	r, err := a.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wrap76(s string) string {
	var b strings.Builder
	for len(s) > 76 {
		b.WriteString(s[:76] + "\n")
		s = s[76:]
	}
	b.WriteString(s)
	return b.String()
}

// TestCorpus runs the hard messages of the issue through the whole read
// path (parse, loop and spoof checks, allowlist, composition) and checks
// the outcome of each.
func TestCorpus(t *testing.T) {
	pdf := bytes.Repeat([]byte("%PDF-1.4 fake pdf bytes\n"), 100)
	big := make([]byte, 14<<20) // 14 MiB of file: the mail is over 19 MiB in base64
	for i := range big {
		big[i] = byte(i * 7)
	}
	bigSum := sha256.Sum256(big)
	authOpts := func(o *Options) { o.TrustedAuthservID = "mx.example.org" }

	tests := []struct {
		name    string
		raw     []byte
		opts    func(*Options)
		admit   admits // who the gateway admits; testAdmits when nil
		maxMsg  int64  // when set, the mail counts as over MaxMessageBytes (header only)
		wantOK  bool
		text    []string // substrings of Inbound.Text
		notText []string
		files   map[string]int64 // name → size (-1: any)
		check   func(t *testing.T, in conch.Inbound)
	}{{
		name:   "plain text starts a thread",
		raw:    rawMail(std("Alice <alice@example.org>", "Build the thing", "a1@example.org", "Content-Type: text/plain; charset=utf-8"), "Please build it.\n"),
		wantOK: true, text: []string{"Subject: Build the thing", "Please build it."},
		check: func(t *testing.T, in conch.Inbound) {
			if in.Key != threadKey("alice@example.org", "a1@example.org") || in.Sender != "alice@example.org" || in.SenderName != "Alice" || in.ExternalID != "a1@example.org" {
				t.Errorf("got key %v sender %q name %q id %q", in.Key, in.Sender, in.SenderName, in.ExternalID)
			}
			if got := in.Thread.References; len(got) != 1 || got[0] != "a1@example.org" || in.Thread.Subject != "Build the thing" {
				t.Errorf("thread: got %+v", in.Thread)
			}
		},
	}, {
		name: "HTML only becomes Markdown, the HTML is kept",
		raw: rawMail(std("alice@example.org", "html", "h1@example.org", "Content-Type: text/html; charset=utf-8"),
			"<html><head><style>p{color:red}</style><script>alert(1)</script></head><body><p>Hello <b>bold</b> and <a href=\"https://example.org/x\">a link</a></p><ul><li>one</li><li>two</li></ul></body></html>"),
		wantOK: true, text: []string{"**bold**", "[a link](https://example.org/x)", "- one"}, notText: []string{"<b>", "alert(1)", "color:red"},
		files: map[string]int64{"message.html": -1},
	}, {
		name: "base64 UTF-8 body",
		raw: rawMail(std("alice@example.org", "b64", "b1@example.org", "Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: base64"),
			base64.StdEncoding.EncodeToString([]byte("Grüße aus Köln — ça va?\n"))),
		wantOK: true, text: []string{"Grüße aus Köln — ça va?"},
	}, {
		name: "quoted-printable UTF-8 subject and Latin-1 body",
		raw: rawMail([]string{"From: =?UTF-8?Q?J=C3=BCrgen?= <alice@example.org>", "To: conch@example.org", "Subject: =?UTF-8?Q?Gr=C3=BC=C3=9Fe_=E2=9C=93?=", "Message-ID: <q1@example.org>",
			"MIME-Version: 1.0", "Content-Type: text/plain; charset=iso-8859-1", "Content-Transfer-Encoding: quoted-printable"}, "Sch=F6ne Gr=FC=DFe\n"),
		wantOK: true, text: []string{"Subject: Grüße ✓", "Schöne Grüße"},
		check: func(t *testing.T, in conch.Inbound) {
			if in.SenderName != "Jürgen" {
				t.Errorf("sender name: got %q, want Jürgen", in.SenderName)
			}
		},
	}, {
		name: "multipart with an attachment (RFC 2231 name)",
		raw: rawMail(std("alice@example.org", "report", "m1@example.org", `Content-Type: multipart/mixed; boundary="b1"`),
			"--b1\nContent-Type: text/plain; charset=utf-8\n\nSee the report.\n--b1\nContent-Type: application/pdf\nContent-Disposition: attachment; filename*=UTF-8''Bericht%20%C3%BC.pdf\nContent-Transfer-Encoding: base64\n\n"+
				wrap76(base64.StdEncoding.EncodeToString(pdf))+"\n--b1--\n"),
		wantOK: true, text: []string{"See the report."},
		files: map[string]int64{"Bericht ü.pdf": int64(len(pdf))},
		check: func(t *testing.T, in conch.Inbound) {
			for _, a := range in.Attachments {
				if a.Name == "Bericht ü.pdf" && (!bytes.Equal(readAll(t, a), pdf) || a.MediaType != "application/pdf") {
					t.Errorf("attachment %q (%s): content differs", a.Name, a.MediaType)
				}
			}
		},
	}, {
		name: "malformed MIME: no closing boundary, broken base64 part",
		raw: rawMail(std("alice@example.org", "broken", "x1@example.org", `Content-Type: multipart/mixed; boundary="zz"`),
			"--zz\nContent-Type: text/plain\n\nStill readable.\n--zz\nContent-Type: application/octet-stream\nContent-Disposition: attachment; filename=a.bin\nContent-Transfer-Encoding: base64\n\n!!!not base64***\n"),
		wantOK: true, text: []string{"Still readable."},
	}, {
		name:   "malformed: no From at all is skipped",
		raw:    rawMail([]string{"To: conch@example.org", "Subject: who", "Message-ID: <nf@example.org>"}, "anonymous\n"),
		wantOK: false,
	}, {
		name:   "auto-reply (Auto-Submitted) is not answered",
		raw:    rawMail(std("alice@example.org", "Out of office", "o1@example.org", "Auto-Submitted: auto-replied"), "I am away.\n"),
		wantOK: false,
	}, {
		name:   "Auto-Submitted: no is a person",
		raw:    rawMail(std("alice@example.org", "hi", "o2@example.org", "Auto-Submitted: no"), "hello\n"),
		wantOK: true, text: []string{"hello"},
	}, {
		name:   "list mail is not answered",
		raw:    rawMail(std("alice@example.org", "[list] news", "l1@example.org", "List-Id: <news.lists.example.org>"), "news\n"),
		wantOK: false,
	}, {
		name:   "Precedence: bulk is not answered",
		raw:    rawMail(std("alice@example.org", "bulk", "p1@example.org", "Precedence: bulk"), "offer\n"),
		wantOK: false,
	}, {
		name:   "a bounce from MAILER-DAEMON is not answered",
		raw:    rawMail(std("MAILER-DAEMON@example.org", "Undelivered Mail Returned to Sender", "d1@example.org"), "bounce\n"),
		admit:  admits{"*"},
		wantOK: false,
	}, {
		name:   "our own address is not answered",
		raw:    rawMail(std("Conch <CONCH@example.org>", "Re: loop", "own1@example.org"), "my own reply\n"),
		admit:  admits{"*"},
		wantOK: false,
	}, {
		name:   "unknown sender is dropped",
		raw:    rawMail(std("mallory@evil.example", "hi", "u1@evil.example"), "let me in\n"),
		wantOK: false,
	}, {
		name:   "an @domain entry allows the whole domain",
		raw:    rawMail(std("bob@friends.example", "hi", "f1@friends.example"), "from a friend\n"),
		wantOK: true, text: []string{"from a friend"},
	}, {
		name: "a quoted local part with an @: admission and DMARC read the domain after the last @",
		raw: rawMail(std(`"a@b"@friends.example`, "hi", "q1@friends.example",
			"Authentication-Results: mx.example.org; dmarc=pass header.from=friends.example"), "quoted\n"),
		opts: authOpts, wantOK: true, text: []string{"quoted"},
	}, {
		name: "spoofed From: dmarc=fail at the trusted server is dropped",
		raw: rawMail(std("alice@example.org", "wire money", "s1@evil.example",
			"Authentication-Results: mx.example.org; dkim=none; spf=fail smtp.mailfrom=evil.example; dmarc=fail header.from=example.org"), "pay now\n"),
		opts: authOpts, wantOK: false,
	}, {
		name: "spoofed From: a forged pass from another authserv-id does not count",
		raw: rawMail(std("alice@example.org", "wire money", "s2@evil.example",
			"Authentication-Results: mx.example.org; dmarc=fail header.from=example.org",
			"Authentication-Results: mx.evil.example; dmarc=pass header.from=example.org"), "pay now\n"),
		opts: authOpts, wantOK: false,
	}, {
		name:   "no Authentication-Results at all is dropped when a server is trusted",
		raw:    rawMail(std("alice@example.org", "hi", "s3@example.org"), "hello\n"),
		opts:   authOpts,
		wantOK: false,
	}, {
		name: "dmarc=pass at the trusted server is accepted",
		raw: rawMail(std("alice@example.org", "hi", "s4@example.org",
			"Authentication-Results: mx.example.org; dkim=pass header.d=example.org; spf=pass smtp.mailfrom=alice@example.org; dmarc=pass header.from=example.org"), "hello\n"),
		opts: authOpts, wantOK: true, text: []string{"hello"},
	}, {
		name: "without DMARC, an aligned DKIM pass is accepted",
		raw: rawMail(std("alice@example.org", "hi", "s5@example.org",
			"Authentication-Results: mx.example.org; dkim=pass header.d=mail.example.org"), "hello\n"),
		opts: authOpts, wantOK: true,
	}, {
		name: "without DMARC, a DKIM pass of another organisation is not",
		raw: rawMail(std("alice@example.org", "hi", "s6@example.org",
			"Authentication-Results: mx.example.org; dkim=pass header.d=evil.example"), "hello\n"),
		opts: authOpts, wantOK: false,
	}, {
		name: "a reply: quoted history and signature trimmed, the whole mail kept",
		raw: rawMail(std("alice@example.org", "Re: Build the thing", "r1@example.org", "In-Reply-To: <conch.1@example.org>", "References: <a1@example.org> <conch.1@example.org>", "Content-Type: text/plain; charset=utf-8"),
			"Yes, use Go 1.26.\n\n-- \nAlice\nCTO, Example\n\nOn Mon, 23 Nov 2026 at 10:00, conch <conch@example.org> wrote:\n> Which Go version?\n> \n> > Please build it.\n"),
		wantOK: true, text: []string{"Yes, use Go 1.26.", "message.txt"}, notText: []string{"Which Go version", "CTO", "Subject:"},
		files: map[string]int64{"message.txt": -1},
		check: func(t *testing.T, in conch.Inbound) {
			if in.Key != threadKey("alice@example.org", "a1@example.org") {
				t.Errorf("key: got %v, want the thread root a1", in.Key)
			}
			for _, a := range in.Attachments {
				if a.Name == "message.txt" && !strings.Contains(string(readAll(t, a)), "> Which Go version?") {
					t.Errorf("message.txt lacks the quoted history: %q", readAll(t, a))
				}
			}
			if got := in.Thread.References; len(got) != 3 || got[2] != "r1@example.org" {
				t.Errorf("references: got %q, want a1, conch.1, r1", got)
			}
		},
	}, {
		name: "Outlook-style reply on top",
		raw: rawMail(std("alice@example.org", "RE: plan", "ol1@example.org", "In-Reply-To: <p0@example.org>"),
			"Sounds good.\n\n________________________________\nFrom: conch <conch@example.org>\nSent: Monday, 23 November 2026 10:00\nTo: Alice\nSubject: plan\n\nHere is the plan.\n"),
		wantOK: true, text: []string{"Sounds good."}, notText: []string{"Here is the plan"},
	}, {
		name:   "a command on the first line",
		raw:    rawMail(std("alice@example.org", "Re: x", "c1@example.org", "In-Reply-To: <a1@example.org>"), "/stop\n\n-- \nAlice\n\nOn Mon, Alice wrote:\n> old\n"),
		wantOK: true,
		check: func(t *testing.T, in conch.Inbound) {
			if in.Text != "/stop" {
				t.Errorf("text: got %q, want /stop", in.Text)
			}
		},
	}, {
		name: "20 MB mail with a 14 MiB file",
		raw: rawMail(std("alice@example.org", "big", "big1@example.org", `Content-Type: multipart/mixed; boundary="bb"`),
			"--bb\nContent-Type: text/plain\n\nthe data\n--bb\nContent-Type: application/octet-stream\nContent-Disposition: attachment; filename=data.bin\nContent-Transfer-Encoding: base64\n\n"+
				wrap76(base64.StdEncoding.EncodeToString(big))+"\n--bb--\n"),
		wantOK: true, text: []string{"the data"}, files: map[string]int64{"data.bin": int64(len(big))},
		check: func(t *testing.T, in conch.Inbound) {
			for _, a := range in.Attachments {
				if a.Name == "data.bin" && sha256.Sum256(readAll(t, a)) != bigSum {
					t.Error("data.bin differs from what was sent")
				}
			}
		},
	}, {
		name:   "a file over the attachment cap is left out and named",
		raw:    rawMail(std("alice@example.org", "cap", "cap1@example.org", `Content-Type: multipart/mixed; boundary="c"`), "--c\nContent-Type: text/plain\n\nfiles\n--c\nContent-Type: application/zip\nContent-Disposition: attachment; filename=huge.zip\n\n"+strings.Repeat("x", 5000)+"\n--c--\n"),
		opts:   func(o *Options) { o.MaxAttachmentBytes = 1000 },
		wantOK: true, text: []string{"files", `"huge.zip"`, "over the limit"},
		files: map[string]int64{},
	}, {
		name:   "a mail over MaxMessageBytes is not downloaded; the model is told",
		raw:    rawMail(std("alice@example.org", "too big", "tb1@example.org"), "x\n"),
		maxMsg: 50 << 20,
		wantOK: true, text: []string{"over conch's limit", "too big"},
	}, {
		name:   "sender mode: one conversation per sender",
		raw:    rawMail(std("alice@example.org", "Re: a", "sm1@example.org", "References: <root@example.org>"), "hi\n"),
		opts:   func(o *Options) { o.Session = SessionSender },
		wantOK: true,
		check: func(t *testing.T, in conch.Inbound) {
			if in.Key != senderKey("alice@example.org") {
				t.Errorf("key: got %v, want the sender", in.Key)
			}
		},
	}, {
		name:   "no Message-ID: a stable id from the header",
		raw:    rawMail([]string{"From: alice@example.org", "To: conch@example.org", "Subject: no id"}, "hi\n"),
		wantOK: true,
		check: func(t *testing.T, in conch.Inbound) {
			if !strings.HasPrefix(in.ExternalID, "sha256-") || in.Key != senderKey("alice@example.org") {
				t.Errorf("got id %q key %v, want a header hash and the sender's conversation", in.ExternalID, in.Key)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestChannel(t, tt.opts)
			adm := testAdmits
			if tt.admit != nil {
				adm = tt.admit
			}
			md := mailData{header: headerOf(tt.raw), raw: tt.raw, size: int64(len(tt.raw))}
			if tt.maxMsg > 0 {
				md.raw, md.size = nil, tt.maxMsg+1
			}
			in, ok, err := c.read(context.Background(), adm, md)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if ok != tt.wantOK {
				t.Fatalf("accepted: got %v, want %v (text %q)", ok, tt.wantOK, in.Text)
			}
			if !ok {
				return
			}
			for _, s := range tt.text {
				if !strings.Contains(in.Text, s) {
					t.Errorf("text: got %q, want it to contain %q", in.Text, s)
				}
			}
			for _, s := range tt.notText {
				if strings.Contains(in.Text, s) {
					t.Errorf("text: got %q, want no %q", in.Text, s)
				}
			}
			if tt.files != nil {
				got := map[string]int64{}
				for _, a := range in.Attachments {
					got[a.Name] = a.Size
				}
				if len(got) != len(tt.files) {
					t.Errorf("files: got %v, want %v", got, tt.files)
				}
				for name, size := range tt.files {
					if g, ok := got[name]; !ok || (size >= 0 && g != size) {
						t.Errorf("file %q: got size %d (present %v), want %d", name, g, ok, size)
					}
				}
			}
			if tt.check != nil {
				tt.check(t, in)
			}
		})
	}
}

func TestRateLimitPerSender(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	c := newTestChannel(t, func(o *Options) {
		o.MaxPerHour = 2
		o.Now = func() time.Time { return now }
	})
	send := func(from string, n int) bool {
		raw := rawMail(std(from, "hi", fmt.Sprintf("rl%d-%s", n, from)), "hi\n")
		_, ok, err := c.read(context.Background(), testAdmits, mailData{header: headerOf(raw), raw: raw})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !send("alice@example.org", 1) || !send("alice@example.org", 2) {
		t.Fatal("the first two mails of the hour were refused")
	}
	if send("alice@example.org", 3) {
		t.Error("third mail within the hour: accepted, want refused")
	}
	if !send("bob@friends.example", 1) {
		t.Error("another sender was limited too")
	}
	now = now.Add(61 * time.Minute)
	if !send("alice@example.org", 4) {
		t.Error("an hour later: refused, want accepted")
	}
}

func TestThreadFollowsOurReply(t *testing.T) {
	c := newTestChannel(t, nil)
	ctx := context.Background()
	key := threadKey("alice@example.org", "root@example.org")
	if err := c.opts.Sent.RecordSent(ctx, key, sentID("conch.abc@example.org")); err != nil {
		t.Fatal(err)
	}
	// A client that kept only In-Reply-To (our reply's id).
	raw := rawMail(std("alice@example.org", "Re: x", "n1@example.org", "In-Reply-To: <conch.abc@example.org>"), "more\n")
	in, ok, err := c.read(ctx, testAdmits, mailData{header: headerOf(raw), raw: raw})
	if err != nil || !ok {
		t.Fatalf("read: ok %v err %v", ok, err)
	}
	if in.Key != key {
		t.Errorf("key: got %v, want %v (the conversation our reply belonged to)", in.Key, key)
	}
	// Someone else answering our reply does not enter Alice's conversation.
	raw = rawMail(std("bob@friends.example", "Re: x", "n2@friends.example", "In-Reply-To: <conch.abc@example.org>"), "me too\n")
	in, _, _ = c.read(ctx, testAdmits, mailData{header: headerOf(raw), raw: raw})
	if in.Key == key {
		t.Errorf("bob's reply joined alice's conversation %v", key)
	}
}

func TestTrimReply(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Just text.", "Just text."},
		{"Answer.\n\nOn Tue, 1 Dec 2026 at 09:00, Bob <b@x.org>\nwrote:\n> q\n", "Answer."},
		{"Antwort.\n\nAm 01.12.2026 um 09:00 schrieb Bob <b@x.org>:\n> Frage\n", "Antwort."},
		{"> quoted first\nmy inline answer\n> more quote\nsecond answer\n", "> quoted first\nmy inline answer\n> more quote\nsecond answer"},
		{"Top.\n\n-----Original Message-----\nFrom: x\n", "Top."},
		{"Hi\n\nSent from my iPhone", "Hi"},
		{"> only a quote\n> nothing new\n", "> only a quote\n> nothing new"},
		{"Text\n-- \nsig line", "Text"},
	}
	for _, tt := range tests {
		if got := trimReply(tt.in); got != tt.want {
			t.Errorf("trimReply(%q):\ngot  %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

func TestAligned(t *testing.T) {
	tests := []struct {
		d, from string
		want    bool
	}{
		{"example.org", "example.org", true},
		{"mail.example.org", "example.org", true},
		{"example.co.uk", "other.co.uk", false},
		{"a.example.co.uk", "example.co.uk", true},
		{"evil.example", "example.org", false},
		{"", "example.org", false},
	}
	for _, tt := range tests {
		if got := aligned(tt.d, tt.from); got != tt.want {
			t.Errorf("aligned(%q, %q): got %v, want %v", tt.d, tt.from, got, tt.want)
		}
	}
}
