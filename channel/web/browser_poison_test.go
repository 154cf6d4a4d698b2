package web

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"conch"
	"conch/internal/testenv"
	"conch/internal/testenv/browser"
)

// TestBrowserPoisonMessageIsDropped: a message too big for the socket is
// refused by the page with a clear message and dropped, typed now or left
// in the outbox by an older page; the messages after it go through.
func TestBrowserPoisonMessageIsDropped(t *testing.T) {
	testenv.Short(t)
	b := browser.Start(t)
	ts := newTestServer(t)
	ctx := b.Context()
	huge := int(ts.ch.readLimit()) + 10

	var conv string
	browser.Run(t, ctx, "login",
		chromedp.Navigate(ts.loginURL()),
		chromedp.WaitVisible(`#conn.connected`, chromedp.ByQuery),
		chromedp.Evaluate(`state.current`, &conv),
	)
	var pending int
	var box string
	browser.Run(t, ctx, "send a message over the socket's limit",
		chromedp.Evaluate(fmt.Sprintf(`document.getElementById("input").value = "z".repeat(%d)`, huge), nil),
		chromedp.Click("#send", chromedp.ByID),
		chromedp.WaitVisible(`//div[@id="error" and contains(., "too long")]`, chromedp.BySearch),
		chromedp.Sleep(1500*time.Millisecond), // a resend loop would show by now
		chromedp.Evaluate(`document.querySelectorAll(".pending").length`, &pending),
		chromedp.Evaluate(`localStorage.getItem("conch.outbox." + state.current) || ""`, &box),
	)
	if pending != 0 || box != "" {
		t.Fatalf("the refused message stayed: %d pending, outbox %d bytes", pending, len(box))
	}
	var kept int
	browser.Run(t, ctx, "a message after it",
		chromedp.Evaluate(`document.getElementById("input").value.length`, &kept),
		chromedp.Evaluate(`document.getElementById("input").value = ""`, nil), // the person gives up on it
		chromedp.WaitVisible(`#conn.connected`, chromedp.ByQuery),
		chromedp.SendKeys("#input", "after the poison", chromedp.ByID),
		pressEnter(0),
		chromedp.WaitVisible(`//div[contains(@class,"assistant")]//strong[contains(., "after the poison")]`, chromedp.BySearch),
	)

	// Should the page's own check miss one (a limit it did not know), the
	// server's 1009 makes it drop the message instead of sending it again.
	browser.Run(t, ctx, "a message only the server refuses",
		chromedp.Evaluate(`conch.session.max_message_bytes = 1e9`, nil),
		chromedp.Evaluate(fmt.Sprintf(`document.getElementById("input").value = "y".repeat(%d)`, huge), nil),
		chromedp.Evaluate(`conch.showError("")`, nil), // the earlier error covers the button
		chromedp.Click("#send", chromedp.ByID),
		chromedp.WaitVisible(`//div[@id="error" and contains(., "too long for the connection")]`, chromedp.BySearch),
		chromedp.Evaluate(`conch.session.max_message_bytes = 65536`, nil),
		chromedp.WaitVisible(`#conn.connected`, chromedp.ByQuery),
		chromedp.Sleep(1500*time.Millisecond),
		chromedp.Evaluate(`document.querySelectorAll(".pending").length`, &pending),
		chromedp.Evaluate(`localStorage.getItem("conch.outbox." + state.current) || ""`, &box),
	)
	if pending != 0 || box != "" {
		t.Fatalf("the message the server refused stayed: %d pending, outbox %d bytes", pending, len(box))
	}

	// An outbox an older page left with such a message: dropped at load,
	// with the same clear message, and later messages still go through.
	browser.Run(t, ctx, "stale poison in the outbox",
		chromedp.Evaluate(fmt.Sprintf(`localStorage.setItem("conch.outbox." + state.current, JSON.stringify([{id: "poison1", text: "z".repeat(%d)}, {id: "okafter1", text: "kept after poison"}]))`, huge), nil),
		chromedp.Reload(),
		chromedp.WaitVisible(`//div[@id="error" and contains(., "too long")]`, chromedp.BySearch),
		chromedp.WaitVisible(`//div[contains(@class,"assistant")]//strong[contains(., "kept after poison")]`, chromedp.BySearch),
		chromedp.SendKeys("#input", "and one more", chromedp.ByID),
		pressEnter(0),
		chromedp.WaitVisible(`//div[contains(@class,"assistant")]//strong[contains(., "and one more")]`, chromedp.BySearch),
		chromedp.Evaluate(`localStorage.getItem("conch.outbox." + state.current) || ""`, &box),
	)
	browser.Screenshot(t, ctx, "poison-dropped")
	if box != "" {
		t.Fatalf("outbox after the stale poison: %d bytes, want empty", len(box))
	}
	for _, in := range ts.gw.inbounds() {
		if strings.HasPrefix(in.Text, "zzz") {
			t.Fatalf("the oversized message was stored (%d bytes)", len(in.Text))
		}
	}
	if n := len(ts.gw.inbounds()); n != 3 {
		t.Fatalf("%d messages stored, want 3", n)
	}
	if kept != huge {
		t.Errorf("the refused text left the input (%d characters kept), want it kept to shorten", kept)
	}
	_ = conv
}

// TestBrowserLongTokenStreams: a 20,000-character unbroken token streamed as
// text deltas renders in a moment (no re-layout per delta) and wraps inside
// the conversation instead of widening it.
func TestBrowserLongTokenStreams(t *testing.T) {
	testenv.Short(t)
	b := browser.Start(t)
	ts := newTestServer(t)
	ts.hub.buf = 30000 // the burst below must not cut the page's subscription off
	ctx := b.Context()
	var conv string
	browser.Run(t, ctx, "login",
		chromedp.Navigate(ts.loginURL()),
		chromedp.WaitVisible(`#conn.connected`, chromedp.ByQuery),
		chromedp.Evaluate(`state.current`, &conv),
	)
	key := conch.ConversationKey{Channel: conch.ChannelWeb, ID: conv}
	const turn, chunk, chunks = conch.TurnID(7), 2, 10000
	start := time.Now()
	ts.hub.Publish(key, turn, conch.TurnState{Status: conch.TurnRunning})
	for i := range chunks {
		ts.hub.Publish(key, turn, conch.TextDelta{Text: strings.Repeat(string(rune('a'+i%26)), chunk)})
	}
	var n int
	browser.Run(t, ctx, "stream 20,000 characters",
		chromedp.Poll(fmt.Sprintf(`(document.querySelector(".msg.streaming") || {textContent: ""}).textContent.length >= %d`, chunk*chunks), nil,
			chromedp.WithPollingTimeout(50*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)),
		chromedp.Evaluate(`document.querySelector(".msg.streaming").textContent.length`, &n),
	)
	took := time.Since(start)
	t.Logf("%d characters in %d deltas shown after %v", n, chunks, took)
	if n != chunk*chunks {
		t.Fatalf("streamed text: %d characters, want %d", n, chunk*chunks)
	}
	if took > 5*time.Second {
		t.Fatalf("the deltas took %v to show, want a few seconds at most", took)
	}
	var wide bool
	browser.Run(t, ctx, "wraps",
		chromedp.Evaluate(`(() => { const m = document.getElementById("messages"), s = document.querySelector(".msg.streaming");
			return m.scrollWidth > m.clientWidth + 1 || s.getBoundingClientRect().right > m.getBoundingClientRect().right + 1; })()`, &wide),
	)
	browser.Screenshot(t, ctx, "long-token")
	if wide {
		t.Fatal("the long token widened the conversation instead of wrapping")
	}
	token := strings.Repeat("q", chunk*chunks)
	ts.hub.Publish(key, turn, conch.MessageEvent{Role: conch.RoleAssistant, Text: token})
	ts.hub.Publish(key, turn, conch.TurnState{Status: conch.TurnDone})
	browser.Run(t, ctx, "the answer wraps too",
		chromedp.WaitVisible(`//div[contains(@class,"msg assistant") and not(contains(@class,"streaming")) and starts-with(., "qqqq")]`, chromedp.BySearch),
		chromedp.Evaluate(`(() => { const m = document.getElementById("messages"); return m.scrollWidth > m.clientWidth + 1; })()`, &wide),
	)
	if wide {
		t.Fatal("the long answer widened the conversation instead of wrapping")
	}
}
