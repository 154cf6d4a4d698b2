package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
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

// TestUpMatrixEndToEnd runs the real `conch up` binary against a real
// homeserver: invite → join + greeting, message → HTML reply, and a person
// not on the allowlist gets nothing.
func TestUpMatrixEndToEnd(t *testing.T) {
	testenv.Short(t)
	hs := homeserver.Start(t)
	botID, botToken, _ := hs.Register(t, "conch")
	aliceID, aliceToken, _ := hs.Register(t, "alice")
	malloryID, malloryToken, _ := hs.Register(t, "mallory")

	srv := fakellm.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	env := append(testEnv(srv, fakellm.OpenAI, t.TempDir()),
		"CONCH_GATEWAY_LISTEN="+addr,
		"CONCH_MATRIX_HOMESERVER="+hs.URL,
		"CONCH_MATRIX_USER_ID="+botID,
		"CONCH_MATRIX_ACCESS_TOKEN="+botToken,
		"CONCH_MATRIX_ALLOW_FROM="+aliceID,
		"CONCH_MATRIX_GREETING=Hello, I am conch.",
	)
	srv.Push(fakellm.Text("Here is **bold** news."))
	p := startConch(t, env, "up")
	// An invite that arrives before the first sync is a catch-up join
	// (no greeting): invite once conch has synced.
	p.waitStderr(t, "matrix first sync")

	alice := newMatrixUser(t, hs.URL, aliceID, aliceToken)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	room, err := alice.cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{id.UserID(botID)}})
	if err != nil {
		t.Fatal(err)
	}
	greeting := alice.waitMessage(t, ctx, room.RoomID, botID)
	if greeting.Body != "Hello, I am conch." {
		t.Fatalf("greeting %q; stderr:\n%s", greeting.Body, p.stderr)
	}
	if _, err := alice.cli.SendText(ctx, room.RoomID, "what's new?"); err != nil {
		t.Fatal(err)
	}
	reply := alice.waitMessage(t, ctx, room.RoomID, botID)
	if reply.Body != "Here is **bold** news." || !strings.Contains(reply.FormattedBody, "<strong>bold</strong>") || reply.Format != event.FormatHTML {
		t.Fatalf("reply %+v", reply)
	}

	// Mallory joins the same room (a group now) and is not on the allowlist.
	mallory := newMatrixUser(t, hs.URL, malloryID, malloryToken)
	if _, err := alice.cli.InviteUser(ctx, room.RoomID, &mautrix.ReqInviteUser{UserID: id.UserID(malloryID)}); err != nil {
		t.Fatal(err)
	}
	if _, err := mallory.cli.JoinRoomByID(ctx, room.RoomID); err != nil {
		t.Fatal(err)
	}
	if _, err := mallory.cli.SendText(ctx, room.RoomID, "answer me"); err != nil {
		t.Fatal(err)
	}
	// Alice's next message is answered; nothing was answered to Mallory in between.
	srv.Push(fakellm.Text("Only for Alice."))
	if _, err := alice.cli.SendText(ctx, room.RoomID, "and now?"); err != nil {
		t.Fatal(err)
	}
	if got := alice.waitMessage(t, ctx, room.RoomID, botID); got.Body != "Only for Alice." {
		t.Fatalf("reply %q, want the answer to Alice (Mallory must get nothing)", got.Body)
	}
	if n := srv.Count(); n != 2 {
		t.Fatalf("the model was asked %d times, want 2 (Mallory's message must not reach it)", n)
	}
}

// matrixUser is a person's client that collects the messages it sees.
type matrixUser struct {
	cli  *mautrix.Client
	mu   sync.Mutex
	msgs []*event.Event
	note chan struct{}
}

func newMatrixUser(t *testing.T, hsURL, userID, token string) *matrixUser {
	t.Helper()
	cli, err := mautrix.NewClient(hsURL, id.UserID(userID), token)
	if err != nil {
		t.Fatal(err)
	}
	u := &matrixUser{cli: cli, note: make(chan struct{}, 1)}
	syncer := cli.Syncer.(*mautrix.DefaultSyncer)
	syncer.OnEventType(event.EventMessage, func(_ context.Context, evt *event.Event) {
		u.mu.Lock()
		u.msgs = append(u.msgs, evt)
		u.mu.Unlock()
		select {
		case u.note <- struct{}{}:
		default:
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = cli.SyncWithContext(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return u
}

// waitMessage returns the next message from sender in room not seen before.
func (u *matrixUser) waitMessage(t *testing.T, ctx context.Context, room id.RoomID, sender string) *event.MessageEventContent {
	t.Helper()
	for {
		u.mu.Lock()
		for i, evt := range u.msgs {
			if evt.RoomID == room && string(evt.Sender) == sender {
				u.msgs = append(u.msgs[:i:i], u.msgs[i+1:]...)
				u.mu.Unlock()
				_ = evt.Content.ParseRaw(evt.Type)
				return evt.Content.AsMessage()
			}
		}
		u.mu.Unlock()
		select {
		case <-u.note:
		case <-ctx.Done():
			t.Fatalf("no message from %s in %s", sender, room)
		}
	}
}

// TestUpMatrixRoomSandbox: the room's first message runs a tool in the room's
// own container; kicking the bot removes that container.
func TestUpMatrixRoomSandbox(t *testing.T) {
	testenv.Short(t)
	e := engine.Docker(t)
	hs := homeserver.Start(t)
	botID, botToken, _ := hs.Register(t, "conch")
	aliceID, aliceToken, _ := hs.Register(t, "alice")
	srv := fakellm.New(t)
	buf := make([]byte, 4)
	rand.Read(buf)
	instance := "mx" + hex.EncodeToString(buf)
	env := append(testEnv(srv, fakellm.OpenAI, t.TempDir()),
		"CONCH_GATEWAY_LISTEN=",
		"CONCH_MATRIX_HOMESERVER="+hs.URL,
		"CONCH_MATRIX_USER_ID="+botID,
		"CONCH_MATRIX_ACCESS_TOKEN="+botToken,
		"CONCH_MATRIX_ALLOW_FROM="+aliceID,
	)
	env = append(env, engineEnv(t, e, instance)...)
	api := e.Client(t)
	containers := instanceContainers(t, api, instance)

	p := startConch(t, env, "up")
	p.waitStderr(t, "matrix first sync")
	alice := newMatrixUser(t, hs.URL, aliceID, aliceToken)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	room, err := alice.cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{id.UserID(botID)}})
	if err != nil {
		t.Fatal(err)
	}
	alice.waitMessage(t, ctx, room.RoomID, botID) // greeting
	if ids := containers(); len(ids) != 0 {
		t.Fatalf("a container exists before the first message: %v", ids)
	}
	srv.Push(fakellm.ToolCall("bash", `{"command":"id -u"}`), fakellm.Text("Ran it."))
	if _, err := alice.cli.SendText(ctx, room.RoomID, "who runs your commands?"); err != nil {
		t.Fatal(err)
	}
	for {
		msg := alice.waitMessage(t, ctx, room.RoomID, botID)
		if msg.Body == "Ran it." {
			break
		}
	}
	if res := lastToolResult(t, srv); !strings.Contains(res, "1000") {
		t.Fatalf("bash in the room's sandbox said %q, want uid 1000", res)
	}
	if ids := containers(); len(ids) != 1 {
		t.Fatalf("containers after the first message: %v, want one", ids)
	}
	if _, err := alice.cli.KickUser(ctx, room.RoomID, &mautrix.ReqKickUser{UserID: id.UserID(botID), Reason: "done"}); err != nil {
		t.Fatal(err)
	}
	for len(containers()) != 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("the room's container was not removed after the kick; stderr:\n%s", p.stderr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestDoctorMatrix: doctor accepts a valid Matrix login and names a refused token.
func TestDoctorMatrix(t *testing.T) {
	testenv.Short(t)
	hs := homeserver.Start(t)
	botID, botToken, _ := hs.Register(t, "conch")
	srv := fakellm.New(t)
	base := append(testEnv(srv, fakellm.OpenAI, t.TempDir()),
		"CONCH_TEST_AS_MAIN=1", "CONCH_TEST_ARGS=doctor",
		"CONCH_MATRIX_HOMESERVER="+hs.URL, "CONCH_MATRIX_USER_ID="+botID, "CONCH_MATRIX_ALLOW_FROM=@alice:localhost")
	run := func(token string) (string, error) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(base, "CONCH_MATRIX_ACCESS_TOKEN="+token)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, _ := run(botToken)
	if !strings.Contains(out, "✓ matrix login: "+botID) || !strings.Contains(out, "✓ matrix encryption") {
		t.Fatalf("doctor with a valid token:\n%s", out)
	}
	out, err := run("not-a-token")
	if err == nil || !strings.Contains(out, "✗ matrix login") || !strings.Contains(out, "matrix.access_token") {
		t.Fatalf("doctor with a bad token (err %v):\n%s", err, out)
	}
}
