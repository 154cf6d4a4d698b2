package gateway

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"conch"
	"conch/fake"
)

func TestPairingAnUnknownSender(t *testing.T) {
	// In a bubble, so that "no second code" is checked once the gateway has
	// settled rather than after a sleep.
	synctest.Test(t, func(t *testing.T) {
		now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
		clock := func() time.Time { return now }
		e := newEnvWith(t, nil, func(o *Options) {
			o.Policies = map[conch.ChannelName]Policy{cli: PolicyPairing}
			o.Now = clock
		})
		e.start()
		ctx := context.Background()
		key := conch.ConversationKey{Channel: cli, ID: "dm-zoe"}
		say := func(text string) {
			t.Helper()
			if err := e.gw.HandleInbound(ctx, conch.Inbound{Key: key, Sender: "zoe", SenderName: "Zoe", Text: text}); err != nil {
				t.Fatal(err)
			}
		}
		if !e.gw.Admits(ctx, cli, "zoe") {
			t.Fatal("a pairing channel must let an unknown sender reach admission (to get a code)")
		}
		say("hello?")
		out := e.waitFor("the code", func(out []conch.Outbound) bool { return len(out) == 1 })
		code := strings.Fields(strings.SplitAfter(out[0].Text, "pairing code is ")[1])[0]
		code = strings.TrimSuffix(code, ".")
		if len(code) != codeLength {
			t.Fatalf("code %q from %q", code, out[0].Text)
		}
		// Within the hour: no second code, nothing to the model.
		say("hello again?")
		synctest.Wait()
		if n := len(e.ch.Sent()); n != 1 {
			t.Fatalf("%d messages sent, want only the one code", n)
		}
		if n := len(e.model.Requests()); n != 0 {
			t.Fatalf("the model was asked %d times before approval", n)
		}
		p := Pairings{Store: e.db, Now: clock}
		if _, err := p.Approve(ctx, "WRONG123"); conch.KindOf(err) != conch.KindNotFound {
			t.Fatalf("approve a wrong code: %v", err)
		}
		approved, pending, err := p.List(ctx, e.db)
		if err != nil || len(approved) != 0 || len(pending) != 1 || pending[0].Sender != "zoe" || pending[0].Name != "Zoe" {
			t.Fatalf("list before approval: %+v %+v %v", approved, pending, err)
		}
		if _, err := p.Approve(ctx, strings.ToLower(code)); err != nil {
			t.Fatal(err)
		}
		e.model.Push(fake.Text("hi Zoe"))
		say("now?")
		e.waitFor("the answer", func(out []conch.Outbound) bool { return out[len(out)-1].Text == "hi Zoe" })
		if ok, err := p.Revoke(ctx, cli, "ZOE"); !ok || err != nil {
			t.Fatalf("revoke: %v %v", ok, err)
		}
		e.idle()
		before := len(e.ch.Sent())
		say("still there?")
		e.waitFor("a new code", func(out []conch.Outbound) bool {
			return len(out) == before+1 && strings.Contains(out[before].Text, "pairing code")
		})
	})
}

func TestPairingCodeExpiresAndAllowlistChannelStaysSilent(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	e := newEnvWith(t, nil, func(o *Options) { o.Now = func() time.Time { return now } })
	e.start()
	ctx := context.Background()
	// The default policy (allowlist): an unknown sender gets nothing.
	if err := e.gw.HandleInbound(ctx, conch.Inbound{Key: conch.ConversationKey{Channel: cli, ID: "x"}, Sender: "mallory", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if e.gw.Admits(ctx, cli, "mallory") {
		t.Fatal("an allowlist channel admitted an unknown sender")
	}
	p := Pairings{Store: e.db, Now: func() time.Time { return now }}
	code, send, err := p.Request(ctx, conch.Inbound{Key: conch.ConversationKey{Channel: cli, ID: "x"}, Sender: "mallory"})
	if err != nil || !send {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	if _, err := p.Approve(ctx, code); conch.KindOf(err) != conch.KindNotFound {
		t.Fatalf("approving an expired code: %v", err)
	}
	if len(e.ch.Sent()) != 0 {
		t.Fatalf("sent %v to an unknown sender on an allowlist channel", e.ch.Sent())
	}
}

// TestSubmitBeforeRunIsQueuedByResume: a message submitted before Run
// started (a scheduler firing missed wakes at start) is answered, once.
func TestSubmitBeforeRunIsQueuedByResume(t *testing.T) {
	e := newEnv(t, nil)
	e.model.Push(fake.Text("woke up"))
	if _, err := e.gw.Submit(context.Background(), conch.Inbound{Key: conch.ConversationKey{Channel: cli, ID: "early"}, Text: "wake", Origin: conch.Origin{Kind: conch.OriginSchedule}}); err != nil {
		t.Fatal(err)
	}
	e.start()
	e.waitFor("the answer", func(out []conch.Outbound) bool { return len(out) == 1 && out[0].Text == "woke up" })
	e.idle()
	if n := len(e.model.Requests()); n != 1 {
		t.Fatalf("model asked %d times, want 1", n)
	}
}
