package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"conch/internal/testenv"
	"conch/internal/testenv/browser"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
)

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// enter presses Enter as a keyboard does (see channel/web's browser test).
func enter() chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		down := &input.DispatchKeyEventParams{Type: input.KeyDown, Key: "Enter", Code: "Enter", Text: "\r", UnmodifiedText: "\r", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13}
		if err := down.Do(ctx); err != nil {
			return err
		}
		return (&input.DispatchKeyEventParams{Type: input.KeyUp, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13}).Do(ctx)
	})
}

// webURL runs `conch web url` and returns the link it prints.
func webURL(t testing.TB, env []string) string {
	t.Helper()
	out, errOut, code := conchRun(t, env, "web url")
	link := strings.TrimSpace(out)
	if code != 0 || !strings.Contains(link, "/login?token=") {
		t.Fatalf("conch web url: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	return link
}

// TestWebChatEndToEnd: `conch up` with only a model configured prints a
// login link and serves the web chat; Chromium logs in with a link from
// `conch web url`, chats (Markdown rendered), reloads, and after a restart
// of conch still sees the conversation, each message once. Without login
// the API answers 401.
func TestWebChatEndToEnd(t *testing.T) {
	testenv.Short(t)
	b := browser.Start(t)
	srv := fakellm.New(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	env := append(testEnv(srv, fakellm.OpenAI, dir), "CONCH_GATEWAY_LISTEN="+addr)
	base := "http://" + addr

	srv.Push(fakellm.Text("Hello from **conch**. Here is code:\n\n```sh\nls -l\n```"))
	p := startConch(t, env, "up")
	p.waitStderr(t, "Web chat: open http://"+addr+"/login?token=")

	resp, err := http.Get(base + "/api/conversations")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("API without login: %d %s", resp.StatusCode, body)
	}

	ctx := b.Context()
	var href string
	browser.Run(t, ctx, "login",
		chromedp.Navigate(webURL(t, env)),
		chromedp.WaitVisible(`#conn.connected`, chromedp.ByQuery),
		chromedp.Location(&href),
	)
	if strings.Contains(href, "token") {
		t.Fatalf("token left in the URL: %s", href)
	}
	browser.Run(t, ctx, "chat",
		chromedp.SendKeys("#input", "hi there", chromedp.ByID),
		enter(),
		chromedp.WaitVisible(`//div[contains(@class,"assistant")]//strong[contains(., "conch")]`, chromedp.BySearch),
		chromedp.WaitVisible(`//div[contains(@class,"assistant")]//pre/code[contains(., "ls -l")]`, chromedp.BySearch),
	)
	browser.Screenshot(t, ctx, "web-chat")

	// The session cookie Chromium holds, replayed alone as curl would (a
	// page on another port of this machine can make the browser send it
	// there): the API, the dashboard's data, /metrics and the chat socket
	// refuse it; the page, which also sends its request token, works on.
	var cookies []*network.Cookie
	var conv string
	browser.Run(t, ctx, "cookies", chromedp.Evaluate(`state.current`, &conv), chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		cookies, err = network.GetCookies().WithURLs([]string{base}).Do(ctx)
		return err
	}))
	var jar []string
	for _, c := range cookies {
		jar = append(jar, c.Name+"="+c.Value)
	}
	if len(jar) == 0 {
		t.Fatal("no cookie in the browser after login")
	}
	for _, path := range []string{"/api/session", "/api/conversations", "/api/dashboard", "/api/audit", "/metrics"} {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Cookie", strings.Join(jar, "; "))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with the replayed cookie: %d %.80s, want 401", path, resp.StatusCode, body)
		}
	}
	wsConn, _, err := websocket.Dial(context.Background(), "ws://"+addr+"/api/chat?c="+conv+"&after=0",
		&websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {strings.Join(jar, "; ")}, "Origin": {base}}})
	if err == nil {
		wsConn.CloseNow()
		t.Error("chat socket opened with the replayed cookie")
	}

	// /status works as in every channel.
	browser.Run(t, ctx, "status command",
		chromedp.SendKeys("#input", "/status", chromedp.ByID),
		enter(),
		chromedp.WaitVisible(`//div[contains(@class,"notice")]`, chromedp.BySearch),
	)

	count := func(what string) int {
		var n int
		browser.Run(t, ctx, "count "+what, chromedp.Evaluate(`document.querySelectorAll(".msg.`+what+`:not(.pending):not(.streaming)").length`, &n))
		return n
	}
	browser.Run(t, ctx, "reload",
		chromedp.Reload(),
		chromedp.WaitVisible(`//div[contains(@class,"assistant")]//strong[contains(., "conch")]`, chromedp.BySearch),
		chromedp.Sleep(500*time.Millisecond),
	)
	if u, a := count("user"), count("assistant"); u != 1 || a != 1 {
		t.Fatalf("after reload: %d user and %d assistant messages, want 1 and 1", u, a)
	}

	// Restart conch: the page reconnects and resumes from the stored
	// events, nothing lost, nothing twice.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	srv.Push(fakellm.Text("Still here after the restart."))
	p = startConch(t, env, "up")
	p.waitStderr(t, "Web chat: open")
	browser.Run(t, ctx, "after restart",
		chromedp.WaitVisible(`#conn.connected`, chromedp.ByQuery),
		chromedp.SendKeys("#input", "are you there?", chromedp.ByID),
		enter(),
		chromedp.WaitVisible(`//div[contains(@class,"assistant") and contains(., "after the restart")]`, chromedp.BySearch),
		chromedp.Reload(),
		chromedp.WaitVisible(`//div[contains(@class,"assistant") and contains(., "after the restart")]`, chromedp.BySearch),
		chromedp.Sleep(500*time.Millisecond),
	)
	if u, a := count("user"), count("assistant"); u != 2 || a != 2 {
		t.Fatalf("after restart and reload: %d user and %d assistant messages, want 2 and 2", u, a)
	}
	browser.Screenshot(t, ctx, "web-chat-after-restart")
}

// TestWebDashboardLiveTerminal: the model runs a slow loop in a terminal of
// a real sandbox; the dashboard lists the sandbox with the engine's CPU and
// memory figures and shows the terminal's output live, while it runs.
func TestWebDashboardLiveTerminal(t *testing.T) {
	testenv.Short(t)
	b := browser.Start(t)
	e := engine.Docker(t)
	srv := fakellm.New(t)
	dir := t.TempDir()
	buf := make([]byte, 4)
	rand.Read(buf)
	instance := "wd" + hex.EncodeToString(buf)
	addr := freeAddr(t)
	env := append(testEnv(srv, fakellm.OpenAI, dir),
		"CONCH_GATEWAY_LISTEN="+addr,
	)
	env = append(env, engineEnv(t, e, instance)...)
	instanceContainers(t, e.Client(t), instance)
	srv.Push(
		fakellm.ToolCall("terminal_open", `{}`),
		fakellm.ToolCall("terminal_type", `{"tty":0,"expect":"bash","text":"for i in $(seq 1 80); do printf '\\033[32mtick %d\\033[0m\\n' $i; sleep 0.25; done"}`),
		fakellm.ToolCall("terminal_wait", `{"timeout_seconds":40}`),
		fakellm.Text("The loop finished."),
	)
	p := startConch(t, env, "up")
	p.waitStderr(t, "Web chat: open")

	chat := b.Context()
	browser.Run(t, chat, "login and ask",
		chromedp.Navigate(webURL(t, env)),
		chromedp.WaitVisible(`#conn.connected`, chromedp.ByQuery),
		chromedp.SendKeys("#input", "run the loop", chromedp.ByID),
		enter(),
		chromedp.WaitVisible(`//div[contains(@class,"tool")]/span[contains(., "terminal_type")]`, chromedp.BySearch),
	)
	dash := b.Tab()
	browser.Run(t, dash, "dashboard",
		chromedp.Navigate("http://"+addr+"/dashboard"),
		chromedp.WaitVisible(`//td[contains(., "running")]`, chromedp.BySearch),
		chromedp.WaitVisible(`//td[contains(., "MiB")]`, chromedp.BySearch),
		chromedp.Click(`//button[contains(., "tty 0")]`, chromedp.BySearch),
		chromedp.WaitVisible(`//div[contains(@class,"xterm-rows")]//*[contains(., "tick 5")]`, chromedp.BySearch),
	)
	var before string
	browser.Run(t, dash, "read terminal", chromedp.Text(".xterm-rows", &before, chromedp.ByQuery))
	// Output keeps arriving while the command runs.
	browser.Run(t, dash, "live output",
		chromedp.WaitVisible(`//div[contains(@class,"xterm-rows")]//*[contains(., "tick 40")]`, chromedp.BySearch),
	)
	browser.Screenshot(t, dash, "dashboard-terminal")
	if strings.Contains(before, "tick 40") {
		t.Fatalf("the view showed the end before the command got there: %q", before)
	}
	browser.Run(t, chat, "answer",
		chromedp.WaitVisible(`//div[contains(@class,"assistant") and contains(., "The loop finished.")]`, chromedp.BySearch),
	)
}
