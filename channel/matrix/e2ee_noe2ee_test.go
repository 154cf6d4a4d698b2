//go:build noe2ee

package matrix

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch"
	"conch/internal/testenv"
)

func TestEncryptedRoundTrip(t *testing.T) {
	testenv.Missing(t, "Matrix end-to-end encryption", "this test binary was built with -tags noe2ee")
}

// TestEncryptedRoomFailsClosed: a build without encryption refuses to send
// into an encrypted room (nothing of the conversation in plaintext), keeps
// its messages for a build that can read them, tells the room once, and
// reports it.
func TestEncryptedRoomFailsClosed(t *testing.T) {
	e := newEnv(t)
	alice := e.newPeer("alice", false)
	b := e.startBot(e.options(string(alice.id())))
	ctx := context.Background()

	room := alice.createRoom(true, e.botID)
	alice.waitJoined(room, e.botID)
	bogus := &event.EncryptedEventContent{Algorithm: id.AlgorithmMegolmV1, SenderKey: "x", SessionID: "y", MegolmCiphertext: []byte("z")}
	if _, err := alice.cli.SendMessageEvent(ctx, room, event.EventEncrypted, bogus); err != nil {
		t.Fatal(err)
	}
	key := keyOf(room)
	deadline := time.Now().Add(waitLimit)
	for len(b.Status(ctx, key)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("status: the encrypted message was never reported")
		}
		time.Sleep(20 * time.Millisecond) // Status has no change notification
	}
	err := b.Send(ctx, conch.Outbound{Key: key, Kind: conch.OutboundReply, Text: "secret"})
	if !errors.Is(err, errNoE2EE) {
		t.Fatalf("send to an encrypted room: got %v, want %v", err, errNoE2EE)
	}
	// The room is told once, in words that carry nothing of the
	// conversation; the greeting and the reply are never sent in plaintext.
	alice.waitMessage(room, e.botID)
	got := alice.botEvents(room, e.botID)
	if len(got) != 1 || got[0].Type != event.EventMessage || got[0].Content.Raw["body"] != noE2EENotice {
		t.Fatalf("bot events in the encrypted room: got %d (%v), want only the notice that encryption is unavailable", len(got), got)
	}
	// The message is kept for a build that can decrypt it.
	var n int
	if err := e.db.QueryRow(`SELECT count(*) FROM conch_matrix_pending WHERE room_id = ?`, string(room)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("pending encrypted events: %d (%v), want 1", n, err)
	}
	if !strings.Contains(e.logs.String(), "greeting") {
		t.Error("log: want the failed greeting logged")
	}
}
