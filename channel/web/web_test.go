package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"conch"
)

type testServer struct {
	t     *testing.T
	srv   *httptest.Server
	ch    *Channel
	hub   *fakeHub
	gw    *fakeGateway
	read  *fakeRead
	boxes *fakeSandboxes
	terms *fakeTerminals
	store Logins
}

func newTestServer(t *testing.T, mod ...func(*Options)) *testServer {
	t.Helper()
	ts := &testServer{t: t, hub: newFakeHub(), read: &fakeRead{}, boxes: &fakeSandboxes{}, terms: &fakeTerminals{lines: make(chan string, 100)}, store: NewMemLogins()}
	ts.gw = newFakeGateway(ts.hub)
	opts := Options{
		Events: ts.hub, Control: ts.gw, Store: ts.store, Read: ts.read, History: ts.gw,
		Sandboxes: ts.boxes, Terminals: ts.terms,
		// config/default.toml's [web] values.
		MaxMessageBytes: 64 << 10,
		// Small, so the socket's read limit (text and files) stays one a
		// test can pass with a text frame (browser_poison_test.go).
		MaxFileBytes: 1 << 20,
		LoginTTL:     10 * time.Minute,
		SessionTTL:   720 * time.Hour,
		Metrics:      http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "conch_up 1") }),
	}
	for _, m := range mod {
		m(&opts)
	}
	ch, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts.ch = ch
	mux := http.NewServeMux()
	ch.Register(mux)
	ts.srv = httptest.NewServer(mux)
	t.Cleanup(ts.srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = ch.Run(ctx, ts.gw); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ts
}

// loginURL returns a fresh login link.
func (ts *testServer) loginURL() string {
	ts.t.Helper()
	tok, err := ts.ch.Auth().NewLoginToken(context.Background())
	if err != nil {
		ts.t.Fatal(err)
	}
	return ts.srv.URL + "/login?token=" + url.QueryEscape(tok)
}

// client returns an HTTP client that logged in with a login link and sends
// the session's request token with every request, as the page does.
func (ts *testServer) client() *http.Client {
	ts.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(ts.loginURL())
	if err != nil {
		ts.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get(tokenHeader) == "" {
		ts.t.Fatalf("login: status %d, token %q", resp.StatusCode, resp.Header.Get(tokenHeader))
	}
	c.Transport = tokenTransport{resp.Header.Get(tokenHeader)}
	return c
}

// tokenTransport adds a session's request token to every request.
type tokenTransport struct{ token string }

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(tokenHeader, t.token)
	return http.DefaultTransport.RoundTrip(r)
}

func (ts *testServer) do(c *http.Client, method, path string, body any) (int, []byte) {
	ts.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, ts.srv.URL+path, rd)
	req.Header.Set("Origin", ts.srv.URL)
	resp, err := c.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (ts *testServer) newConversation(c *http.Client) Conversation {
	ts.t.Helper()
	st, b := ts.do(c, "POST", "/api/conversations", map[string]string{"title": "test"})
	if st != http.StatusCreated {
		ts.t.Fatalf("create conversation: %d %s", st, b)
	}
	var cv Conversation
	if err := json.Unmarshal(b, &cv); err != nil {
		ts.t.Fatal(err)
	}
	return cv
}

func (ts *testServer) dial(ctx context.Context, c *http.Client, path string) (*websocket.Conn, error) {
	u := "ws" + strings.TrimPrefix(ts.srv.URL, "http") + path
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c, HTTPHeader: http.Header{"Origin": {ts.srv.URL}}})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	return conn, err
}

func (ts *testServer) chat(ctx context.Context, c *http.Client, id string, after int64) *websocket.Conn {
	ts.t.Helper()
	conn, err := ts.dial(ctx, c, fmt.Sprintf("/api/chat?c=%s&after=%d", id, after))
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.t.Cleanup(func() { conn.CloseNow() })
	return conn
}

// eventFrame decodes an event frame's type and data (serverFrame.Event is
// for writing; reading gets the wire form).
type wireEvent struct {
	Conversation string          `json:"conversation"`
	Turn         int64           `json:"turn"`
	Seq          int64           `json:"seq"`
	Type         string          `json:"type"`
	Data         json.RawMessage `json:"data"`
}

type wireFrame struct {
	Type     string           `json:"type"`
	Event    *wireEvent       `json:"event"`
	HTML     string           `json:"html"`
	ID       string           `json:"id"`
	Error    string           `json:"error"`
	Messages []historyMessage `json:"messages"`
	Seq      int64            `json:"seq"`
}

func readWire(ctx context.Context, t testing.TB, conn *websocket.Conn) wireFrame {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, b, err := conn.Read(ctx)
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	var f wireFrame
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("frame %s: %v", b, err)
	}
	return f
}

func sendText(ctx context.Context, t testing.TB, conn *websocket.Conn, id, text string) {
	t.Helper()
	b, _ := json.Marshal(clientFrame{Type: "send", ID: id, Text: text})
	if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

// until reads frames until one satisfies pred; it returns every frame read.
func until(ctx context.Context, t testing.TB, conn *websocket.Conn, pred func(wireFrame) bool) []wireFrame {
	t.Helper()
	var fs []wireFrame
	for {
		f := readWire(ctx, t, conn)
		fs = append(fs, f)
		if pred(f) {
			return fs
		}
	}
}

func isTurnDone(f wireFrame) bool {
	return f.Type == "event" && f.Event.Type == "turn" && strings.Contains(string(f.Event.Data), `"done"`)
}

func isAnswer(f wireFrame) bool {
	return f.Type == "event" && f.Event.Type == "message" && strings.Contains(string(f.Event.Data), `"assistant"`)
}

func TestLoginLinkIsSingleUseAndLeavesTheURL(t *testing.T) {
	ts := newTestServer(t)
	link := ts.loginURL()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("login: status %d, want 200", resp.StatusCode)
	}
	// The page keeps the request token and replaces itself with /, so the
	// login link leaves the address bar and the history.
	reqToken := resp.Header.Get(tokenHeader)
	u0, _ := url.Parse(link)
	if reqToken == "" || !strings.Contains(string(page), `<meta name="conch-token" content="`+reqToken+`">`) ||
		!strings.Contains(string(page), `<meta name="conch-next" content="/">`) || !strings.Contains(string(page), `src="/static/login.js"`) ||
		strings.Contains(string(page), u0.Query().Get("token")) {
		t.Fatalf("login page: token %q, page %s", reqToken, page)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("login page Cache-Control %q, want no-store", resp.Header.Get("Cache-Control"))
	}
	cks := resp.Cookies()
	if len(cks) != 1 || cks[0].Name != cookieName || !cks[0].HttpOnly || cks[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie: got %+v, want one HttpOnly SameSite=Strict %s", cks, cookieName)
	}
	if resp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("Referrer-Policy %q, want no-referrer", resp.Header.Get("Referrer-Policy"))
	}
	// Second use of the same link.
	resp, err = noRedirect.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("reused link: status %d cookies %v, want 401 and none", resp.StatusCode, resp.Cookies())
	}
	if !strings.Contains(string(b), "conch web url") {
		t.Errorf("refusal should say how to get a new link: %s", b)
	}
	// A made-up token.
	resp, err = noRedirect.Get(ts.srv.URL + "/login?token=" + strings.Repeat("A", 43))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unknown token: status %d, want 401", resp.StatusCode)
	}
	// The cookie works.
	jar, _ := cookiejar.New(nil)
	u, _ := url.Parse(ts.srv.URL)
	jar.SetCookies(u, cks)
	if st, _ := ts.do(&http.Client{Jar: jar, Transport: tokenTransport{reqToken}}, "GET", "/api/session", nil); st != http.StatusOK {
		t.Fatalf("session with the cookie and the token: %d", st)
	}
}

func TestLoginLinkExpires(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ts := newTestServer(t, func(o *Options) { o.Now = clock; o.LoginTTL = time.Minute; o.SessionTTL = time.Hour })
	link := ts.loginURL()
	mu.Lock()
	now = now.Add(61 * time.Second)
	mu.Unlock()
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("expired link: status %d, want 401", resp.StatusCode)
	}
	// A session ends at its expiry.
	c := ts.client()
	mu.Lock()
	now = now.Add(time.Hour + time.Second)
	mu.Unlock()
	if st, _ := ts.do(c, "GET", "/api/session", nil); st != http.StatusUnauthorized {
		t.Fatalf("expired session: status %d, want 401", st)
	}
}

func TestNoLoginNoData(t *testing.T) {
	ts := newTestServer(t)
	owner := ts.client()
	cv := ts.newConversation(owner)
	ts.read.sums = []conch.ConversationSummary{{Key: cv.Key(), LastMessage: "secret plans", State: conch.ConversationIdle}}
	ts.read.audit = []conch.AuditRecord{{ID: 1, AuditEvent: conch.AuditEvent{Kind: "exec", Detail: json.RawMessage(`{"argv":"secret"}`)}}}
	ts.boxes.infos = []conch.SandboxInfo{{Name: "conch-secret", Key: cv.Key(), Conversation: cv.Key().String(), Running: true}}

	stranger := &http.Client{}
	for _, p := range []struct{ method, path string }{
		{"GET", "/api/session"}, {"GET", "/api/conversations"}, {"POST", "/api/conversations"},
		{"PATCH", "/api/conversations/" + cv.ID}, {"DELETE", "/api/conversations/" + cv.ID},
		{"GET", "/api/dashboard"}, {"GET", "/api/audit"}, {"POST", "/api/control"},
		{"GET", "/api/chat?c=" + cv.ID}, {"GET", "/api/terminal?key=web:x&tty=0"}, {"GET", "/metrics"},
	} {
		st, b := ts.do(stranger, p.method, p.path, map[string]string{"action": "reset", "key": cv.Key().String()})
		if st != http.StatusUnauthorized {
			t.Errorf("%s %s without login: status %d, want 401", p.method, p.path, st)
		}
		for _, secret := range []string{"secret", cv.ID, "conch_up"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s %s without login leaks %q: %s", p.method, p.path, secret, b)
			}
		}
	}
	if len(ts.gw.reset) != 0 {
		t.Fatalf("a request without login reset a conversation")
	}
	// The pages load but carry no data.
	for _, p := range []string{"/", "/dashboard"} {
		st, b := ts.do(stranger, "GET", p, nil)
		if st != http.StatusOK || strings.Contains(string(b), "secret") || strings.Contains(string(b), cv.ID) {
			t.Errorf("page %s: status %d, leaks data: %v", p, st, strings.Contains(string(b), "secret"))
		}
	}
	// A WebSocket without the cookie is refused.
	_, err := ts.dial(context.Background(), stranger, "/api/chat?c="+cv.ID)
	if err == nil {
		t.Fatal("chat socket without login was accepted")
	}
}

func TestLogoutAllEndsSessionsAndSockets(t *testing.T) {
	ts := newTestServer(t)
	c := ts.client()
	if st, _ := ts.do(c, "GET", "/api/session", nil); st != http.StatusOK {
		t.Fatalf("session: %d", st)
	}
	if err := ts.ch.Auth().LogoutAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st, _ := ts.do(c, "GET", "/api/session", nil); st != http.StatusUnauthorized {
		t.Fatalf("after logout-all: %d, want 401", st)
	}
	// A new login works again.
	if st, _ := ts.do(ts.client(), "GET", "/api/session", nil); st != http.StatusOK {
		t.Fatalf("new login after logout-all: %d", st)
	}
}

func TestCrossOriginRefused(t *testing.T) {
	ts := newTestServer(t)
	c := ts.client()
	cv := ts.newConversation(c)
	u := "ws" + strings.TrimPrefix(ts.srv.URL, "http") + "/api/chat?c=" + cv.ID
	_, resp, err := websocket.Dial(context.Background(), u, &websocket.DialOptions{HTTPClient: c, HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
	if err == nil {
		t.Fatal("cross-origin WebSocket accepted")
	}
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin WebSocket: %v, want 403", resp)
	}
	// A cross-origin POST with the cookie (a CSRF attempt) is refused too.
	req, _ := http.NewRequest("POST", ts.srv.URL+"/api/control", strings.NewReader(`{"action":"reset","key":"web:`+cv.ID+`"}`))
	req.Header.Set("Origin", "https://evil.example")
	resp2, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusForbidden || len(ts.gw.reset) != 0 {
		t.Fatalf("cross-origin POST: status %d, resets %v; want 403 and none", resp2.StatusCode, ts.gw.reset)
	}
}

func TestChatRoundTripAndResume(t *testing.T) {
	ts := newTestServer(t)
	c := ts.client()
	cv := ts.newConversation(c)
	ctx := context.Background()
	conn := ts.chat(ctx, c, cv.ID, 0)
	sendText(ctx, t, conn, "m1", "hello <script>alert(1)</script>")
	fs := until(ctx, t, conn, isAnswer)
	var acked bool
	var types []string
	var last int64
	for _, f := range fs {
		switch f.Type {
		case "ack":
			acked = f.ID == "m1"
		case "event":
			types = append(types, f.Event.Type)
			if f.Event.Type == "text_delta" {
				if f.Event.Seq != last {
					t.Errorf("streamed text carries seq %d, want the last kept %d", f.Event.Seq, last)
				}
				continue
			}
			if f.Event.Seq != last+1 {
				t.Errorf("seq %d after %d: gap or repeat", f.Event.Seq, last)
			}
			last = f.Event.Seq
		}
	}
	if !acked {
		t.Error("no ack for m1")
	}
	want := "message turn turn text_delta tool_started tool_finished text_delta message"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("events: got %q, want %q", got, want)
	}
	ans := fs[len(fs)-1]
	if !strings.Contains(ans.HTML, "<strong>") || strings.Contains(ans.HTML, "<script") {
		t.Errorf("answer HTML not rendered or not sanitised: %q", ans.HTML)
	}
	in := ts.gw.inbounds()
	if len(in) != 1 || in[0].Key != cv.Key() || in[0].Sender != "owner" || in[0].ExternalID != cv.ID+"/m1" {
		t.Fatalf("inbound: %+v", in)
	}
	// Read the final turn event, then reconnect as a page that saw only
	// up to seq 2: it gets 3… exactly once each.
	until(ctx, t, conn, func(f wireFrame) bool {
		return f.Type == "event" && f.Event.Type == "turn" && strings.Contains(string(f.Event.Data), "done")
	})
	conn.Close(websocket.StatusNormalClosure, "")
	conn2 := ts.chat(ctx, c, cv.ID, 2)
	fs = until(ctx, t, conn2, func(f wireFrame) bool {
		return f.Type == "event" && f.Event.Type == "turn" && strings.Contains(string(f.Event.Data), "done")
	})
	next := int64(3)
	for _, f := range fs {
		if f.Event.Type == "text_delta" {
			t.Fatalf("a resume replays streamed text: %+v", f.Event)
		}
		if f.Event.Seq != next {
			t.Fatalf("resume: seq %d, want %d", f.Event.Seq, next)
		}
		next++
	}
	// A resend of m1 after the reconnect is stored once.
	sendText(ctx, t, conn2, "m1", "hello <script>alert(1)</script>")
	if f := readWire(ctx, t, conn2); f.Type != "ack" {
		t.Fatalf("resend: got %+v, want ack", f)
	}
	if n := len(ts.gw.inbounds()); n != 1 {
		t.Fatalf("resend stored %d messages, want 1", n)
	}
	// A command works as in every channel.
	sendText(ctx, t, conn2, "m2", "/status")
	fs = until(ctx, t, conn2, func(f wireFrame) bool { return f.Type == "event" && f.Event.Type == "notice" })
	if n := fs[len(fs)-1]; !strings.Contains(n.HTML, "<strong>status</strong>") {
		t.Errorf("notice HTML: %q", n.HTML)
	}
}

func TestResumeFromTooFarBackGetsHistory(t *testing.T) {
	ts := newTestServer(t)
	ts.hub.keep = 3
	c := ts.client()
	cv := ts.newConversation(c)
	ctx := context.Background()
	conn := ts.chat(ctx, c, cv.ID, 0)
	sendText(ctx, t, conn, "a1", "first")
	until(ctx, t, conn, isTurnDone)
	conn.Close(websocket.StatusNormalClosure, "")
	conn2 := ts.chat(ctx, c, cv.ID, 1)
	f := readWire(ctx, t, conn2)
	if f.Type != "history" || len(f.Messages) != 2 || f.Messages[0].Text != "first" || !strings.Contains(f.Messages[1].HTML, "<strong>first</strong>") {
		t.Fatalf("got %+v, want the stored conversation", f)
	}
	last, _ := ts.hub.LastSeq(ctx, cv.Key())
	if f.Seq != last {
		t.Fatalf("history seq %d, want %d", f.Seq, last)
	}
	// Live events follow it.
	ts.hub.mu.Lock()
	ts.hub.keep = 10000
	ts.hub.mu.Unlock()
	sendText(ctx, t, conn2, "a2", "second")
	fs := until(ctx, t, conn2, isAnswer)
	for _, fr := range fs {
		if fr.Type == "event" && fr.Event.Seq <= last {
			t.Fatalf("event %d repeats history (seq %d)", fr.Event.Seq, last)
		}
	}
}

func TestTooLongMessageIsRefusedWhole(t *testing.T) {
	ts := newTestServer(t)
	c := ts.client()
	cv := ts.newConversation(c)
	ctx := context.Background()
	conn := ts.chat(ctx, c, cv.ID, 0)
	big := strings.Repeat("x", 1<<20)
	sendText(ctx, t, conn, "big", big)
	f := readWire(ctx, t, conn)
	if f.Type != "error" || f.ID != "big" || !strings.Contains(f.Error, "too long") || !strings.Contains(f.Error, "1048576") {
		t.Fatalf("1 MiB message: got %+v, want a clear error", f)
	}
	if n := len(ts.gw.inbounds()); n != 0 {
		t.Fatalf("%d messages stored, want none", n)
	}
	// The socket still works.
	sendText(ctx, t, conn, "ok", "short")
	until(ctx, t, conn, isAnswer)
	// A frame beyond the read limit closes the socket with 1009.
	huge := strings.Repeat("y", int(ts.ch.readLimit())+10)
	_ = conn.Write(ctx, websocket.MessageText, []byte(`{"type":"send","id":"huge","text":"`+huge+`"}`))
	_, _, err := conn.Read(ctx)
	for err == nil {
		_, _, err = conn.Read(ctx)
	}
	if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("oversized frame: %v, want close 1009", err)
	}
	var ce websocket.CloseError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "limit") {
		t.Fatalf("oversized frame: close reason %q, want one naming the limit", ce.Reason)
	}
	if n := len(ts.gw.inbounds()); n != 1 {
		t.Fatalf("%d messages stored, want 1", n)
	}
}

func TestMalformedFramesCloseCleanly(t *testing.T) {
	ts := newTestServer(t)
	c := ts.client()
	cv := ts.newConversation(c)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		typ  websocket.MessageType
		data string
		want websocket.StatusCode
	}{
		{"not json", websocket.MessageText, "{nope", websocket.StatusInvalidFramePayloadData},
		{"unknown type", websocket.MessageText, `{"type":"rm -rf"}`, websocket.StatusInvalidFramePayloadData},
		{"binary", websocket.MessageBinary, "\x00\x01", websocket.StatusUnsupportedData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := ts.chat(ctx, c, cv.ID, 0)
			if err := conn.Write(ctx, tc.typ, []byte(tc.data)); err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			var err error
			for err == nil {
				_, _, err = conn.Read(rctx)
			}
			if got := websocket.CloseStatus(err); got != tc.want {
				t.Fatalf("close status %d (%v), want %d", got, err, tc.want)
			}
		})
	}
	// Bad sends are answered, not stored.
	conn := ts.chat(ctx, c, cv.ID, 0)
	for _, f := range []clientFrame{{Type: "send", ID: "bad id!", Text: "x"}, {Type: "send", ID: "e", Text: "  \n"}} {
		b, _ := json.Marshal(f)
		_ = conn.Write(ctx, websocket.MessageText, b)
		if got := readWire(ctx, t, conn); got.Type != "error" {
			t.Fatalf("%+v: got %+v, want error", f, got)
		}
	}
	if n := len(ts.gw.inbounds()); n != 0 {
		t.Fatalf("%d stored, want 0", n)
	}
	if !waitFor(func() bool { return ts.hub.subscribers() == 1 }) {
		t.Fatalf("closed sockets left %d subscribers, want 1", ts.hub.subscribers())
	}
}

func waitFor(f func() bool) bool {
	for range 200 {
		if f() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return f()
}

func TestFiftyTabsGetEveryEvent(t *testing.T) {
	ts := newTestServer(t)
	c := ts.client()
	cv := ts.newConversation(c)
	ctx := context.Background()
	const tabs, events = 50, 300
	conns := make([]*websocket.Conn, tabs)
	for i := range conns {
		conns[i] = ts.chat(ctx, c, cv.ID, 0)
	}
	if !waitFor(func() bool { return ts.hub.subscribers() == tabs }) {
		t.Fatalf("%d subscribers, want %d", ts.hub.subscribers(), tabs)
	}
	go func() {
		for i := range events {
			ts.hub.Publish(cv.Key(), 1, conch.NoticeEvent{Text: fmt.Sprint(i)})
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, tabs)
	for i, conn := range conns {
		wg.Go(func() {
			for want := int64(1); want <= events; want++ {
				rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				_, b, err := conn.Read(rctx)
				cancel()
				if err != nil {
					errs <- fmt.Errorf("tab %d: %w", i, err)
					return
				}
				var f wireFrame
				if err := json.Unmarshal(b, &f); err != nil || f.Event == nil || f.Event.Seq != want {
					errs <- fmt.Errorf("tab %d: got %s, want seq %d", i, b, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSlowSubscriberResubscribesWithoutGap(t *testing.T) {
	ts := newTestServer(t)
	ts.hub.buf = 4 // the hub cuts off a subscriber 4 events behind
	c := ts.client()
	cv := ts.newConversation(c)
	ctx := context.Background()
	conn := ts.chat(ctx, c, cv.ID, 0)
	if !waitFor(func() bool { return ts.hub.subscribers() == 1 }) {
		t.Fatal("no subscriber")
	}
	for i := range 200 {
		ts.hub.Publish(cv.Key(), 1, conch.NoticeEvent{Text: fmt.Sprint(i)})
	}
	for want := int64(1); want <= 200; want++ {
		f := readWire(ctx, t, conn)
		if f.Event == nil || f.Event.Seq != want {
			t.Fatalf("got %+v, want seq %d", f, want)
		}
	}
}

func TestConversationsListRenameDelete(t *testing.T) {
	ts := newTestServer(t)
	c := ts.client()
	a := ts.newConversation(c)
	b := ts.newConversation(c)
	st, body := ts.do(c, "PATCH", "/api/conversations/"+a.ID, map[string]string{"title": "  Build   the thing "})
	if st != http.StatusOK || !strings.Contains(string(body), `"Build the thing"`) {
		t.Fatalf("rename: %d %s", st, body)
	}
	if st, body := ts.do(c, "PATCH", "/api/conversations/"+a.ID, map[string]string{"title": strings.Repeat("x", 500)}); st != http.StatusBadRequest {
		t.Fatalf("long title: %d %s, want 400", st, body)
	}
	if st, _ := ts.do(c, "PATCH", "/api/conversations/nope", map[string]string{"title": "x"}); st != http.StatusNotFound {
		t.Fatalf("rename unknown: %d, want 404", st)
	}
	st, body = ts.do(c, "GET", "/api/conversations", nil)
	var list []conversationView
	if err := json.Unmarshal(body, &list); err != nil || st != 200 || len(list) != 2 || list[0].ID != b.ID || list[1].Title != "Build the thing" {
		t.Fatalf("list: %d %s", st, body)
	}
	if st, _ := ts.do(c, "DELETE", "/api/conversations/"+a.ID, nil); st != http.StatusOK {
		t.Fatalf("delete: %d", st)
	}
	if len(ts.gw.reset) != 1 || ts.gw.reset[0] != a.Key() {
		t.Fatalf("delete did not reset the conversation: %v", ts.gw.reset)
	}
	_, body = ts.do(c, "GET", "/api/conversations", nil)
	if strings.Contains(string(body), a.ID) {
		t.Fatalf("deleted conversation still listed: %s", body)
	}
	// The chat socket of a deleted conversation is refused.
	if _, err := ts.dial(context.Background(), c, "/api/chat?c="+a.ID); err == nil {
		t.Fatal("chat socket of a deleted conversation accepted")
	}
}

func TestDashboardAndActions(t *testing.T) {
	ts := newTestServer(t)
	c := ts.client()
	mk := conch.ConversationKey{Channel: conch.ChannelMatrix, ID: "!room:example.org"}
	ts.read.sums = []conch.ConversationSummary{
		{Key: mk, LastSender: "@alice:example.org", LastMessage: "build it", State: conch.ConversationRunning, Pending: 2, LastError: "model auth"},
	}
	ts.read.audit = []conch.AuditRecord{
		{ID: 1, AuditEvent: conch.AuditEvent{Kind: "exec", Conversation: mk, Detail: json.RawMessage(`{"argv":"ls"}`)}},
		{ID: 2, AuditEvent: conch.AuditEvent{Kind: "sandbox_create", Conversation: mk}},
	}
	ts.boxes.infos = []conch.SandboxInfo{
		{Name: "conch-room-1234", Key: mk, Conversation: mk.String(), Engine: "docker 28", State: "running", Running: true},
		{Name: "conch-pool-1", Conversation: "(pool)", Pool: true, State: "running", Running: true},
	}
	st, body := ts.do(c, "GET", "/api/dashboard", nil)
	var d struct {
		Conversations []map[string]any `json:"conversations"`
		Sandboxes     []map[string]any `json:"sandboxes"`
	}
	if err := json.Unmarshal(body, &d); err != nil || st != 200 {
		t.Fatalf("dashboard: %d %s", st, body)
	}
	if len(d.Conversations) != 1 || d.Conversations[0]["key"] != mk.String() || d.Conversations[0]["channel"] != "matrix" || d.Conversations[0]["pending"] != float64(2) || d.Conversations[0]["last_error"] != "model auth" {
		t.Errorf("conversations: %+v", d.Conversations)
	}
	if len(d.Sandboxes) != 2 {
		t.Fatalf("sandboxes: %+v", d.Sandboxes)
	}
	s0 := d.Sandboxes[0]
	if st, ok := s0["stats"].(map[string]any); !ok || st["cpu_percent"] != 12.5 || st["pids_limit"] != float64(128) || fmt.Sprint(s0["terminals"]) != "[0 1]" {
		t.Errorf("running sandbox: %+v", s0)
	}
	if _, ok := d.Sandboxes[1]["stats"]; ok {
		t.Errorf("a pool sandbox has no conversation to ask stats for: %+v", d.Sandboxes[1])
	}
	st, body = ts.do(c, "GET", "/api/audit?after=1", nil)
	if st != 200 || !strings.Contains(string(body), "sandbox_create") || strings.Contains(string(body), `"exec"`) {
		t.Errorf("audit after 1: %d %s", st, body)
	}
	for _, a := range []string{"stop", "reset", "remove"} {
		if st, body := ts.do(c, "POST", "/api/control", map[string]string{"action": a, "key": mk.String()}); st != 200 {
			t.Errorf("%s: %d %s", a, st, body)
		}
	}
	if len(ts.gw.stopped) != 1 || len(ts.gw.reset) != 1 || len(ts.boxes.removed) != 1 || ts.boxes.removed[0] != mk {
		t.Errorf("actions: stopped %v reset %v removed %v", ts.gw.stopped, ts.gw.reset, ts.boxes.removed)
	}
	if st, _ := ts.do(c, "POST", "/api/control", map[string]string{"action": "explode", "key": mk.String()}); st != http.StatusBadRequest {
		t.Errorf("unknown action: %d, want 400", st)
	}
	if st, _ := ts.do(c, "POST", "/api/control", map[string]string{"action": "stop", "key": "nokey"}); st != http.StatusBadRequest {
		t.Errorf("bad key: %d, want 400", st)
	}
	if st, body := ts.do(c, "GET", "/metrics", nil); st != 200 || !strings.Contains(string(body), "conch_up") {
		t.Errorf("metrics: %d %s", st, body)
	}
}

func TestTerminalSocketStreamsOutput(t *testing.T) {
	ts := newTestServer(t)
	c := ts.client()
	ctx := context.Background()
	conn, err := ts.dial(ctx, c, "/api/terminal?key=web:x&tty=0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	typ, b, err := conn.Read(ctx)
	if err != nil || typ != websocket.MessageText || string(b) != `{"cols":80,"rows":24,"type":"size"}` {
		t.Fatalf("first frame: %v %s %v", typ, b, err)
	}
	var got strings.Builder
	ts.terms.lines <- "hello"
	for !strings.Contains(got.String(), "hello\r\n") {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		typ, b, err := conn.Read(rctx)
		cancel()
		if err != nil || typ != websocket.MessageBinary {
			t.Fatalf("output: %v %v", typ, err)
		}
		got.Write(b)
	}
	if !strings.HasPrefix(got.String(), "\x1b[32m$") {
		t.Errorf("screen first: %q", got.String())
	}
	// The end of the terminal closes the socket normally.
	close(ts.terms.lines)
	var rerr error
	for rerr == nil {
		_, _, rerr = conn.Read(ctx)
	}
	if websocket.CloseStatus(rerr) != websocket.StatusNormalClosure {
		t.Fatalf("end: %v", rerr)
	}
	// An unknown terminal says so.
	conn2, err := ts.dial(ctx, c, "/api/terminal?key=web:x&tty=9")
	if err != nil {
		t.Fatal(err)
	}
	_, _, rerr = conn2.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(rerr, &ce) || ce.Reason != "no such terminal" {
		t.Fatalf("unknown terminal: %v", rerr)
	}
}

// TestSendBeforeRunWaitsForIt: conch serves the page before the gateway
// runs (it resumes its conversations first); a message sent then waits for
// the gateway instead of being refused (the page would drop it), and is
// stored once and acknowledged when the gateway comes.
func TestSendBeforeRunWaitsForIt(t *testing.T) {
	hub := newFakeHub()
	gw := newFakeGateway(hub)
	ch, err := New(Options{Events: hub, Control: gw, Store: NewMemLogins(), MaxMessageBytes: 64 << 10, LoginTTL: 10 * time.Minute, SessionTTL: 720 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	ch.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ts := &testServer{t: t, srv: srv, ch: ch, hub: hub}
	c := ts.client()
	cv := ts.newConversation(c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := ts.chat(ctx, c, cv.ID, 0)
	sendText(ctx, t, conn, "x", "hi")
	time.Sleep(200 * time.Millisecond)
	if n := len(gw.inbounds()); n != 0 {
		t.Fatalf("%d messages handed on before the gateway ran", n)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = ch.Run(runCtx, gw); close(done) }()
	defer func() { stop(); <-done }()
	fs := until(ctx, t, conn, func(f wireFrame) bool { return f.Type == "ack" || f.Type == "error" })
	if f := fs[len(fs)-1]; f.Type != "ack" || f.ID != "x" {
		t.Fatalf("got %+v, want the message acknowledged", f)
	}
	if in := gw.inbounds(); len(in) != 1 || in[0].Text != "hi" {
		t.Fatalf("gateway got %+v, want the message once", in)
	}
}
