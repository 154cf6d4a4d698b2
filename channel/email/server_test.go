package email

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gomail "github.com/emersion/go-message/mail"

	"conch"
	"conch/internal/backoff"
	"conch/internal/testenv"
	testmail "conch/internal/testenv/mail"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testmail.Cleanup()
	os.Exit(code)
}

// echoHandler stands in for the gateway: it records each mail and answers
// it through the channel, once per Message-ID (as the store would).
type echoHandler struct {
	c *Channel

	mu      sync.Mutex
	seen    map[string]int
	ins     []conch.Inbound
	fail    int // the next fail calls return an error
	noReply bool
	note    chan struct{}
}

func newEchoHandler() *echoHandler {
	return &echoHandler{seen: map[string]int{}, note: make(chan struct{}, 100)}
}

func (h *echoHandler) HandleInbound(ctx context.Context, in conch.Inbound) error {
	h.mu.Lock()
	if h.fail > 0 {
		h.fail--
		h.mu.Unlock()
		return errors.New("store unavailable")
	}
	h.seen[in.ExternalID]++
	dup := h.seen[in.ExternalID] > 1
	h.ins = append(h.ins, in)
	noReply := h.noReply
	h.mu.Unlock()
	select {
	case h.note <- struct{}{}:
	default:
	}
	if dup || noReply {
		return nil
	}
	go func() {
		out := conch.Outbound{Key: in.Key, Kind: conch.OutboundReply, Text: "Got **" + firstLine(in.Text) + "**.",
			InReplyTo: in.ExternalID, Thread: in.Thread}
		if err := h.c.Send(context.Background(), out); err != nil {
			panic(fmt.Sprintf("send: %v", err))
		}
	}()
	return nil
}

func (h *echoHandler) ConversationClosed(context.Context, conch.ConversationKey) error { return nil }

func (h *echoHandler) Admits(context.Context, conch.ChannelName, ...conch.UserID) bool { return true }

func (h *echoHandler) inbound() []conch.Inbound {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]conch.Inbound(nil), h.ins...)
}

func (h *echoHandler) waitInbound(t *testing.T, n int, limit time.Duration) []conch.Inbound {
	t.Helper()
	deadline := time.After(limit)
	for {
		if ins := h.inbound(); len(ins) >= n {
			return ins
		}
		select {
		case <-h.note:
		case <-deadline:
			t.Fatalf("got %d mails handed over, want %d", len(h.inbound()), n)
		}
	}
}

func firstLine(s string) string {
	s = strings.TrimPrefix(s, "Subject: ")
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// fixture is a channel on the real mail server with conch's mailbox and a
// person's.
type fixture struct {
	srv    *testmail.Server
	conch  testmail.User
	alice  testmail.User
	opts   Options
	c      *Channel
	h      *echoHandler
	cancel context.CancelFunc
	done   chan error
	logs   *testenv.SyncBuffer
}

func newFixture(t testing.TB, srv *testmail.Server, mod func(*Options)) *fixture {
	t.Helper()
	f := &fixture{srv: srv, logs: &testenv.SyncBuffer{}}
	f.conch = srv.AddUser(t, testmail.UniqueName("conch"))
	f.alice = srv.AddUser(t, testmail.UniqueName("alice"))
	store := &memCursors{}
	f.opts = Options{
		Address: f.conch.Address, IMAPAddr: srv.IMAPAddr, IMAPUsername: f.conch.Local, IMAPPassword: f.conch.Password, IMAPTLS: TLSNone,
		SMTPAddr: srv.SMTPAddr, SMTPTLS: TLSNone,
		IdleRefresh: 5 * time.Second, CommandTimeout: 5 * time.Second,
		Backoff: backoff.Policy{Base: 100 * time.Millisecond, Cap: time.Second},
		Cursors: store, Sent: store,
		Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}.withConfigDefaults()
	if mod != nil {
		mod(&f.opts)
	}
	t.Cleanup(func() {
		f.stop()
		if t.Failed() {
			t.Logf("channel log:\n%s", f.logs.String())
		}
	})
	return f
}

// start runs the channel and waits until it watches the mailbox.
func (f *fixture) start(t testing.TB) {
	t.Helper()
	c, err := New(f.opts)
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	if f.h == nil {
		f.h = newEchoHandler()
	}
	f.h.c = c
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan error, 1)
	go func() { f.done <- c.Run(ctx, f.h) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(c.StatusLine(), "watching") {
		select {
		case err := <-f.done:
			f.cancel = nil
			t.Fatalf("Run ended before it connected: %v\n%s", err, f.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("channel not connected: %s\n%s\ngoroutines:\n%s", c.StatusLine(), f.logs.String(), buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *fixture) stop() {
	if f.cancel != nil {
		f.cancel()
		<-f.done
		f.cancel = nil
	}
}

func (f *fixture) send(t testing.TB, subject, id, body string, extra ...string) {
	t.Helper()
	hs := append([]string{"From: Alice <" + f.alice.Address + ">", "To: " + f.conch.Address, "Subject: " + subject,
		"Message-ID: <" + id + ">", "Date: " + time.Now().Format(time.RFC1123Z), "Content-Type: text/plain; charset=utf-8"}, extra...)
	f.srv.MustSend(t, f.alice.Address, []string{f.conch.Address}, rawMail(hs, body))
}

// TestRoundTrip: a person's mail reaches the handler and the reply lands in
// the person's mailbox, threaded, from conch's address, as text and HTML;
// the person's answer to it joins the same conversation.
func TestRoundTrip(t *testing.T) {
	srv := testmail.Shared(t)
	f := newFixture(t, srv, nil)
	f.start(t)

	f.send(t, "Build the thing", "rt1@example.test", "Please build it.\n")
	ins := f.h.waitInbound(t, 1, 20*time.Second)
	in := ins[0]
	if in.Sender != conch.UserID(f.alice.Address) || in.ExternalID != "rt1@example.test" || !strings.Contains(in.Text, "Please build it.") {
		t.Fatalf("inbound: %+v", in)
	}
	msgs := srv.MustWait(t, f.alice, 1, 30*time.Second)
	reply := msgs[0]
	h := reply.Header
	for k, want := range map[string]string{
		"Subject": "Re: Build the thing", "In-Reply-To": "<rt1@example.test>", "References": "<rt1@example.test>", "Auto-Submitted": "auto-replied",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("reply %s: got %q, want %q", k, got, want)
		}
	}
	if !strings.Contains(h.Get("From"), f.conch.Address) || !strings.HasSuffix(h.Get("Message-Id"), "@"+testmail.Domain+">") {
		t.Errorf("reply From %q Message-ID %q: want conch's address and domain", h.Get("From"), h.Get("Message-Id"))
	}
	plain, html := parts(t, reply.Raw)
	if !strings.Contains(plain, "Got **Build the thing**.") || !strings.Contains(html, "<strong>Build the thing</strong>") {
		t.Errorf("reply parts: text %q html %q", plain, html)
	}

	// Alice answers conch's reply; her client keeps In-Reply-To only.
	f.send(t, "Re: Build the thing", "rt2@example.test", "Thanks!\n\nOn Monday conch wrote:\n> Got it.\n", "In-Reply-To: "+h.Get("Message-Id"))
	ins = f.h.waitInbound(t, 2, 20*time.Second)
	if ins[1].Key != in.Key {
		t.Errorf("answer to the reply: conversation %v, want %v", ins[1].Key, in.Key)
	}
	if strings.Contains(ins[1].Text, "Got it") {
		t.Errorf("quoted history reached the model: %q", ins[1].Text)
	}
	srv.MustWait(t, f.alice, 2, 30*time.Second)
}

// parts returns the text/plain and text/html bodies of a mail.
func parts(t *testing.T, raw []byte) (plain, html string) {
	t.Helper()
	mr, err := gomail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p.Body)
		ct := p.Header.Get("Content-Type")
		switch {
		case strings.HasPrefix(ct, "text/plain"):
			plain = string(b)
		case strings.HasPrefix(ct, "text/html"):
			html = string(b)
		}
	}
}

// TestSendOnce: the same reply sent twice (the gateway re-delivers after a
// crash between sending and marking the turn done) arrives once.
func TestSendOnce(t *testing.T) {
	srv := testmail.Shared(t)
	f := newFixture(t, srv, nil)
	c, err := New(f.opts)
	if err != nil {
		t.Fatal(err)
	}
	out := conch.Outbound{Key: threadKey(f.alice.Address, "x1@example.test"), Kind: conch.OutboundReply, Text: "once",
		InReplyTo: "x1@example.test", Thread: conch.Thread{Subject: "s", References: []string{"x1@example.test"}}}
	ctx := context.Background()
	for range 2 {
		if err := c.Send(ctx, out); err != nil {
			t.Fatal(err)
		}
	}
	// A notice answering the same mail is a different message.
	if err := c.Send(ctx, conch.Outbound{Key: out.Key, Kind: conch.OutboundNotice, Text: "queued (position 1)", InReplyTo: out.InReplyTo, Thread: out.Thread}); err != nil {
		t.Fatal(err)
	}
	// Progress is not mailed.
	if err := c.Send(ctx, conch.Outbound{Key: out.Key, Kind: conch.OutboundProgress, Text: "running bash", InReplyTo: out.InReplyTo}); err != nil {
		t.Fatal(err)
	}
	srv.MustWait(t, f.alice, 2, 30*time.Second)
	time.Sleep(time.Second)
	if msgs, _ := srv.Messages(f.alice); len(msgs) != 2 {
		t.Fatalf("got %d mails, want 2 (the reply once and the notice)", len(msgs))
	}
}

// TestFirstStartAndRestart: mail already in the mailbox at the first start
// is history; mail that arrives while the channel is stopped is handled at
// the next start, once.
func TestFirstStartAndRestart(t *testing.T) {
	srv := testmail.Shared(t)
	f := newFixture(t, srv, nil)
	f.send(t, "old", "old1@example.test", "from before\n")
	srv.MustWait(t, f.conch, 1, 20*time.Second)
	f.start(t)
	f.send(t, "new", "new1@example.test", "after start\n")
	f.h.waitInbound(t, 1, 20*time.Second)
	f.stop()
	f.send(t, "while stopped", "new2@example.test", "while stopped\n")
	srv.MustWait(t, f.conch, 3, 20*time.Second)
	f.start(t)
	f.h.waitInbound(t, 2, 20*time.Second)
	time.Sleep(500 * time.Millisecond) // a third (old1) would show up by now
	ins := f.h.inbound()
	var ids []string
	for _, in := range ins {
		ids = append(ids, in.ExternalID)
	}
	if strings.Join(ids, ",") != "new1@example.test,new2@example.test" {
		t.Fatalf("handed over %v, want new1 then new2 (old1 is history)", ids)
	}
}

// TestHandlerFailureRetries: a mail the gateway could not store is not
// acknowledged; it is handed over again after the reconnect, and the
// mailbox is not blocked behind it.
func TestHandlerFailureRetries(t *testing.T) {
	srv := testmail.Shared(t)
	f := newFixture(t, srv, nil)
	f.h = newEchoHandler()
	f.h.fail = 2
	f.start(t)
	f.send(t, "one", "hf1@example.test", "one\n")
	f.send(t, "two", "hf2@example.test", "two\n")
	ins := f.h.waitInbound(t, 2, 30*time.Second)
	// Postfix may deliver two submissions in either order; what matters is
	// that both arrive, each once, after the failures.
	got := []string{ins[0].ExternalID, ins[1].ExternalID}
	slices.Sort(got)
	if strings.Join(got, ",") != "hf1@example.test,hf2@example.test" {
		t.Fatalf("handed over %v, want hf1 and hf2 once each", got)
	}
	srv.MustWait(t, f.alice, 2, 30*time.Second)
}

// TestPolling: without IDLE the channel polls.
func TestPolling(t *testing.T) {
	srv := testmail.Shared(t)
	f := newFixture(t, srv, func(o *Options) { o.NoIDLE, o.PollInterval = true, 300*time.Millisecond })
	f.start(t)
	if !strings.Contains(f.c.StatusLine(), "polling") {
		t.Errorf("status: %s", f.c.StatusLine())
	}
	f.send(t, "poll", "poll1@example.test", "polled\n")
	f.h.waitInbound(t, 1, 20*time.Second)
	srv.MustWait(t, f.alice, 1, 30*time.Second)
}

// TestIdleWatchdog: the connection goes silent without closing (a NAT
// that forgot it); the IDLE refresh gets no answer, the watchdog closes
// the connection and the channel reconnects and finds the mail.
func TestIdleWatchdog(t *testing.T) {
	srv := testmail.Shared(t)
	px := newStallProxy(t, srv.IMAPAddr)
	f := newFixture(t, srv, func(o *Options) {
		o.IMAPAddr = px.addr()
		o.IdleRefresh, o.CommandTimeout = time.Second, 2*time.Second
	})
	f.start(t)
	px.stallAll()
	f.send(t, "during stall", "st1@example.test", "are you there?\n")
	f.h.waitInbound(t, 1, 30*time.Second)
	if px.conns() < 2 {
		t.Errorf("the channel did not reconnect (%d connections)", px.conns())
	}
}

// TestLoginRefusedAtStart: a wrong password ends Run with an auth error
// instead of retrying in silence.
func TestLoginRefusedAtStart(t *testing.T) {
	srv := testmail.Shared(t)
	f := newFixture(t, srv, func(o *Options) { o.IMAPPassword = "wrong" })
	c, err := New(f.opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = c.Run(ctx, newEchoHandler())
	if conch.KindOf(err) != conch.KindAuth || !strings.Contains(err.Error(), "imap_password") {
		t.Fatalf("Run: got %v (kind %s), want an auth error naming email.imap_password", err, conch.KindOf(err))
	}
}

// TestOutage: the IMAP server is down for 60 s while mail arrives; the
// channel says so in its status, reconnects, and every mail is handed
// over and answered exactly once.
func TestOutage(t *testing.T) {
	testenv.Short(t)
	srv := testmail.Start(t)
	f := newFixture(t, srv, func(o *Options) { o.Backoff = backoff.Policy{Base: 500 * time.Millisecond, Cap: 5 * time.Second} })
	f.start(t)
	f.send(t, "before", "out0@example.test", "before the outage\n")
	srv.MustWait(t, f.alice, 1, 30*time.Second)
	qctx, qcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer qcancel()
	if err := srv.WaitQueueEmpty(qctx); err != nil {
		t.Fatal(err)
	}

	srv.StopIMAP()
	const n = 5
	for i := 1; i <= n; i++ {
		f.send(t, fmt.Sprintf("during %d", i), fmt.Sprintf("out%d@example.test", i), "while down\n")
	}
	deadline := time.Now().Add(60 * time.Second)
	sawDown := false
	for time.Now().Before(deadline) {
		if strings.Contains(f.c.StatusLine(), "cannot reach") {
			sawDown = true
		}
		time.Sleep(250 * time.Millisecond)
	}
	if !sawDown {
		t.Errorf("status never said the server was unreachable: %s", f.c.StatusLine())
	}
	if err := srv.StartIMAP(); err != nil {
		t.Fatal(err)
	}
	srv.MustWait(t, f.alice, n+1, 60*time.Second)
	time.Sleep(2 * time.Second) // a duplicate would show up by now
	msgs, _ := srv.Messages(f.alice)
	answered := map[string]int{}
	for _, m := range msgs {
		answered[m.Header.Get("In-Reply-To")]++
	}
	for i := 0; i <= n; i++ {
		if got := answered[fmt.Sprintf("<out%d@example.test>", i)]; got != 1 {
			t.Errorf("mail out%d answered %d times, want 1", i, got)
		}
	}
	if len(msgs) != n+1 {
		t.Errorf("got %d replies, want %d", len(msgs), n+1)
	}
	if !strings.Contains(f.c.StatusLine(), "watching") {
		t.Errorf("status after the outage: %s", f.c.StatusLine())
	}
}

// stallProxy forwards TCP connections and can silence all open ones
// without closing them.
type stallProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	stall  []chan struct{}
	n      int
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go p.serve()
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func (p *stallProxy) stallAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ch := range p.stall {
		close(ch)
	}
	p.stall = nil
}

func (p *stallProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		stalled := make(chan struct{})
		p.mu.Lock()
		p.stall = append(p.stall, stalled)
		p.n++
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				select {
				case <-stalled:
					// Silent: read and drop, never close (until the peer does).
					if err != nil {
						dst.Close()
						return
					}
					continue
				default:
				}
				if n > 0 {
					if _, werr := dst.Write(buf[:n]); werr != nil {
						src.Close()
						return
					}
				}
				if err != nil {
					dst.Close()
					return
				}
			}
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}
