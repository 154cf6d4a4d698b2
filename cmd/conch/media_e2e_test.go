package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"conch/internal/testenv"
	"conch/internal/testenv/browser"
	"conch/internal/testenv/fakellm"
	testmail "conch/internal/testenv/mail"
	tgfake "conch/internal/testenv/telegram"
	"conch/media/mediatest"
)

// mediaEnv is telegramEnv with pictures seen by the test model and voice
// transcribed by the fake's OpenAI-compatible endpoint.
func mediaEnv(t *testing.T, llm *fakellm.Server, tg *tgfake.Server, dir string, allow string) []string {
	cfg := filepath.Join(dir, "config", "conch")
	if err := os.MkdirAll(cfg, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "conch.toml"), []byte("[media]\nvision = { \"test-model\" = true }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return append(telegramEnv(t, llm, tg, dir, allow),
		"CONCH_VOICE_PROVIDER=openai",
		"CONCH_VOICE_BASE_URL="+llm.BaseURL(fakellm.OpenAI),
		"CONCH_VOICE_API_KEY=voice-test-key",
	)
}

// TestUpTelegramMedia runs the real binary against the Bot API fake and
// the fake model: a photo reaches the model as an image part (turned
// upright, its location gone), a voice note is transcribed, shown to the
// person and answered, and malicious files (a truncated PNG, an image
// bomb, a 300 MB voice note) get clear words while their messages are
// answered once each.
func TestUpTelegramMedia(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	tg := tgfake.Start(t)
	alice := tgfake.Person(4242, "alice", "Alice")
	chat := tgfake.PrivateChat(alice)
	env := mediaEnv(t, llm, tg, t.TempDir(), "4242")
	// doctor says whether the model sees pictures (here by [media] vision).
	if out, _, _ := conchRun(t, env, "doctor"); !strings.Contains(out, "test-model sees pictures: yes ([media] vision)") {
		t.Fatalf("doctor output lacks the pictures line:\n%s", out)
	}
	p := startConch(t, env, "up")
	p.waitStderr(t, "telegram polling")

	// 1. A photo, stored sideways with a location in its EXIF block.
	llm.Push(fakellm.Text("A red and blue picture."))
	tg.SendPhoto(alice, chat, mediatest.Photo(400, 200, 6), "what is this?")
	tg.WaitMessages(t, alice.ID, 1, 30*time.Second)
	req, _ := llm.Last()
	ims := req.Messages[len(req.Messages)-1].Images
	if len(ims) != 1 || ims[0].MediaType != "image/jpeg" || ims[0].Width != 200 || ims[0].Height != 400 {
		t.Fatalf("the model got %d pictures (%+v), want one upright 200×400 JPEG; stderr:\n%s", len(ims), ims, p.stderr)
	}
	if bytes.Contains(ims[0].Data, []byte("Exif")) || bytes.Contains(ims[0].Data, []byte(mediatest.Location)) {
		t.Fatal("the picture sent to the model still holds its EXIF block and location")
	}
	if !strings.Contains(req.LastUserText(), "what is this?") {
		t.Fatalf("user text %q", req.LastUserText())
	}

	// 2. A voice note: transcribed, the person sees what was heard, the
	// model reads it, and the answer follows.
	llm.Push(fakellm.Text("It is noon."))
	tg.SendVoice(alice, chat, mediatest.Voice("what time is it"), 2, 0)
	msgs := tg.WaitMessages(t, alice.ID, 3, 30*time.Second)
	if !strings.Contains(msgs[1].Text, "I heard: “what time is it”") || msgs[2].Text != "It is noon." {
		t.Fatalf("after the voice note: %q then %q", msgs[1].Text, msgs[2].Text)
	}
	if tr := llm.Transcriptions(); len(tr) != 1 || tr[0].Model != "whisper-1" || !strings.HasSuffix(tr[0].Name, ".ogg") {
		t.Fatalf("transcriptions: %+v", tr)
	}
	req, _ = llm.Last()
	if !strings.Contains(req.LastUserText(), `transcribed: "what time is it"`) {
		t.Fatalf("the model read %q", req.LastUserText())
	}

	// 3. Malicious files: each message is answered once; the person and
	// the model are told what was wrong.
	good := mediatest.PNG(64, 64)
	llm.Push(fakellm.Text("ok 1"), fakellm.Text("ok 2"), fakellm.Text("ok 3"))
	tg.SendDocument(alice, chat, "half.png", "image/png", good[:len(good)/2], "truncated")
	tg.WaitMessages(t, alice.ID, 5, 30*time.Second)
	tg.SendDocument(alice, chat, "bomb.png", "image/png", mediatest.Bomb(100000, 100000), "bomb")
	tg.WaitMessages(t, alice.ID, 7, 30*time.Second)
	tg.SendVoice(alice, chat, mediatest.Voice("too long"), 18000, 300<<20)
	msgs = tg.WaitMessages(t, alice.ID, 8, 30*time.Second)
	want := []string{"damaged or truncated", "ok 1", "image bomb", "ok 2", "ok 3"}
	for i, w := range want {
		if !strings.Contains(msgs[3+i].Text, w) {
			t.Errorf("message %d: %q, want %q", 3+i, msgs[3+i].Text, w)
		}
	}
	req, _ = llm.Last()
	if !strings.Contains(req.LastUserText(), "was not received: larger than") {
		t.Errorf("the model read %q", req.LastUserText())
	}
	// The photo is four turns old: it left the context, named instead.
	if n := len(req.Images()); n != 0 || !strings.Contains(req.Messages[0].Text, "no longer in view; call view_image") {
		t.Errorf("the last request has %d pictures and begins %q; want the old photo named, not sent", n, req.Messages[0].Text)
	}
	if n := llm.Count(); n != 5 {
		t.Errorf("the model was asked %d times, want 5 (one per message)", n)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(tg.Messages(alice.ID)); n != 8 {
		t.Errorf("%d messages to alice, want 8: %+v", n, tg.Messages(alice.ID))
	}
}

// attachmentMail is a multipart mail with a text part and files.
func attachmentMail(from, to, subject, id, body string, files ...[3]string) []byte {
	var b strings.Builder
	b.WriteString("From: " + from + "\r\nTo: " + to + "\r\nSubject: " + subject + "\r\nMessage-ID: <" + id + ">\r\nDate: " +
		time.Now().Format(time.RFC1123Z) + "\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n")
	b.WriteString("--b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + body + "\r\n")
	for _, f := range files { // name, media type, content
		enc := base64.StdEncoding.EncodeToString([]byte(f[2]))
		b.WriteString("--b1\r\nContent-Type: " + f[1] + "; name=\"" + f[0] + "\"\r\nContent-Disposition: attachment; filename=\"" + f[0] +
			"\"\r\nContent-Transfer-Encoding: base64\r\n\r\n")
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\r\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\r\n")
	}
	b.WriteString("--b1--\r\n")
	return []byte(b.String())
}

// TestUpEmailMedia: a mail through real postfix and dovecot with a photo
// and a voice recording attached: the model sees the photo as an image
// part and reads the transcript; the person gets what was heard by mail.
func TestUpEmailMedia(t *testing.T) {
	testenv.Short(t)
	ms := testmail.Start(t)
	conchUser, alice := ms.AddUser(t, "conch"), ms.AddUser(t, "alice")
	llm := fakellm.New(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config", "conch")
	if err := os.MkdirAll(cfg, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "conch.toml"), []byte("[media]\nvision = { \"test-model\" = true }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(testEnv(llm, fakellm.OpenAI, dir), "CONCH_GATEWAY_LISTEN=",
		"CONCH_VOICE_PROVIDER=openai", "CONCH_VOICE_BASE_URL="+llm.BaseURL(fakellm.OpenAI))
	env = append(env, emailEnv(ms, conchUser, alice)...)
	llm.Push(fakellm.Text("A red and blue card; the lights are on."))
	p := startConch(t, env, "up")
	p.waitStderr(t, "email: watching mailbox")
	ms.MustSend(t, alice.Address, []string{conchUser.Address}, attachmentMail("Alice <"+alice.Address+">", conchUser.Address, "Card", "card@example.test",
		"See the card and my note.",
		[3]string{"card.jpg", "image/jpeg", string(mediatest.Photo(300, 100, 8))},
		[3]string{"note.ogg", "audio/ogg", string(mediatest.Voice("turn on the lights"))}))
	msgs := ms.MustWait(t, alice, 2, 60*time.Second)
	var heard, answered bool
	for _, m := range msgs {
		heard = heard || strings.Contains(string(m.Raw), "I heard")
		answered = answered || strings.Contains(string(m.Raw), "the lights are on")
	}
	if !heard || !answered {
		t.Fatalf("alice got %d mails (heard %v, answered %v); stderr:\n%s", len(msgs), heard, answered, p.stderr)
	}
	req, _ := llm.Last()
	ims := req.Images()
	if len(ims) != 1 || ims[0].Width != 100 || ims[0].Height != 300 || bytes.Contains(ims[0].Data, []byte(mediatest.Location)) {
		t.Fatalf("the model got pictures %+v, want the card upright (100×300) without its location", ims)
	}
	if text := req.LastUserText(); !strings.Contains(text, `transcribed: "turn on the lights"`) || !strings.Contains(text, "See the card") {
		t.Fatalf("the model read %q", text)
	}
}

// TestWebChatMedia: in headless Chromium against the real binary, a
// picture pasted into the chat and one dropped on it reach the model as
// image parts, and the record button (Chromium's fake microphone) sends a
// recording that is transcribed, shown and answered.
func TestWebChatMedia(t *testing.T) {
	testenv.Short(t)
	b := browser.Start(t)
	llm := fakellm.New(t)
	llm.Transcribe(func(tr fakellm.Transcription) (string, error) {
		if !strings.HasSuffix(tr.Name, ".webm") && !strings.HasSuffix(tr.Name, ".ogg") {
			return "", fmt.Errorf("unexpected recording %q", tr.Name)
		}
		return "hello from the microphone", nil
	})
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := filepath.Join(dir, "config", "conch")
	if err := os.MkdirAll(cfg, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "conch.toml"), []byte("[media]\nvision = { \"test-model\" = true }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(testEnv(llm, fakellm.OpenAI, dir), "CONCH_GATEWAY_LISTEN="+addr,
		"CONCH_VOICE_PROVIDER=openai", "CONCH_VOICE_BASE_URL="+llm.BaseURL(fakellm.OpenAI))
	p := startConch(t, env, "up")
	p.waitStderr(t, "Web chat: open http://"+addr+"/login?token=")

	ctx := b.Context()
	browser.Run(t, ctx, "login", chromedp.Navigate(webURL(t, env)), chromedp.WaitVisible(`#conn.connected`, chromedp.ByQuery))

	// 1. Paste a screenshot into the text box, then type and send.
	llm.Push(fakellm.Text("A red and blue screenshot."))
	fileJS := func(data []byte, name, typ string) string {
		return fmt.Sprintf(`(() => { const b = Uint8Array.from(atob(%q), (c) => c.charCodeAt(0)); const dt = new DataTransfer();
			dt.items.add(new File([b], %q, { type: %q })); return dt; })()`, base64.StdEncoding.EncodeToString(data), name, typ)
	}
	var ok bool
	browser.Run(t, ctx, "paste",
		chromedp.Evaluate(`document.getElementById("input").dispatchEvent(new ClipboardEvent("paste", { clipboardData: `+
			fileJS(mediatest.PNG(64, 48), "shot.png", "image/png")+`, bubbles: true, cancelable: true })) || true`, &ok),
		chromedp.WaitVisible(`//div[@id="attachments"]/span[contains(., "shot.png")]`, chromedp.BySearch),
		chromedp.SendKeys("#input", "what is on my screen?", chromedp.ByID),
		enter(),
		chromedp.WaitVisible(`//div[contains(@class,"assistant")][contains(., "red and blue screenshot")]`, chromedp.BySearch),
	)
	req, _ := llm.Last()
	if ims := req.Images(); len(ims) != 1 || ims[0].MediaType != "image/png" || ims[0].Width != 64 || ims[0].Height != 48 ||
		!strings.Contains(req.LastUserText(), "what is on my screen?") {
		t.Fatalf("after the paste the model got %d pictures %+v and %q; stderr:\n%s", len(ims), ims, req.LastUserText(), p.stderr)
	}

	// 2. Drop a photo on the chat and send it without text.
	llm.Push(fakellm.Text("A photo, upright."))
	browser.Run(t, ctx, "drop",
		chromedp.Evaluate(`document.querySelector("main").dispatchEvent(new DragEvent("drop", { dataTransfer: `+
			fileJS(mediatest.Photo(120, 60, 6), "photo.jpg", "image/jpeg")+`, bubbles: true, cancelable: true })) || true`, &ok),
		chromedp.WaitVisible(`//div[@id="attachments"]/span[contains(., "photo.jpg")]`, chromedp.BySearch),
		chromedp.Click("#send", chromedp.ByID),
		chromedp.WaitVisible(`//div[contains(@class,"assistant")][contains(., "A photo, upright.")]`, chromedp.BySearch),
	)
	req, _ = llm.Last()
	last := req.Messages[len(req.Messages)-1]
	if len(last.Images) != 1 || last.Images[0].Width != 60 || last.Images[0].Height != 120 {
		t.Fatalf("after the drop the model got %+v", last.Images)
	}

	// 3. Record a voice message with the fake microphone.
	llm.Push(fakellm.Text("Hello to you too."))
	browser.Run(t, ctx, "record",
		chromedp.Click("#record", chromedp.ByID),
		chromedp.WaitVisible(`#record.recording`, chromedp.ByQuery),
		chromedp.Sleep(1500*time.Millisecond),
		chromedp.Click("#record", chromedp.ByID),
		chromedp.WaitVisible(`//div[contains(@class,"notice")][contains(., "hello from the microphone")]`, chromedp.BySearch),
		chromedp.WaitVisible(`//div[contains(@class,"assistant")][contains(., "Hello to you too.")]`, chromedp.BySearch),
	)
	browser.Screenshot(t, ctx, "web-chat-media")
	if tr := llm.Transcriptions(); len(tr) != 1 || len(tr[0].Data) < 100 {
		t.Fatalf("transcriptions %+v", tr)
	}
	req, _ = llm.Last()
	if !strings.Contains(req.LastUserText(), `transcribed: "hello from the microphone"`) {
		t.Fatalf("the model read %q", req.LastUserText())
	}
}
