package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
	tgfake "conch/internal/testenv/telegram"
)

// chartPNG is a small chart: the picture the sandbox "draws".
func chartPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 120, 80))
	for x := range 120 {
		for y := 80 - (x*x)%70; y < 80; y++ {
			img.Set(x, y, color.RGBA{B: 220, A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// drawCall is the bash call that writes the chart in the sandbox (the
// decoding runs there), with the traps the refusals need beside it.
func drawCall(t *testing.T, chart []byte) fakellm.Call {
	cmd := "sh -c 'mkdir -p out && printf %s " + base64.StdEncoding.EncodeToString(chart) + " | base64 -d > out/chart.png" +
		" && ln -sf /etc/passwd out/passwd.png && mkfifo out/pipe && truncate -s 51M out/big.bin && ls -l out'"
	args, _ := json.Marshal(map[string]string{"command": cmd})
	return fakellm.Call{Name: "bash", Args: args}
}

func sendCall(paths ...string) fakellm.Call {
	args, _ := json.Marshal(map[string][]string{"paths": paths})
	return fakellm.Call{Name: "send_file", Args: args}
}

func tgSendFileEnv(t *testing.T, llm *fakellm.Server, tg *tgfake.Server) []string {
	e := engine.Docker(t)
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := "sf" + hex.EncodeToString(buf)
	instanceContainers(t, e.Client(t), instance)
	return append(telegramEnv(t, llm, tg, t.TempDir(), "4242"), engineEnv(t, e, instance)...)
}

// answersTo are the bot's notifying messages (answers; progress is silent).
func answersTo(tg *tgfake.Server, chat int64) []tgfake.Sent {
	var out []tgfake.Sent
	for _, s := range sentOf(tg, chat, "sendMessage") {
		if !s.Silent {
			out = append(out, s)
		}
	}
	return out
}

func sentOf(tg *tgfake.Server, chat int64, method string) []tgfake.Sent {
	var out []tgfake.Sent
	for _, s := range tg.Sent(chat) {
		if s.Method == method {
			out = append(out, s)
		}
	}
	return out
}

// TestUpSendFileTelegram: the model draws a chart in the sandbox (a real
// container) and sends it with send_file; it arrives through the Bot API
// fake as a photo after the answer's text. A symbolic link to /etc/passwd,
// a file over Telegram's limit, ".." and a FIFO are refused as tool errors
// the model reads, and nothing of them leaves.
func TestUpSendFileTelegram(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	tg := tgfake.Start(t)
	alice := tgfake.Person(4242, "alice", "Alice")
	chart := chartPNG(t)
	p := startConch(t, tgSendFileEnv(t, llm, tg), "up")
	p.waitStderr(t, "telegram polling")

	llm.Push(fakellm.ToolCalls(drawCall(t, chart)),
		fakellm.ToolCalls(sendCall("out/passwd.png"), sendCall("/workspace/out/chart.png")),
		fakellm.ToolCalls(sendCall("out/big.bin")),
		fakellm.Text("Here is your chart."))
	tg.SendText(alice, tgfake.PrivateChat(alice), "draw me a chart")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := tg.Wait(ctx, func() bool { return len(sentOf(tg, alice.ID, "sendPhoto")) == 1 }); err != nil {
		last, _ := llm.Last()
		t.Fatalf("no photo arrived; the model read %+v; stderr:\n%s", last.ToolResults(), p.stderr)
	}
	photo := sentOf(tg, alice.ID, "sendPhoto")[0]
	if !bytes.Equal(photo.Photo.Data, chart) || photo.Silent {
		t.Fatalf("photo %d bytes (want the chart's %d), silent %v", len(photo.Photo.Data), len(chart), photo.Silent)
	}
	texts := answersTo(tg, alice.ID)
	if len(texts) != 1 || texts[0].Text != "Here is your chart." || texts[0].MessageID > photo.MessageID {
		t.Fatalf("answer text %+v, want it once, before the photo", texts)
	}
	last, _ := llm.Last()
	rs := last.ToolResults()
	if len(rs) < 4 || !strings.Contains(rs[len(rs)-3].Content, "symbolic link") || !strings.Contains(rs[len(rs)-2].Content, "chart.png (image/png") ||
		!strings.Contains(rs[len(rs)-1].Content, "51.0 MB, over the 50.0 MB limit for files sent on telegram") {
		t.Fatalf("tool results the model read: %+v", rs)
	}

	// Refusals in a turn of their own: the model reads each, nothing leaves.
	llm.Push(fakellm.ToolCalls(sendCall("out/../../etc/passwd"), sendCall("out/pipe")), fakellm.Text("I could not send those."))
	tg.SendText(alice, tgfake.PrivateChat(alice), "now send the rest")
	if err := tg.Wait(ctx, func() bool { return len(answersTo(tg, alice.ID)) == 2 }); err != nil {
		t.Fatalf("no second answer; stderr:\n%s", p.stderr)
	}
	last, _ = llm.Last()
	rs = last.ToolResults()
	want := []string{`".."`, "not a regular file (a FIFO)"}
	for i, w := range want {
		if r := rs[len(rs)-2+i]; !strings.Contains(r.Content, w) {
			t.Errorf("refusal %d: the model read %q, want it to say %q", i, r.Content, w)
		}
	}
	if n := len(sentOf(tg, alice.ID, "sendPhoto")) + len(sentOf(tg, alice.ID, "sendDocument")) + len(sentOf(tg, alice.ID, "sendMediaGroup")); n != 1 {
		t.Fatalf("%d files sent in all, want only the chart", n)
	}
	for _, s := range tg.Sent(alice.ID) {
		if strings.Contains(s.Text, "root:x:0:0") {
			t.Fatalf("/etc/passwd leaked: %+v", s)
		}
	}
}

// TestUpSendFileKill9: conch is killed after the answer with its file is
// stored and before it is sent (the Bot API holds the answer's text). After
// the restart the stored answer goes out again, with its photo, exactly
// once, and the model is not asked again.
func TestUpSendFileKill9(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	tg := tgfake.Start(t)
	alice := tgfake.Person(4242, "alice", "Alice")
	chart := chartPNG(t)
	env := tgSendFileEnv(t, llm, tg)
	p := startConch(t, env, "up")
	p.waitStderr(t, "telegram polling")

	// The answer (it notifies; progress is silent) never gets through.
	release := tg.HangIf("sendMessage", func(p map[string]string) bool { return p["disable_notification"] != "true" })
	defer release()
	llm.Push(fakellm.ToolCalls(drawCall(t, chart)), fakellm.ToolCalls(sendCall("out/chart.png")), fakellm.Text("Chart attached."))
	tg.SendText(alice, tgfake.PrivateChat(alice), "chart please")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := tg.Wait(ctx, func() bool {
		for _, c := range tg.Calls("sendMessage") {
			if c.Params["disable_notification"] != "true" {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("the answer was never sent; stderr:\n%s", p.stderr)
	}
	p.kill9(t)
	release()
	if n := len(answersTo(tg, alice.ID)) + len(sentOf(tg, alice.ID, "sendPhoto")); n != 0 {
		t.Fatalf("%d messages delivered before the kill, want none: %+v", n, tg.Sent(alice.ID))
	}
	calls := llm.Count()

	p = startConch(t, env, "up")
	if err := tg.Wait(ctx, func() bool { return len(sentOf(tg, alice.ID, "sendPhoto")) == 1 }); err != nil {
		t.Fatalf("the photo was not re-sent; sent %+v; stderr:\n%s", tg.Sent(alice.ID), p.stderr)
	}
	time.Sleep(1500 * time.Millisecond)
	photos, texts := sentOf(tg, alice.ID, "sendPhoto"), answersTo(tg, alice.ID)
	if len(photos) != 1 || !bytes.Equal(photos[0].Photo.Data, chart) || len(texts) != 1 || texts[0].Text != "Chart attached." {
		t.Fatalf("after the restart: %d photos, texts %+v; want the chart and the answer once", len(photos), texts)
	}
	if llm.Count() != calls {
		t.Fatalf("the model was asked %d more times, want none (the answer was stored)", llm.Count()-calls)
	}
}
