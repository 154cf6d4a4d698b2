package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/homeserver"
	"conch/sqlite"
)

// TestChaosMatrix is the chaos run over Matrix: the real `conch up` with a
// real homeserver (dendrite) and a real engine. A person sends N messages
// to the bot's room; conch is SIGKILLed at random moments between receiving
// a message and replying, and just after a reply went out (the window
// between sending and marking the turn done). Every message runs a bash
// tool call in the room's sandbox and is acked only with its output. It
// asserts from the room's own timeline that every message got exactly one
// reply (0 lost, 0 duplicated: a re-send after a kill is one event, even
// when the homeserver does not deduplicate its transaction id), and that
// the database passes integrity_check.
//
// The short version (10 messages, a kill every third) runs in CI; `make
// chaos` (CONCH_CHAOS=long) sends 120. CONCH_CHAOS_SEED replays a run.
func TestChaosMatrix(t *testing.T) {
	testenv.Short(t)
	eng := engine.Docker(t)
	hs := homeserver.Start(t)
	n, killEvery := 10, 3
	if os.Getenv("CONCH_CHAOS") == "long" {
		n, killEvery = 120, 5
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CONCH_CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("matrix chaos: %d messages, seed %d (CONCH_CHAOS_SEED replays)", n, seed)
	rng := mrand.New(mrand.NewPCG(seed, 2))
	var rngMu sync.Mutex
	chance := func(p float64) bool { rngMu.Lock(); defer rngMu.Unlock(); return rng.Float64() < p }
	intn := func(n int) int { rngMu.Lock(); defer rngMu.Unlock(); return rng.IntN(n) }

	botID, botToken, _ := hs.Register(t, "conch")
	aliceID, aliceToken, _ := hs.Register(t, "alice")
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := "mxchaos" + hex.EncodeToString(buf)
	api := eng.Client(t)
	t.Cleanup(func() { purgeInstance(api, instance) })

	var (
		mu          sync.Mutex
		toolRetries int
	)
	srv := fakellm.New(t, fakellm.WithoutRecording())
	srv.Handle(func(req fakellm.Request) fakellm.Reply {
		i, tries, result := chaosState(req.Messages)
		switch {
		case i < 0:
			return fakellm.Text("no message")
		case tries > 0 && strings.Contains(result, fmt.Sprintf("tool-%d ", i)):
			return fakellm.Text(fmt.Sprintf("ack msg-%d", i))
		case tries > 0:
			mu.Lock()
			toolRetries++
			mu.Unlock()
		}
		return chaosToolCall(i, tries)
	})

	dir := t.TempDir()
	env := append(testEnv(srv, fakellm.OpenAI, dir),
		"CONCH_GATEWAY_LISTEN=",
		"CONCH_MATRIX_HOMESERVER="+hs.URL,
		"CONCH_MATRIX_USER_ID="+botID,
		"CONCH_MATRIX_ACCESS_TOKEN="+botToken,
		"CONCH_MATRIX_ALLOW_FROM="+aliceID,
		"CONCH_GATEWAY_MAX_ATTEMPTS=20",
	)
	env = append(env, engineEnv(t, eng, instance)...)
	p := startConch(t, env, "up")
	p.waitStderr(t, "matrix first sync")

	alice := newMatrixUser(t, hs.URL, aliceID, aliceToken)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	room, err := alice.cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{id.UserID(botID)}})
	if err != nil {
		t.Fatal(err)
	}
	alice.waitMessage(t, ctx, room.RoomID, botID) // the greeting

	var kills int
	var latencies []time.Duration
	// Re-sends of a reply after a kill: recorded as sent, found in the room
	// after an unfinished send, or sent again (the unfinished one left none).
	var recorded, found, resent int
	tally := func(p *conchProc) {
		log := p.stderr.String()
		recorded += strings.Count(log, "message was sent before, not sending it again")
		found += strings.Count(log, "message found in the room after an unfinished send")
		resent += strings.Count(log, "left no event, sending it again")
	}
	began := time.Now()
	restart := func() {
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = p.cmd.Wait()
		tally(p)
		kills++
		p = startConch(t, env, "up")
	}
	for i := 0; i < n; i++ {
		msg := fmt.Sprintf("msg-%d", i)
		sentAt := time.Now()
		if _, err := alice.cli.SendText(ctx, room.RoomID, msg); err != nil {
			t.Fatal(err)
		}
		var killTimer <-chan time.Time
		killsHere := 0
		if i%killEvery == killEvery-1 {
			killTimer = time.After(time.Duration(50+intn(1500)) * time.Millisecond)
		}
		deadline := time.After(3 * time.Minute)
		acked := make(chan struct{})
		wctx, wcancel := context.WithCancel(ctx)
		go func() {
			for {
				b, ok := alice.nextBody(wctx, room.RoomID, botID)
				if !ok {
					return
				}
				if b == "ack "+msg {
					close(acked)
					return
				}
			}
		}()
	wait:
		for {
			select {
			case <-acked:
				break wait
			case <-killTimer:
				killTimer = nil
				restart()
				killsHere++
				if killsHere < 2 && chance(0.3) {
					killTimer = time.After(time.Duration(50+intn(800)) * time.Millisecond)
				}
			case <-deadline:
				wcancel()
				t.Fatalf("no answer to %s within 3 minutes; stderr:\n%s", msg, p.stderr)
			}
		}
		wcancel()
		latencies = append(latencies, time.Since(sentAt))
		if killTimer != nil {
			// The reply beat the kill: kill now, just after it went out.
			restart()
		}
	}
	// Let a restarted conch re-send what it would, then stop it cleanly.
	time.Sleep(2 * time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("conch up exited with %v after SIGTERM; stderr:\n%s", err, p.stderr)
	}
	elapsed := time.Since(began)
	tally(p)

	// Read as the bot: the homeserver shows the sender's own events with
	// the transaction id they were sent with.
	bot, err := mautrix.NewClient(hs.URL, id.UserID(botID), botToken)
	if err != nil {
		t.Fatal(err)
	}
	replies := roomReplies(t, ctx, bot, room.RoomID, botID)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "data", "conch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var integrity string
	if err := db.SQL().QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&integrity); err != nil {
		t.Fatal(err)
	}
	users := countTexts(t, db, "user", "msg-")
	t.Logf("the reply to msg-0 was sent with transaction ids %q", replies["ack msg-0"])
	var lost, dupReplies, sameTxn, dupStored []int
	for i := 0; i < n; i++ {
		txns := replies[fmt.Sprintf("ack msg-%d", i)]
		distinct := map[string]bool{}
		for _, x := range txns {
			distinct[x] = true
		}
		switch {
		case len(txns) == 0:
			lost = append(lost, i)
		case len(txns) > 1 && distinct[""]:
			// Without the transaction ids nothing tells a homeserver's
			// duplicate from conch's.
			dupReplies = append(dupReplies, i)
		case len(distinct) < len(txns):
			// conch sent one transaction id twice (a re-send after a kill)
			// and the homeserver made two events of it. dendrite does not
			// deduplicate then (its transaction cache is per access token,
			// in memory, and filled only after the event was created), so
			// conch must: a re-send whose record of the send in progress is
			// still there looks for the event first (channel/matrix).
			sameTxn = append(sameTxn, i)
			if len(distinct) > 1 {
				dupReplies = append(dupReplies, i)
			}
		case len(txns) > 1:
			dupReplies = append(dupReplies, i)
		}
		if users[fmt.Sprintf("msg-%d", i)] > 1 {
			dupStored = append(dupStored, i)
		}
	}
	slices.Sort(latencies)
	mu.Lock()
	fmt.Printf("matrix chaos figures: %d messages in %s (seed %d): %d SIGKILLs of conch up, %d tool calls asked again, "+
		"re-sends: %d recorded as sent, %d unfinished found in the room, %d unfinished sent again; "+
		"lost %d, duplicated replies in the room %d (+%d sent twice with one transaction id), stored twice %d; "+
		"reply latency p50 %s max %s; integrity_check %s\n",
		n, elapsed.Round(time.Millisecond), seed, kills, toolRetries, recorded, found, resent, len(lost), len(dupReplies), len(sameTxn), len(dupStored),
		latencies[len(latencies)/2].Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond), integrity)
	mu.Unlock()
	if len(lost) > 0 {
		t.Errorf("lost (no reply in the room): %v", lost)
	}
	if len(dupReplies) > 0 {
		t.Errorf("more than one reply in the room: %v", dupReplies)
	}
	if len(sameTxn) > 0 {
		t.Errorf("the replies to %v appear more than once in the room with one transaction id: a re-send after a kill "+
			"did not find the event the killed process had sent", sameTxn)
	}
	if len(dupStored) > 0 {
		t.Errorf("stored twice: %v", dupStored)
	}
	if integrity != "ok" {
		t.Errorf("PRAGMA integrity_check: %s", integrity)
	}
}

// nextBody returns the body of the next message from sender in room not
// seen before; false when ctx ends first.
func (u *matrixUser) nextBody(ctx context.Context, room id.RoomID, sender string) (string, bool) {
	for {
		u.mu.Lock()
		for i, evt := range u.msgs {
			if evt.RoomID == room && string(evt.Sender) == sender {
				u.msgs = append(u.msgs[:i:i], u.msgs[i+1:]...)
				u.mu.Unlock()
				_ = evt.Content.ParseRaw(evt.Type)
				return evt.Content.AsMessage().Body, true
			}
		}
		u.mu.Unlock()
		select {
		case <-u.note:
		case <-ctx.Done():
			return "", false
		}
	}
}

// roomReplies lists the sender's messages in the room's timeline by body,
// each as the transaction id it was sent with: read by one initial sync of
// the sender's own client (a homeserver shows a device the transaction ids
// of its own events in sync; /messages leaves them out). Edits, whose
// content replaces another event's, are left out.
func roomReplies(t *testing.T, ctx context.Context, cli *mautrix.Client, room id.RoomID, sender string) map[string][]string {
	t.Helper()
	resp, err := cli.FullSyncRequest(ctx, mautrix.ReqSync{FilterID: `{"room":{"timeline":{"limit":5000}}}`})
	if err != nil {
		t.Fatalf("read the room's timeline: %v", err)
	}
	joined, ok := resp.Rooms.Join[room]
	if !ok {
		t.Fatalf("the bot's sync has no room %s", room)
	}
	if joined.Timeline.Limited {
		t.Fatalf("the room's timeline came back cut (limited); raise the filter's limit")
	}
	counts := map[string][]string{}
	for _, evt := range joined.Timeline.Events {
		if evt.Type != event.EventMessage || string(evt.Sender) != sender {
			continue
		}
		_ = evt.Content.ParseRaw(evt.Type)
		m := evt.Content.AsMessage()
		if m.RelatesTo != nil && m.RelatesTo.Type == event.RelReplace {
			continue
		}
		counts[m.Body] = append(counts[m.Body], evt.Unsigned.TransactionID)
	}
	return counts
}
