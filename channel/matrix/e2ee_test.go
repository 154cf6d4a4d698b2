//go:build !noe2ee

package matrix

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch"
)

// TestEncryptedRoundTrip: an encrypted room works like a plain one, in both
// directions, nothing reaches the server in plaintext, and the crypto store
// survives a restart.
func TestEncryptedRoundTrip(t *testing.T) {
	e := newEnv(t)
	alice := e.newPeer("alice", true)
	opts := e.options(string(alice.id()))
	b := e.startBot(opts)
	ctx := context.Background()

	room := alice.createRoom(true, e.botID)
	greeting := alice.waitMessage(room, e.botID)
	if got := greeting.Content.AsMessage().Body; got != DefaultGreeting {
		t.Fatalf("decrypted greeting: got %q, want %q", got, DefaultGreeting)
	}
	if greeting.Mautrix.EventSource&event.SourceDecrypted == 0 {
		t.Fatal("greeting: want it decrypted by alice, it arrived in plaintext")
	}

	sent := alice.send(room, "the secret plan")
	in := b.rec.nextWithText(t, "the secret plan")
	if in.ExternalID != sent.String() || in.Key != keyOf(room) {
		t.Fatalf("inbound: got %+v, want event %s in %s", in, sent, room)
	}

	if err := b.Send(ctx, conch.Outbound{Key: in.Key, Kind: conch.OutboundReply, Text: "**understood**"}); err != nil {
		t.Fatal(err)
	}
	reply := alice.waitMessage(room, e.botID).Content.AsMessage()
	if reply.Body != "**understood**" || !strings.Contains(reply.FormattedBody, "<strong>understood</strong>") {
		t.Fatalf("decrypted reply: got body %q html %q", reply.Body, reply.FormattedBody)
	}

	ref, err := b.SendEditable(ctx, conch.Outbound{Key: in.Key, Kind: conch.OutboundProgress, Text: "working"})
	if err != nil {
		t.Fatal(err)
	}
	alice.waitMessage(room, e.botID)
	if err := b.Edit(ctx, ref, "done"); err != nil {
		t.Fatal(err)
	}
	edit := alice.waitMessage(room, e.botID).Content.AsMessage()
	if edit.RelatesTo == nil || edit.RelatesTo.GetReplaceID().String() != ref.ID || edit.NewContent == nil || edit.NewContent.Body != "done" {
		t.Fatalf("decrypted edit: got relation %+v new content %+v, want a replace of %s with \"done\"", edit.RelatesTo, edit.NewContent, ref.ID)
	}

	for _, evt := range alice.botEvents(room, e.botID) {
		if evt.Type != event.EventEncrypted {
			t.Fatalf("bot event %s reached the server as %s, want only m.room.encrypted", evt.ID, evt.Type.Type)
		}
	}

	// Restart: same device, keys from the SQLite store, conversation goes on.
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	b2 := e.startBot(opts)
	alice.send(room, "still there?")
	in2 := b2.rec.nextWithText(t, "still there?")
	if err := b2.Send(ctx, conch.Outbound{Key: in2.Key, Kind: conch.OutboundReply, Text: "yes"}); err != nil {
		t.Fatal(err)
	}
	if got := alice.waitMessage(room, e.botID).Content.AsMessage().Body; got != "yes" {
		t.Fatalf("reply after restart: got %q, want %q", got, "yes")
	}
	var crypto int
	if err := e.db.QueryRow(`SELECT count(*) FROM crypto_olm_session`).Scan(&crypto); err != nil {
		t.Fatalf("crypto tables in conch's database: %v", err)
	}
	if crypto == 0 {
		t.Fatal("crypto_olm_session is empty: want the Olm sessions stored in SQLite")
	}
}

// TestUndecryptableReported: a message whose room key never arrives is
// requested, then reported by Status, and nothing is delivered for it.
func TestUndecryptableReported(t *testing.T) {
	e := newEnv(t)
	alice := e.newPeer("alice", true)
	opts := e.options(string(alice.id()))
	opts.keyWaitInitial, opts.keyWaitExtended = 100*time.Millisecond, 300*time.Millisecond
	b := e.startBot(opts)
	ctx := context.Background()

	room := alice.createRoom(true, e.botID)
	alice.waitMessage(room, e.botID)
	bogus := &event.EncryptedEventContent{
		Algorithm:        id.AlgorithmMegolmV1,
		SenderKey:        "dGhpcyBpcyBub3QgYSByZWFsIGtleSBhdCBhbGwgISEhIQ",
		SessionID:        "no-such-session",
		MegolmCiphertext: []byte("AwgAEhAAAAAAAAAAAAAAAAAAAAAA"),
	}
	if _, err := alice.cli.SendMessageEvent(ctx, room, event.EventEncrypted, bogus); err != nil {
		t.Fatal(err)
	}
	key := keyOf(room)
	deadline := time.Now().Add(waitLimit)
	for len(b.Status(ctx, key)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("status: the undecryptable message was never reported")
		}
		time.Sleep(20 * time.Millisecond) // Status has no change notification
	}
	st := b.Status(ctx, key)
	if !strings.Contains(st[0], "could not be decrypted") {
		t.Fatalf("status: got %q, want a line about undecryptable messages", st)
	}
	if all := b.Status(ctx, conch.ConversationKey{}); len(all) == 0 || !strings.Contains(all[len(all)-1], string(room)) {
		t.Fatalf("status for doctor: got %q, want the room listed", all)
	}
	alice.send(room, "readable")
	if in := b.rec.next(t); in.Text != "readable" {
		t.Fatalf("first delivered: got %q, want \"readable\" (nothing for the undecryptable one)", in.Text)
	}
	if st := b.Status(ctx, key); len(st) != 0 {
		t.Fatalf("status after a message decrypted again: got %q, want nothing", st)
	}
}

// TestLateKeyAcrossRestart: a message whose room key is withheld waits as
// pending in the store; after a restart the bot asks for the key again and,
// once the sender shares it, the message is delivered.
func TestLateKeyAcrossRestart(t *testing.T) {
	e := newEnv(t)
	alice := e.newPeer("alice", true)
	var share atomic.Bool
	alice.crypto.mach.AllowKeyShare = func(context.Context, *id.Device, event.RequestedKeyInfo) *crypto.KeyShareRejection {
		if share.Load() {
			return nil
		}
		return &crypto.KeyShareRejectNoResponse
	}
	opts := e.options(string(alice.id()))
	opts.keyWaitInitial, opts.keyWaitExtended = 100*time.Millisecond, 300*time.Millisecond
	b1 := e.startBot(opts)
	ctx := context.Background()

	room := alice.createRoom(true, e.botID)
	alice.waitMessage(room, e.botID)
	// A group session shared with alice's own devices only: the bot cannot
	// decrypt what follows until alice answers its key request.
	if err := alice.crypto.mach.ShareGroupSession(ctx, room, []id.UserID{alice.id()}); err != nil {
		t.Fatal(err)
	}
	sent := alice.send(room, "sent before the key")
	key := keyOf(room)
	deadline := time.Now().Add(waitLimit)
	for len(b1.Status(ctx, key)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("status: the message without a key was never reported")
		}
		time.Sleep(20 * time.Millisecond) // Status has no change notification
	}
	var pending int
	if err := e.db.QueryRow(`SELECT count(*) FROM conch_matrix_pending WHERE event_id = ?`, sent.String()).Scan(&pending); err != nil || pending != 1 {
		t.Fatalf("pending rows for the event: got %d (%v), want 1", pending, err)
	}
	if err := b1.stop(); err != nil {
		t.Fatal(err)
	}
	if got := b1.rec.all(); len(got) != 0 {
		t.Fatalf("delivered without a key: %+v", got)
	}

	share.Store(true)
	b2 := e.startBot(opts)
	in := b2.rec.nextWithText(t, "sent before the key")
	if in.ExternalID != sent.String() {
		t.Fatalf("external id: got %s, want %s", in.ExternalID, sent)
	}
	if st := b2.Status(ctx, key); len(st) != 0 {
		t.Fatalf("status after delivery: got %q, want nothing", st)
	}
	// Run waits for its background work, so the row is gone once it returned.
	if err := b2.stop(); err != nil {
		t.Fatal(err)
	}
	if err := e.db.QueryRow(`SELECT count(*) FROM conch_matrix_pending`).Scan(&pending); err != nil || pending != 0 {
		t.Fatalf("pending rows after delivery: got %d (%v), want 0", pending, err)
	}
}

// TestEncryptedSendExactlyOnceAfterCrash: as TestSendExactlyOnceAfterCrash
// in an encrypted room, where the earlier event is found by decrypting the
// bot's own events.
func TestEncryptedSendExactlyOnceAfterCrash(t *testing.T) {
	testSendExactlyOnce(t, true)
}
