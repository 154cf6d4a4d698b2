package email

import (
	"bytes"
	"context"
	"io"
	"mime"
	"strings"
	"testing"

	"github.com/emersion/go-message"

	"conch"
)

func memFile(name, mt string, data []byte) conch.Attachment {
	return conch.Attachment{Name: name, MediaType: mt, Size: int64(len(data)),
		Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}
}

// TestReplyWithPictures: pictures go inline (multipart/related, shown in
// the HTML by their Content-ID), other files as attachments, and a reader
// gets each file's bytes back.
func TestReplyWithPictures(t *testing.T) {
	c := newTestChannel(t, nil)
	png := []byte("\x89PNG\r\n\x1a\nfake picture bytes")
	out := conch.Outbound{Key: conch.ConversationKey{Channel: conch.ChannelEmail, ID: "alice@example.org"}, Kind: conch.OutboundReply,
		Text: "Here is **the chart**.", InReplyTo: "<a1@example.org>", Thread: conch.Thread{Subject: "Chart"},
		Attachments: []conch.Attachment{memFile("chart.png", "image/png", png), memFile("data.csv", "text/csv", []byte("a,b\n1,2\n"))}}
	raw, err := c.composeReply(context.Background(), out, "alice@example.org", "conch.abc@example.test")
	if err != nil {
		t.Fatal(err)
	}
	m, err := message.Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var html, cid string
	files := map[string][]byte{}
	var walk func(e *message.Entity, depth int)
	walk = func(e *message.Entity, depth int) {
		mt, params, _ := e.Header.ContentType()
		types = append(types, strings.Repeat(" ", depth)+mt)
		if mr := e.MultipartReader(); mr != nil {
			for {
				p, err := mr.NextPart()
				if err != nil {
					break
				}
				walk(p, depth+1)
			}
			return
		}
		b, _ := io.ReadAll(e.Body)
		disp, dp, _ := e.Header.ContentDisposition()
		switch {
		case mt == "text/html":
			html = string(b)
		case disp != "":
			files[disp+":"+dp["filename"]+":"+params["name"]] = b
			if mt == "image/png" {
				cid = strings.Trim(e.Header.Get("Content-Id"), "<>")
			}
		}
	}
	walk(m, 0)
	want := []string{"multipart/mixed", " multipart/related", "  multipart/alternative", "   text/plain", "   text/html", "  image/png", " text/csv"}
	if strings.Join(types, "|") != strings.Join(want, "|") {
		t.Fatalf("structure:\n%s\nwant:\n%s", strings.Join(types, "\n"), strings.Join(want, "\n"))
	}
	if !bytes.Equal(files["inline:chart.png:chart.png"], png) || string(files["attachment:data.csv:data.csv"]) != "a,b\n1,2\n" {
		t.Fatalf("files %q", files)
	}
	if cid == "" || !strings.Contains(html, `src="cid:`+cid+`"`) || !strings.Contains(html, "<strong>the chart</strong>") {
		t.Fatalf("the HTML does not show the picture %q:\n%s", cid, html)
	}
	if _, _, err := mime.ParseMediaType(m.Header.Get("Content-Type")); err != nil {
		t.Fatal(err)
	}
}
