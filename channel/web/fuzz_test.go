package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"conch"
	"conch/channel/internal/markdown/markdowntest"
)

// Fuzz targets for what arrives from outside: frames on the chat socket,
// and the model's Markdown rendered for the page. `go test` runs the seeds
// (and testdata/fuzz) as regression tests; `make fuzz` explores further.

// FuzzChatFrame sends each input as a text frame on a live chat socket,
// then a ping: the server must answer the ping, or have closed the socket
// with a deliberate status (never crash or drop it abnormally). The
// gateway behind it stores messages and publishes nothing: a refusal that
// meets an event being written loses its close status (the write's
// context is cancelled, which drops the connection), a race apart from
// frame decoding.
func FuzzChatFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"send","id":"m1","text":"hello"}`,
		`{"type":"send","id":"m2","text":"/status"}`,
		`{"type":"send","id":"bad id!","text":"x"}`,
		`{"type":"send","id":"e","text":"  \n"}`,
		`{"type":"send","id":"u","text":"\ud800"}`,
		`{"type":"send","id":"` + strings.Repeat("a", 65) + `","text":"x"}`,
		`{"type":"send","id":"n","text":null,"extra":[1,2,{"x":{}}]}`,
		`{"type":"ping","id":"p"}`,
		`{"type":"rm -rf"}`,
		`{"type":1}`,
		`{nope`, `[]`, `null`, `""`, "",
		`{"type":"send","id":"big","text":"` + strings.Repeat("x", 70<<10) + `"}`,
	} {
		f.Add([]byte(s))
	}
	s := newFuzzSocket(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn := s.conn(ctx, t)
		if err := conn.Write(ctx, websocket.MessageText, frame); err != nil {
			t.Fatalf("write: %v", err)
		}
		probe, _ := json.Marshal(clientFrame{Type: "ping", ID: "probe"})
		probeErr := conn.Write(ctx, websocket.MessageText, probe)
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				s.drop()
				switch st := websocket.CloseStatus(err); st {
				case websocket.StatusInvalidFramePayloadData, websocket.StatusUnsupportedData, websocket.StatusMessageTooBig, websocket.StatusPolicyViolation:
					return // refused on purpose
				default:
					t.Fatalf("frame %.200q: socket ended with status %d (%v; probe write: %v)", frame, st, err, probeErr)
				}
			}
			var sf struct {
				Type, ID, HTML string
			}
			if err := json.Unmarshal(b, &sf); err != nil {
				t.Fatalf("server sent a malformed frame %.200q: %v", b, err)
			}
			if sf.HTML != "" {
				checkSafeHTML(t, sf.HTML)
			}
			if sf.Type == "pong" && sf.ID == "probe" {
				return
			}
		}
	})
}

// fuzzSocket is one logged-in chat socket, dialled again after the server
// closed it.
type fuzzSocket struct {
	ts   *testServer
	c    *http.Client
	path string
	cur  *websocket.Conn
}

func newFuzzSocket(f *testing.F) *fuzzSocket {
	f.Helper()
	ts := &testServer{hub: newFakeHub(), read: &fakeRead{}, boxes: &fakeSandboxes{}, terms: &fakeTerminals{lines: make(chan string, 100)}, store: NewMemLogins()}
	ts.gw = newFakeGateway(ts.hub)
	ch, err := New(Options{Events: ts.hub, Control: ts.gw, Store: ts.store, Read: ts.read, History: ts.gw, Sandboxes: ts.boxes, Terminals: ts.terms, MaxMessageBytes: 64 << 10, LoginTTL: 10 * time.Minute, SessionTTL: 720 * time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	ts.ch = ch
	mux := http.NewServeMux()
	ch.Register(mux)
	ts.srv = httptest.NewServer(mux)
	f.Cleanup(ts.srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = ch.Run(ctx, quietHandler{}); close(done) }()
	f.Cleanup(func() { cancel(); <-done })

	tok, err := ch.Auth().NewLoginToken(ctx)
	if err != nil {
		f.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(ts.srv.URL + "/login?token=" + url.QueryEscape(tok))
	if err != nil || resp.StatusCode != http.StatusOK {
		f.Fatalf("login: %v %v", resp, err)
	}
	resp.Body.Close()
	c.Transport = tokenTransport{resp.Header.Get(tokenHeader)} // as the page does
	req, _ := http.NewRequest("POST", ts.srv.URL+"/api/conversations", strings.NewReader(`{"title":"fuzz"}`))
	req.Header.Set("Origin", ts.srv.URL)
	resp, err = c.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		f.Fatalf("create conversation: %v %v", resp, err)
	}
	var cv Conversation
	err = json.NewDecoder(resp.Body).Decode(&cv)
	resp.Body.Close()
	if err != nil {
		f.Fatal(err)
	}
	s := &fuzzSocket{ts: ts, c: c, path: fmt.Sprintf("/api/chat?c=%s&after=0", url.QueryEscape(cv.ID))}
	f.Cleanup(s.drop)
	return s
}

// quietHandler takes every message and publishes no events.
type quietHandler struct{}

var _ conch.Handler = quietHandler{}

func (quietHandler) HandleInbound(context.Context, conch.Inbound) error { return nil }
func (quietHandler) Admits(_ context.Context, ch conch.ChannelName, ids ...conch.UserID) bool {
	return ch == conch.ChannelWeb && len(ids) > 0 && ids[0] == "owner"
}
func (quietHandler) ConversationClosed(context.Context, conch.ConversationKey) error { return nil }

func (s *fuzzSocket) conn(ctx context.Context, t *testing.T) *websocket.Conn {
	if s.cur == nil {
		conn, err := s.ts.dial(ctx, s.c, s.path)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		s.cur = conn
	}
	return s.cur
}

func (s *fuzzSocket) drop() {
	if s.cur != nil {
		s.cur.CloseNow()
		s.cur = nil
	}
}

func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"**bold** _it_ `code` [link](https://example.org)",
		"<script>alert(1)</script>",
		"<img src=x onerror=alert(1)>",
		"[x](javascript:alert(1)) [y](JaVaScRiPt:alert(1)) [z](data:text/html,<script>)",
		"<a href=\"&#106;avascript:alert(1)\">x</a>",
		"```go\nfunc main() {}\n```\n\n```\"><script>x</script>\n```\n\n| a | b |\n|---|---|\n| <b>1</b> | 2 |",
		"- [ ] task\n- [x] done\n\n> quote",
		"<div onclick=\"x\" style=\"background:url(javascript:x)\">hi</div>",
		"<svg><script>alert(1)</script></svg><iframe src=x></iframe><object data=x>",
		"<style>*{}</style><form action=x><input type=text></form><base href=x>",
		"",
	} {
		f.Add(s)
	}
	r := newRenderer()
	f.Fuzz(func(t *testing.T, md string) {
		checkSafeHTML(t, r.HTML(md))
	})
}

// checkSafeHTML is the shared safety check (the web chat never shows images).
func checkSafeHTML(t *testing.T, out string) {
	t.Helper()
	markdowntest.CheckSafeHTML(t, out, true)
}
