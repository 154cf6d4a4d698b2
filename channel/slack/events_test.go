package slack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"conch/internal/backoff"
	slackfake "conch/internal/testenv/slack"
)

// TestEventsAPI: Mode events takes Slack's signed HTTPS requests: the URL
// verification challenge is answered; an event is taken with 200 only
// after the gateway took it (a failure answers 500 and Slack's retry is
// taken); a bad signature and a request outside the five-minute window
// are refused.
func TestEventsAPI(t *testing.T) {
	srv := slackfake.Start(t)
	alice := srv.Person("U0ALICE", "alice")
	dm := srv.DM(alice)
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	ch, err := New(Options{Mode: ModeEvents, SigningSecret: secret, BotToken: srv.BotToken, APIURL: srv.APIURL(),
		Cursors: newCursors(), Backoff: backoff.Policy{Base: 10 * time.Millisecond, Cap: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	ch.Register(mux)
	hs := httptest.NewServer(mux)
	defer hs.Close()
	h := newHandler()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ch.Run(ctx, h) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	<-ch.Ready()
	url := hs.URL + EventsPath
	if err := srv.VerifyURL(url, secret); err != nil {
		t.Fatal(err)
	}

	h.mu.Lock()
	h.fail = 1
	h.mu.Unlock()
	srv.DeliverEvents(url, secret)
	srv.Post(alice, dm, "over https")
	in := h.waitInbound(t, 1)
	if in[0].Text != "over https" || in[0].Sender != "U0ALICE" {
		t.Fatalf("inbound %+v", in)
	}
	waitFor(t, srv, "the retry's 200", func() bool { return slices.Equal(srv.EventPosts(), []int{500, 200}) })

	body := []byte(`{"type":"event_callback","team_id":"T0CONCH","event":{"type":"message","channel":"` + dm +
		`","channel_type":"im","user":"U0ALICE","text":"forged","ts":"1.000001"}}`)
	for _, tc := range []struct {
		name   string
		req    *http.Request
		status int
	}{
		{"wrong secret", slackfake.SignedRequest(url, "not-the-secret", time.Now(), body), http.StatusUnauthorized},
		{"replayed after 10 min", slackfake.SignedRequest(url, secret, time.Now().Add(-10*time.Minute), body), http.StatusUnauthorized},
		{"unsigned", func() *http.Request {
			r := slackfake.SignedRequest(url, secret, time.Now(), body)
			r.Header.Del("X-Slack-Signature")
			return r
		}(), http.StatusUnauthorized},
	} {
		resp, err := http.DefaultClient.Do(tc.req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: HTTP %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
	}
	if n := len(h.inbound()); n != 1 {
		t.Fatalf("%d handed over, want 1 (nothing forged)", n)
	}
}
