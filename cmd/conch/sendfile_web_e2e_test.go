package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"conch/internal/testenv"
	"conch/internal/testenv/browser"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
)

// TestUpSendFileWeb: a chart drawn in a real sandbox and sent with
// send_file shows inline in the web chat (headless Chromium), fetched from
// the web channel's file route behind the login; the route refuses a
// request without the request token, a path out of the store and another
// conversation's file.
func TestUpSendFileWeb(t *testing.T) {
	testenv.Short(t)
	b := browser.Start(t)
	llm := fakellm.New(t)
	e := engine.Docker(t)
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := "sfw" + hex.EncodeToString(buf)
	instanceContainers(t, e.Client(t), instance)
	addr := freeAddr(t)
	env := append(append(testEnv(llm, fakellm.OpenAI, t.TempDir()), "CONCH_GATEWAY_LISTEN="+addr), engineEnv(t, e, instance)...)
	base := "http://" + addr
	chart := chartPNG(t)

	p := startConch(t, env, "up")
	p.waitStderr(t, "Web chat: open http://"+addr+"/login?token=")
	llm.Push(fakellm.ToolCalls(drawCall(t, chart)), fakellm.ToolCalls(sendCall("out/chart.png")), fakellm.Text("Here is the chart."))
	ctx := b.Context()
	var width int
	var conv, token, src string
	browser.Run(t, ctx, "login and ask",
		chromedp.Navigate(webURL(t, env)),
		chromedp.WaitVisible(`#conn.connected`, chromedp.ByQuery),
		chromedp.SendKeys("#input", "draw me a chart", chromedp.ByID),
		enter(),
		chromedp.WaitVisible(`//div[contains(@class,"assistant") and contains(., "Here is the chart.")]//figure//img`, chromedp.BySearch),
		chromedp.Poll(`(() => { const i = document.querySelector(".msg.assistant figure.file img"); return i && i.complete && i.naturalWidth; })()`, &width,
			chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Evaluate(`state.current`, &conv),
		chromedp.Evaluate(`localStorage.getItem("conch.token")`, &token),
		chromedp.Evaluate(`document.querySelector(".msg.assistant figure.file").dataset.ref`, &src),
	)
	browser.Screenshot(t, ctx, "web-chat-chart")
	if width != 120 {
		t.Fatalf("the chart shows %d pixels wide, want 120", width)
	}

	get := func(path string, withToken bool) (int, []byte, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if withToken {
			req.Header.Set("X-Conch-Token", token)
		}
		// The cookie Chromium holds is HttpOnly; the request token alone
		// must not do either: both are needed.
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body, resp.Header
	}
	// From the page (cookie and token): the chart, as an image, nosniff.
	var fetched string
	browser.Run(t, ctx, "fetch the file", chromedp.Evaluate(`fetch("/api/files/`+conv+`/`+src+`?name=chart.png", {headers: {"X-Conch-Token": conch.token()}}).then(async (r) => r.status + " " + r.headers.get("content-type") + " " + (await r.arrayBuffer()).byteLength)`, &fetched,
		awaitPromise))
	if want := "200 image/png " + strconv.Itoa(len(chart)); fetched != want {
		t.Fatalf("the page fetched %q, want %q", fetched, want)
	}
	if code, _, _ := get("/api/files/"+conv+"/"+src, true); code != http.StatusUnauthorized {
		t.Fatalf("the token without the session cookie: %d, want 401", code)
	}
	var probes []string
	for _, path := range []string{
		"/api/files/" + conv + "/..%2f..%2fetc/passwd", "/api/files/" + conv + "/" + strings.Replace(src, "/", "/../", 1),
		"/api/files/not-a-conversation/" + src, "/api/files/" + conv + "/0123abcd/0123abcd",
	} {
		var res string
		browser.Run(t, ctx, "probe", chromedp.Evaluate(`fetch(`+strconv.Quote(path)+`, {headers: {"X-Conch-Token": conch.token()}}).then((r) => String(r.status))`, &res,
			awaitPromise))
		probes = append(probes, path+" → "+res)
		if res != "404" && res != "400" {
			t.Errorf("GET %s: %s, want 404", path, res)
		}
	}
	// Another conversation of the same person cannot read this file.
	var other, res string
	browser.Run(t, ctx, "another conversation",
		chromedp.Evaluate(`conch.api("POST", "/api/conversations", {title: "other"}).then((c) => c.id)`, &other,
			awaitPromise),
	)
	browser.Run(t, ctx, "cross read", chromedp.Evaluate(`fetch("/api/files/`+other+`/`+src+`", {headers: {"X-Conch-Token": conch.token()}}).then((r) => String(r.status))`, &res,
		awaitPromise))
	if res != "404" {
		t.Fatalf("another conversation read the file: %s", res)
	}
	if bytes.Contains([]byte(p.stderr.String()), []byte("panic")) {
		t.Fatalf("conch panicked:\n%s", p.stderr)
	}
	t.Logf("probes: %v", probes)
}

// awaitPromise makes chromedp.Evaluate wait for the promise it returns.
func awaitPromise(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams {
	return p.WithAwaitPromise(true)
}
