package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"conch"
	"conch/internal/testenv"
	"conch/internal/testenv/browser"
)

// TestBrowserChat drives the real page in headless Chromium against the
// fake hub: the login prompt without a session, login by link, Enter sends,
// Shift+Enter breaks the line, the streamed and rendered answer, a reload
// that still shows it, the dashboard with a live terminal, and a page of
// another origin whose WebSocket is refused.
func TestBrowserChat(t *testing.T) {
	testenv.Short(t)
	b := browser.Start(t)
	ts := newTestServer(t)
	ctx := b.Context()

	// Without a login: the prompt, no data.
	var loginVisible bool
	var body string
	browser.Run(t, ctx, "open without login",
		chromedp.Navigate(ts.srv.URL+"/"),
		chromedp.WaitVisible("#login", chromedp.ByID),
		chromedp.Evaluate(`!document.getElementById("login").hidden`, &loginVisible),
		chromedp.Text("body", &body, chromedp.ByQuery),
	)
	browser.Screenshot(t, ctx, "01-no-login")
	if !loginVisible || !strings.Contains(body, "conch web url") {
		t.Fatalf("no login prompt: %q", body)
	}

	// Log in with the link; the token leaves the address bar.
	var href string
	browser.Run(t, ctx, "login",
		chromedp.Navigate(ts.loginURL()),
		chromedp.WaitVisible("#input", chromedp.ByID),
		chromedp.Location(&href),
	)
	if strings.Contains(href, "token") {
		t.Fatalf("the token stayed in the URL: %s", href)
	}

	// Enter sends; the answer streams, then renders as Markdown.
	browser.Run(t, ctx, "send",
		chromedp.WaitVisible(`#conn.connected`, chromedp.ByQuery),
		chromedp.SendKeys("#input", "hello from chromium", chromedp.ByID),
		pressEnter(0),
		chromedp.WaitVisible(`//div[contains(@class,"assistant")]//strong[contains(., "hello from chromium")]`, chromedp.BySearch),
		chromedp.WaitVisible(`//div[contains(@class,"tool ok")]/span[contains(., "bash")]`, chromedp.BySearch),
	)
	browser.Screenshot(t, ctx, "02-answer")

	// Shift+Enter makes a new line instead of sending.
	var value string
	browser.Run(t, ctx, "shift+enter",
		chromedp.SendKeys("#input", "line one", chromedp.ByID),
		pressEnter(input.ModifierShift),
		chromedp.SendKeys("#input", "line two", chromedp.ByID),
		chromedp.Value("#input", &value, chromedp.ByID),
	)
	if value != "line one\nline two" {
		t.Fatalf("textarea after Shift+Enter: %q", value)
	}
	browser.Run(t, ctx, "send two lines",
		pressEnter(0),
		chromedp.WaitVisible(`//div[contains(@class,"assistant")]//strong[contains(., "line two")]`, chromedp.BySearch),
	)
	in := ts.gw.inbounds()
	if len(in) != 2 || in[1].Text != "line one\nline two" {
		t.Fatalf("inbound: %+v", in)
	}

	// A reload still shows the conversation, each message once.
	var answers int
	browser.Run(t, ctx, "reload",
		chromedp.Reload(),
		chromedp.WaitVisible(`//div[contains(@class,"assistant")]//strong[contains(., "line two")]`, chromedp.BySearch),
		chromedp.Sleep(300*time.Millisecond),
		chromedp.Evaluate(`document.querySelectorAll(".msg.assistant:not(.streaming)").length`, &answers),
	)
	browser.Screenshot(t, ctx, "03-after-reload")
	if answers != 2 {
		t.Fatalf("after reload %d answers shown, want 2", answers)
	}

	// A too-long message is refused with a clear error and not stored.
	browser.Run(t, ctx, "too long",
		chromedp.Evaluate(fmt.Sprintf(`document.getElementById("input").value = "x".repeat(%d)`, ts.ch.opts.MaxMessageBytes+1), nil),
		chromedp.Click("#send", chromedp.ByID),
		chromedp.WaitVisible(`//div[@id="error" and contains(., "too long")]`, chromedp.BySearch),
	)
	if n := len(ts.gw.inbounds()); n != 2 {
		t.Fatalf("%d messages stored after the refused one, want 2", n)
	}

	// The dashboard: a conversation, a sandbox, its terminal's live output.
	key := conch.ConversationKey{Channel: conch.ChannelWeb, ID: in[0].Key.ID}
	ts.read.sums = []conch.ConversationSummary{{Key: key, LastSender: "owner", LastMessage: "line one", LastRole: conch.RoleUser, State: conch.ConversationRunning, Pending: 1}}
	ts.boxes.infos = []conch.SandboxInfo{{Name: "conch-web-1234", Key: key, Conversation: key.String(), Engine: "docker 28.2", State: "running", Running: true}}
	browser.Run(t, ctx, "dashboard",
		chromedp.Navigate(ts.srv.URL+"/dashboard"),
		chromedp.WaitVisible(`//td[contains(., "running, 1 queued")]`, chromedp.BySearch),
		chromedp.WaitVisible(`//td[contains(., "12.5%")]`, chromedp.BySearch),
		chromedp.Click(`//button[contains(., "tty 0")]`, chromedp.BySearch),
		chromedp.WaitVisible(`//span[@id="term-state" and contains(., "live")]`, chromedp.BySearch),
	)
	ts.terms.lines <- "\x1b[31mcompiling\x1b[0m step 1"
	browser.Run(t, ctx, "terminal output",
		chromedp.WaitVisible(`//div[contains(@class,"xterm-rows")]//*[contains(., "compiling step 1")]`, chromedp.BySearch),
	)
	ts.terms.lines <- "step 2 done"
	browser.Run(t, ctx, "more terminal output",
		chromedp.WaitVisible(`//div[contains(@class,"xterm-rows")]//*[contains(., "step 2 done")]`, chromedp.BySearch),
	)
	browser.Screenshot(t, ctx, "04-dashboard")

	// A page of another origin cannot open our WebSocket, even though the
	// browser holds our cookie.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><body><script>
window.result = "pending";
const ws = new WebSocket(%q);
ws.onopen = () => { window.result = "open"; };
ws.onmessage = (m) => { window.result = "data: " + m.data; };
ws.onclose = () => { if (window.result === "pending") window.result = "refused"; };
</script>`, "ws"+strings.TrimPrefix(ts.srv.URL, "http")+"/api/chat?c="+key.ID+"&after=0")
	}))
	defer evil.Close()
	var result string
	browser.Run(t, b.Tab(), "cross-origin page",
		chromedp.Navigate(evil.URL),
		chromedp.Poll(`window.result !== "pending"`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Evaluate(`window.result`, &result),
	)
	if result != "refused" {
		t.Fatalf("cross-origin WebSocket: %s, want refused", result)
	}
}

// pressEnter presses Enter as a keyboard does: one keyDown carrying the
// text, whose default action (a line break) the page may cancel.
// (chromedp.KeyEvent sends a separate "char" event that inserts the line
// break even when the page cancelled the key.)
func pressEnter(mods input.Modifier) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		down := &input.DispatchKeyEventParams{Type: input.KeyDown, Key: "Enter", Code: "Enter", Text: "\r", UnmodifiedText: "\r",
			WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13, Modifiers: mods}
		if err := down.Do(ctx); err != nil {
			return err
		}
		up := &input.DispatchKeyEventParams{Type: input.KeyUp, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13, Modifiers: mods}
		return up.Do(ctx)
	})
}
