package gateway

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"conch"
	"conch/fake"
	"conch/spool"
)

// hearingPreparer transcribes every audio file as "lights on" and counts
// its calls.
type hearingPreparer struct {
	mu    sync.Mutex
	calls int
}

func (p *hearingPreparer) Prepare(_ context.Context, _ conch.ConversationKey, as []conch.Attachment) []conch.Attachment {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	out := append([]conch.Attachment(nil), as...)
	for i := range out {
		if strings.HasPrefix(out[i].MediaType, "audio/") {
			out[i].Transcript, out[i].Prepared = "lights on", true
		}
	}
	return out
}

// A voice message is prepared when its turn starts: the person is told what
// was heard before the answer, the model reads the transcript, and what was
// prepared is kept with the turn.
func TestMediaPreparedAndHeard(t *testing.T) {
	sp, err := spool.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	prep := &hearingPreparer{}
	e := newEnvWith(t, nil, func(o *Options) { o.Attachments, o.Media = sp, prep })
	e.start()
	e.model.Push(fake.Text("done"))
	key := conch.ConversationKey{Channel: cli, ID: "voice"}
	err = e.gw.HandleInbound(context.Background(), conch.Inbound{Key: key, Sender: "alice", ExternalID: "v1",
		Attachments: []conch.Attachment{{Name: "voice.ogg", MediaType: "audio/ogg",
			Open: func(context.Context) (io.ReadCloser, error) {
				return io.NopCloser(bytes.NewReader([]byte("OggS"))), nil
			}}}})
	if err != nil {
		t.Fatal(err)
	}
	out := e.waitFor("the answer", func(out []conch.Outbound) bool { return len(out) > 0 && out[len(out)-1].Text == "done" })
	if len(out) != 2 || out[0].Kind != conch.OutboundNotice || out[0].Text != "🎤 I heard: “lights on”" || !strings.HasSuffix(out[0].ID, ".notice.media") {
		t.Fatalf("sent %+v, want the notice of what was heard, then the answer", out)
	}
	if user := e.model.Requests()[0].Messages[0].Text; !strings.Contains(user, `transcribed: "lights on"`) {
		t.Fatalf("the model read %q", user)
	}
	h, err := e.db.History(context.Background(), key)
	if err != nil || len(h) == 0 || !strings.Contains(h[0].Text, "lights on") {
		t.Fatalf("stored history %+v (%v): the transcript is not kept", h, err)
	}
	// A message without media is not prepared again and again.
	e.model.Push(fake.Text("ok"))
	if err := e.gw.HandleInbound(context.Background(), conch.Inbound{Key: key, Sender: "alice", ExternalID: "v2", Text: "thanks"}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the second answer", func(out []conch.Outbound) bool { return len(out) > 0 && out[len(out)-1].Text == "ok" })
	prep.mu.Lock()
	defer prep.mu.Unlock()
	if prep.calls != 1 {
		t.Fatalf("prepared %d times, want once", prep.calls)
	}
}
