package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/homeserver"
)

// TestUpSendFileMatrix: a chart drawn in a real sandbox and sent with
// send_file arrives through the real homeserver as an m.image after the
// answer, and downloads as the bytes drawn. (Encrypted rooms:
// channel/matrix TestSendFiles.)
func TestUpSendFileMatrix(t *testing.T) {
	testenv.Short(t)
	hs := homeserver.Start(t)
	botID, botToken, _ := hs.Register(t, "conch")
	aliceID, aliceToken, _ := hs.Register(t, "alice")
	llm := fakellm.New(t)
	e := engine.Docker(t)
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := "sfx" + hex.EncodeToString(buf)
	instanceContainers(t, e.Client(t), instance)
	env := append(testEnv(llm, fakellm.OpenAI, t.TempDir()),
		"CONCH_GATEWAY_LISTEN="+freeAddr(t),
		"CONCH_MATRIX_HOMESERVER="+hs.URL,
		"CONCH_MATRIX_USER_ID="+botID,
		"CONCH_MATRIX_ACCESS_TOKEN="+botToken,
		"CONCH_MATRIX_ALLOW_FROM="+aliceID,
		"CONCH_MATRIX_GREETING=Hello.",
	)
	env = append(env, engineEnv(t, e, instance)...)
	chart := chartPNG(t)
	p := startConch(t, env, "up")
	p.waitStderr(t, "matrix first sync")

	alice := newMatrixUser(t, hs.URL, aliceID, aliceToken)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	room, err := alice.cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{id.UserID(botID)}})
	if err != nil {
		t.Fatal(err)
	}
	alice.waitMessage(t, ctx, room.RoomID, botID) // the greeting
	llm.Push(fakellm.ToolCalls(drawCall(t, chart)), fakellm.ToolCalls(sendCall("out/chart.png")), fakellm.Text("Here is the chart."))
	if _, err := alice.cli.SendText(ctx, room.RoomID, "draw me a chart"); err != nil {
		t.Fatal(err)
	}
	var img *event.MessageEventContent
	for img == nil {
		m := alice.waitMessage(t, ctx, room.RoomID, botID)
		if m.MsgType == event.MsgImage {
			img = m
		}
	}
	if img.Body != "chart.png" || img.Info == nil || img.Info.MimeType != "image/png" || img.Info.Width != 120 || img.Info.Height != 80 {
		t.Fatalf("m.image %+v (info %+v)", img, img.Info)
	}
	mxc, err := img.URL.Parse()
	if err != nil {
		t.Fatal(err)
	}
	got, err := alice.cli.DownloadBytes(ctx, mxc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, chart) {
		t.Fatalf("downloaded %d bytes, want the chart's %d", len(got), len(chart))
	}
}
