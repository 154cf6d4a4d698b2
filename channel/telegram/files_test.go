package telegram

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"testing"

	"conch"
	tgfake "conch/internal/testenv/telegram"
)

func testPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, x%h, color.RGBA{R: 200, A: 255})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func fileOf(name, mt string, data []byte) conch.Attachment {
	return conch.Attachment{Name: name, MediaType: mt, Size: int64(len(data)),
		Open: func(context.Context) (rcloser, error) { return nopCloser(data), nil }}
}

// TestSendPicturesAndFiles: one picture goes as a photo, several as an
// album (one media group), other files and pictures Telegram would
// recompress or refuse as documents; the fake Bot API decodes each photo
// as Telegram does.
func TestSendPicturesAndFiles(t *testing.T) {
	srv := tgfake.Start(t)
	ch := newChannel(t, srv, newCursors())
	run(t, ch, newHandler())
	srv.SendText(alice, tgfake.PrivateChat(alice), "charts please")
	chart := testPNG(t, 64, 48)
	ctx := context.Background()

	err := ch.SendAttachments(ctx, conch.Outbound{Key: key(alice.ID), Kind: conch.OutboundReply, Text: "Your chart.",
		Attachments: []conch.Attachment{fileOf("chart.png", "image/png", chart)}})
	if err != nil {
		t.Fatal(err)
	}
	sent := sentBy(srv, alice.ID, "sendPhoto")
	if len(sent) != 1 || !bytes.Equal(sent[0].Photo.Data, chart) || sent[0].Silent {
		t.Fatalf("photo: %+v", sent)
	}
	m, ok := srv.Message(alice.ID, sent[0].MessageID)
	if !ok || len(m.Photo) != 1 || m.Photo[0].Width != 64 || m.Photo[0].Height != 48 {
		t.Fatalf("stored photo message %+v", m)
	}

	third := testPNG(t, 20, 10)
	three := []conch.Attachment{fileOf("a.png", "image/png", chart), fileOf("b.png", "image/png", testPNG(t, 10, 10)),
		fileOf("c.png", "image/png", third), fileOf("notes.txt", "text/plain", []byte("notes")),
		fileOf("anim.gif", "image/gif", []byte("GIF89a"))}
	if err := ch.SendAttachments(ctx, conch.Outbound{Key: key(alice.ID), Kind: conch.OutboundReply, Attachments: three}); err != nil {
		t.Fatal(err)
	}
	album := sentBy(srv, alice.ID, "sendMediaGroup")
	if len(album) != 3 || album[0].MediaGroupID == "" || album[1].MediaGroupID != album[0].MediaGroupID || !bytes.Equal(album[2].Photo.Data, third) {
		t.Fatalf("album: %+v", album)
	}
	docs := sentBy(srv, alice.ID, "sendDocument")
	if len(docs) != 2 || docs[0].Document.Name != "notes.txt" || docs[1].Document.Name != "anim.gif" {
		t.Fatalf("documents: %+v", docs)
	}
	if n := len(sentBy(srv, alice.ID, "sendMessage")); n != 1 {
		t.Fatalf("%d text messages, want 1 (the second answer had no text)", n)
	}

	// Eleven photos: an album of ten and one photo.
	var many []conch.Attachment
	for range 11 {
		many = append(many, fileOf("p.png", "image/png", chart))
	}
	if err := ch.SendAttachments(ctx, conch.Outbound{Key: key(alice.ID), Kind: conch.OutboundReply, Attachments: many}); err != nil {
		t.Fatal(err)
	}
	if a, p := len(sentBy(srv, alice.ID, "sendMediaGroup")), len(sentBy(srv, alice.ID, "sendPhoto")); a != 13 || p != 2 {
		t.Fatalf("eleven photos: %d in albums, %d single; want 13 (3+10) and 2 (1+1)", a, p)
	}
}

// TestFakeRefusesBrokenPhoto: the Bot API fake answers a photo that is not
// a picture as Telegram does, and the channel reports it.
func TestFakeRefusesBrokenPhoto(t *testing.T) {
	srv := tgfake.Start(t)
	ch := newChannel(t, srv, newCursors())
	run(t, ch, newHandler())
	srv.SendText(alice, tgfake.PrivateChat(alice), "hi")
	err := ch.SendAttachments(context.Background(), conch.Outbound{Key: key(alice.ID), Kind: conch.OutboundReply,
		Attachments: []conch.Attachment{fileOf("x.png", "image/png", []byte("\x89PNG\r\n\x1a\ntruncated"))}})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("IMAGE_PROCESS_FAILED")) {
		t.Fatalf("truncated PNG: %v, want IMAGE_PROCESS_FAILED", err)
	}
}

func sentBy(srv *tgfake.Server, chat int64, method string) []tgfake.Sent {
	var out []tgfake.Sent
	for _, s := range srv.Sent(chat) {
		if s.Method == method {
			out = append(out, s)
		}
	}
	return out
}
