package web

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// A message's files arrive whole with it, or the message is refused whole
// with words for the person: damaged base64, too many, too large.
func TestChatFiles(t *testing.T) {
	ts := newTestServer(t)
	c := ts.client()
	cv := ts.newConversation(c)
	ctx := context.Background()
	conn := ts.chat(ctx, c, cv.ID, 0)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	many := make([]clientFile, maxFiles+1)
	for i := range many {
		many[i] = clientFile{Name: "f.txt", Data: b64("x")}
	}
	for _, c := range []struct {
		f    clientFrame
		want string
	}{
		{clientFrame{Type: "send", ID: "bad", Files: []clientFile{{Name: "a.png", Type: "image/png", Data: "%%%"}}}, "arrived damaged"},
		{clientFrame{Type: "send", ID: "many", Files: many}, "at most 10 files"},
		{clientFrame{Type: "send", ID: "big", Files: []clientFile{{Name: "big.bin", Data: b64(strings.Repeat("x", ts.ch.opts.MaxFileBytes+1))}}}, "larger than 1 MB"},
	} {
		b, _ := json.Marshal(c.f)
		if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
		if got := readWire(ctx, t, conn); got.Type != "error" || !strings.Contains(got.Error, c.want) {
			t.Fatalf("%s: got %+v, want an error with %q", c.f.ID, got, c.want)
		}
	}
	if n := len(ts.gw.inbounds()); n != 0 {
		t.Fatalf("%d stored after refusals, want 0", n)
	}
	// A voice recording without text, and a picture with its caption.
	b, _ := json.Marshal(clientFrame{Type: "send", ID: "ok1", Files: []clientFile{
		{Name: "../../voice.webm", Type: "audio/webm", Data: b64("\x1a\x45\xdf\xa3 webm")},
		{Name: "shot.png", Data: b64("\x89PNG\r\n\x1a\n....")},
	}})
	if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	until(ctx, t, conn, func(f wireFrame) bool { return f.Type == "ack" && f.ID == "ok1" })
	in := ts.gw.inbounds()
	if len(in) != 1 || len(in[0].Attachments) != 2 {
		t.Fatalf("stored %+v", in)
	}
	a, p := in[0].Attachments[0], in[0].Attachments[1]
	if a.Name != "voice.webm" || a.MediaType != "audio/webm" || p.MediaType != "image/png" || p.Size != 12 {
		t.Fatalf("attachments %+v %+v", a, p)
	}
	r, err := p.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(r)
	if string(data) != "\x89PNG\r\n\x1a\n...." {
		t.Fatalf("content %q", data)
	}
}
