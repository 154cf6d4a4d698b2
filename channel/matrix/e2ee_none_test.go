//go:build !goolm

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
	testenv.Missing(t, "Matrix end-to-end encryption", "this test binary was built without -tags goolm")
}

// TestEncryptedRoomFailsClosed: a build without encryption refuses to send
// into an encrypted room (nothing in plaintext) and reports its messages.
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
	if got := alice.botEvents(room, e.botID); len(got) != 0 {
		t.Fatalf("bot events in the encrypted room: got %d, want none (no greeting, no plaintext)", len(got))
	}
	if !strings.Contains(e.logs.String(), "greeting") {
		t.Error("log: want the failed greeting logged")
	}
}
