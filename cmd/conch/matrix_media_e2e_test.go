package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch/internal/testenv"
	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/homeserver"
	"conch/media/mediatest"
)

// TestUpMatrixMedia: against the real homeserver, a picture (m.image) and
// a voice message (m.audio) uploaded to its media repository reach the
// model as an image part and a transcript; the room is told what was heard.
func TestUpMatrixMedia(t *testing.T) {
	testenv.Short(t)
	hs := homeserver.Start(t)
	botID, botToken, _ := hs.Register(t, "conch")
	aliceID, aliceToken, _ := hs.Register(t, "alice")
	llm := fakellm.New(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config", "conch")
	if err := os.MkdirAll(cfg, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "conch.toml"), []byte("[media]\nvision = { \"test-model\" = true }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(testEnv(llm, fakellm.OpenAI, dir),
		"CONCH_GATEWAY_LISTEN="+freeAddr(t),
		"CONCH_MATRIX_HOMESERVER="+hs.URL,
		"CONCH_MATRIX_USER_ID="+botID,
		"CONCH_MATRIX_ACCESS_TOKEN="+botToken,
		"CONCH_MATRIX_ALLOW_FROM="+aliceID,
		"CONCH_VOICE_PROVIDER=openai", "CONCH_VOICE_BASE_URL="+llm.BaseURL(fakellm.OpenAI),
	)
	p := startConch(t, env, "up")
	p.waitStderr(t, "matrix first sync")
	alice := newMatrixUser(t, hs.URL, aliceID, aliceToken)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	room, err := alice.cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{id.UserID(botID)}})
	if err != nil {
		t.Fatal(err)
	}
	// The bot joins and greets.
	alice.waitMessage(t, ctx, room.RoomID, botID)
	send := func(msgType event.MessageType, name, mime string, data []byte) {
		t.Helper()
		up, err := alice.cli.UploadBytes(ctx, data, mime)
		if err != nil {
			t.Fatal(err)
		}
		_, err = alice.cli.SendMessageEvent(ctx, room.RoomID, event.EventMessage, &event.MessageEventContent{
			MsgType: msgType, Body: name, FileName: name, URL: up.ContentURI.CUString(),
			Info: &event.FileInfo{MimeType: mime, Size: len(data)},
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	llm.Push(fakellm.Text("A picture, upright."))
	send(event.MsgImage, "photo.jpg", "image/jpeg", mediatest.Photo(200, 80, 6))
	if got := alice.waitMessage(t, ctx, room.RoomID, botID); got.Body != "A picture, upright." {
		t.Fatalf("reply %q; stderr:\n%s", got.Body, p.stderr)
	}
	req, _ := llm.Last()
	if ims := req.Images(); len(ims) != 1 || ims[0].Width != 80 || ims[0].Height != 200 || bytes.Contains(ims[0].Data, []byte(mediatest.Location)) {
		t.Fatalf("the model got pictures %+v", ims)
	}

	llm.Push(fakellm.Text("Noted."))
	send(event.MsgAudio, "voice.ogg", "audio/ogg", mediatest.Voice("buy milk"))
	heard := alice.waitMessage(t, ctx, room.RoomID, botID)
	if !strings.Contains(heard.Body, "I heard: “buy milk”") || heard.MsgType != event.MsgNotice {
		t.Fatalf("notice %q (%s)", heard.Body, heard.MsgType)
	}
	if got := alice.waitMessage(t, ctx, room.RoomID, botID); got.Body != "Noted." {
		t.Fatalf("reply %q", got.Body)
	}
	req, _ = llm.Last()
	if !strings.Contains(req.LastUserText(), `transcribed: "buy milk"`) {
		t.Fatalf("the model read %q", req.LastUserText())
	}
}
