package web

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"conch/internal/testenv"
	"conch/internal/testenv/browser"
)

// replay is another client holding c's cookies and whatever else c sends
// (its transport): what someone who copied c's credentials could send.
func (ts *testServer) replay(c *http.Client) *http.Client {
	ts.t.Helper()
	u, _ := url.Parse(ts.srv.URL)
	jar, _ := cookiejar.New(nil)
	jar.SetCookies(u, c.Jar.Cookies(u))
	return &http.Client{Jar: jar, Transport: c.Transport}
}

// cookieOnly is a client holding only c's cookies, as curl would replay a
// cookie caught by a page of another port of this machine (cookies are not
// scoped by port, and SameSite counts other ports as the same site).
func (ts *testServer) cookieOnly(c *http.Client) *http.Client {
	ts.t.Helper()
	u, _ := url.Parse(ts.srv.URL)
	jar, _ := cookiejar.New(nil)
	jar.SetCookies(u, c.Jar.Cookies(u))
	if len(jar.Cookies(u)) == 0 {
		ts.t.Fatal("the logged-in client holds no cookie")
	}
	return &http.Client{Jar: jar}
}

func TestReplayedCookieAloneIsRefused(t *testing.T) {
	ts := newTestServer(t)
	owner := ts.client()
	cv := ts.newConversation(owner)
	curl := ts.cookieOnly(owner)
	for _, p := range []struct{ method, path string }{
		{"GET", "/api/session"}, {"GET", "/api/conversations"}, {"POST", "/api/conversations"},
		{"GET", "/api/dashboard"}, {"GET", "/api/audit"}, {"POST", "/api/control"}, {"GET", "/metrics"},
	} {
		if st, b := ts.do(curl, p.method, p.path, map[string]string{"action": "stop", "key": cv.Key().String()}); st != http.StatusUnauthorized {
			t.Errorf("%s %s with the cookie alone: status %d (%.80s), want 401", p.method, p.path, st, b)
		}
		if st, _ := ts.do(owner, p.method, p.path, map[string]string{"action": "stop", "key": cv.Key().String()}); st >= 400 {
			t.Errorf("%s %s as the page sends it: status %d", p.method, p.path, st)
		}
	}
	for _, path := range []string{"/api/chat?c=" + cv.ID, "/api/terminal?key=" + cv.Key().String() + "&tty=0"} {
		if conn, err := ts.dial(context.Background(), curl, path); err == nil {
			conn.CloseNow()
			t.Errorf("socket %s with the cookie alone was accepted", path)
		}
		conn, err := ts.dial(context.Background(), owner, path)
		if err != nil {
			t.Errorf("socket %s as the page opens it: %v", path, err)
			continue
		}
		conn.CloseNow()
	}
	if len(ts.gw.stopped) != 1 {
		t.Errorf("stops: %v, want only the owner's", ts.gw.stopped)
	}
}

func TestLogoutRevokesTheSession(t *testing.T) {
	ts := newTestServer(t)
	a, b := ts.client(), ts.client()
	copied := ts.replay(a) // what a copied cookie would send later
	if st, _ := ts.do(a, "POST", "/api/logout", nil); st != http.StatusOK {
		t.Fatalf("logout: %d", st)
	}
	if st, _ := ts.do(copied, "GET", "/api/session", nil); st != http.StatusUnauthorized {
		t.Fatalf("the logged-out session replayed: status %d, want 401", st)
	}
	if st, _ := ts.do(b, "GET", "/api/session", nil); st != http.StatusOK {
		t.Fatalf("another session after one logged out: %d, want 200", st)
	}
	if err := ts.ch.Auth().LogoutAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st, _ := ts.do(b, "GET", "/api/session", nil); st != http.StatusUnauthorized {
		t.Fatalf("after logout-all: %d, want 401", st)
	}
}

// Behind a TLS reverse proxy (Secure set from web.public_url) the cookie is
// Secure and every response asks for HTTPS from now on.
func TestSecureSessionSendsHSTS(t *testing.T) {
	ts := newTestServer(t, func(o *Options) { o.Secure = true })
	resp, err := http.Get(ts.loginURL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cks := resp.Cookies()
	if len(cks) == 0 || !cks[0].Secure {
		t.Fatalf("cookie %+v, want Secure", cks)
	}
	for _, p := range []string{"/", "/dashboard", "/api/session", "/login"} {
		resp, err := http.Get(ts.srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if h := resp.Header.Get("Strict-Transport-Security"); h == "" {
			t.Errorf("%s: no Strict-Transport-Security", p)
		}
	}
	plain := newTestServer(t)
	resp, err = http.Get(plain.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := resp.Header.Get("Strict-Transport-Security"); h != "" {
		t.Errorf("plain HTTP sends HSTS %q", h)
	}
}

// A socket carries the request token as a subprotocol (a browser cannot set
// headers on a WebSocket): with it the cookie works, with another session's
// or a made-up one it does not.
func TestSocketTokenAsSubprotocol(t *testing.T) {
	ts := newTestServer(t)
	owner := ts.client()
	cv := ts.newConversation(owner)
	other := ts.client()
	u := "ws" + strings.TrimPrefix(ts.srv.URL, "http") + "/api/chat?c=" + cv.ID
	dial := func(token string) error {
		conn, resp, err := websocket.Dial(context.Background(), u, &websocket.DialOptions{
			HTTPClient: ts.cookieOnly(owner), HTTPHeader: http.Header{"Origin": {ts.srv.URL}},
			Subprotocols: []string{socketProtocol, tokenProtocolPrefix + token}})
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		if err == nil {
			if conn.Subprotocol() != socketProtocol {
				t.Errorf("subprotocol %q, want %q", conn.Subprotocol(), socketProtocol)
			}
			conn.CloseNow()
		}
		return err
	}
	if err := dial(other.Transport.(tokenTransport).token); err == nil {
		t.Error("another session's token opened the socket with this cookie")
	}
	if err := dial(strings.Repeat("A", 43)); err == nil {
		t.Error("a made-up token opened the socket")
	}
	if err := dial(owner.Transport.(tokenTransport).token); err != nil {
		t.Errorf("the session's own token: %v", err)
	}
}

func TestExpiredSessionsArePruned(t *testing.T) {
	var mu sync.Mutex
	now := time.Now() // the client's cookie jar expires cookies by the real clock
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	sessions := NewMemSessions().(*memSessions)
	ts := newTestServer(t, func(o *Options) { o.Now = clock; o.SessionTTL = time.Hour; o.Sessions = sessions })
	ts.client()
	ts.client()
	mu.Lock()
	now = now.Add(30 * time.Minute)
	mu.Unlock()
	live := ts.client()
	mu.Lock()
	now = now.Add(45 * time.Minute) // the first two expired, the third lives
	mu.Unlock()
	ts.client()
	if n := sessions.len(); n != 2 {
		t.Fatalf("%d sessions stored, want 2 (the expired ones pruned)", n)
	}
	if st, _ := ts.do(live, "GET", "/api/session", nil); st != http.StatusOK {
		t.Fatalf("live session: %d", st)
	}
}

// TestBrowserCookieReplayRefused: the session cookie a real Chromium got at
// login, replayed alone as curl would (after a page of another port made
// the browser send it there), opens nothing, while the page itself works.
func TestBrowserCookieReplayRefused(t *testing.T) {
	testenv.Short(t)
	b := browser.Start(t)
	ts := newTestServer(t)
	ctx := b.Context()
	var conv string
	var cookies []*network.Cookie
	browser.Run(t, ctx, "login",
		chromedp.Navigate(ts.loginURL()),
		chromedp.WaitVisible(`#conn.connected`, chromedp.ByQuery),
		chromedp.Evaluate(`state.current`, &conv),
		chromedp.ActionFunc(func(ctx context.Context) error {
			var err error
			cookies, err = network.GetCookies().WithURLs([]string{ts.srv.URL}).Do(ctx)
			return err
		}),
	)
	var value string
	for _, c := range cookies {
		if c.Name == cookieName {
			value = c.Value
		}
	}
	if value == "" {
		t.Fatalf("no %s cookie in the browser: %+v", cookieName, cookies)
	}
	curl := &http.Client{Transport: cookieTransport{value}}
	for _, p := range []string{"/api/session", "/api/conversations", "/api/dashboard", "/api/audit", "/metrics"} {
		if st, body := ts.do(curl, "GET", p, nil); st != http.StatusUnauthorized {
			t.Errorf("GET %s with the replayed cookie: %d %.80s, want 401", p, st, body)
		}
	}
	for _, p := range []string{"/api/chat?c=" + conv, "/api/terminal?key=web:" + conv + "&tty=0"} {
		if conn, err := ts.dial(context.Background(), curl, p); err == nil {
			conn.CloseNow()
			t.Errorf("socket %s opened with the replayed cookie", p)
		}
	}
	// The page still works: a message goes and its answer comes, the
	// dashboard loads and its terminal view opens.
	key := "web:" + conv
	ts.boxes.infos = nil
	browser.Run(t, ctx, "the page works",
		chromedp.SendKeys("#input", "still mine", chromedp.ByID),
		pressEnter(0),
		chromedp.WaitVisible(`//div[contains(@class,"assistant")]//strong[contains(., "still mine")]`, chromedp.BySearch),
		chromedp.Navigate(ts.srv.URL+"/dashboard"),
		chromedp.WaitVisible(`//td[contains(., "no sandboxes")]`, chromedp.BySearch),
		chromedp.Evaluate(`openTerm("`+key+`", 0)`, nil),
		chromedp.WaitVisible(`//span[@id="term-state" and contains(., "live")]`, chromedp.BySearch),
		chromedp.Click("#metrics-open", chromedp.ByID),
		chromedp.WaitVisible(`//pre[@id="metrics" and contains(., "conch_up 1")]`, chromedp.BySearch),
	)
	// Log out: the page forgets its token, and the session ends on the server.
	browser.Run(t, ctx, "log out",
		chromedp.Navigate(ts.srv.URL+"/"),
		chromedp.WaitVisible(`#conn.connected`, chromedp.ByQuery),
		chromedp.Click("#logout", chromedp.ByID),
		chromedp.WaitVisible("#login", chromedp.ByID),
		chromedp.Reload(),
		chromedp.WaitVisible("#login", chromedp.ByID),
	)
}

// cookieTransport sends one session cookie and nothing else.
type cookieTransport struct{ value string }

func (t cookieTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Cookie", cookieName+"="+t.value)
	return http.DefaultTransport.RoundTrip(r)
}
