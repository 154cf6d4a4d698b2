//go:build goolm

package matrix

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"io"
	"testing"

	"maunium.net/go/mautrix/event"

	"conch"
)

func chartBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for x := range 40 {
		img.Set(x, x%30, color.RGBA{G: 200, A: 255})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func memAttachment(name, mt string, data []byte) conch.Attachment {
	return conch.Attachment{Name: name, MediaType: mt, Size: int64(len(data)),
		Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}
}

// TestSendFiles: through the real homeserver, a picture arrives as m.image
// (with its size and dimensions) and another file as m.file; in an
// encrypted room both are encrypted before upload (the homeserver keeps
// ciphertext, the key travels in the encrypted event only) and the peer
// decrypts them to the bytes sent. Sending the same answer again (a
// re-delivery after a crash) adds no event.
func TestSendFiles(t *testing.T) {
	e := newEnv(t)
	alice := e.newPeer("alice", true)
	b := e.startBot(e.options(string(alice.id())))
	ctx := context.Background()
	chart := chartBytes(t)
	csv := []byte("day,value\n1,3\n")
	for _, encrypted := range []bool{false, true} {
		room := alice.createRoom(encrypted, e.botID)
		alice.waitMessage(room, e.botID) // the greeting
		alice.send(room, "chart please")
		in := b.rec.nextWithText(t, "chart please")
		out := conch.Outbound{Key: in.Key, Kind: conch.OutboundReply, Text: "Here it is.", ID: "conch.test.t1.reply." + string(room),
			Attachments: []conch.Attachment{memAttachment("chart.png", "image/png", chart), memAttachment("data.csv", "text/csv", csv)}}
		if err := b.SendAttachments(ctx, out); err != nil {
			t.Fatal(err)
		}
		if got := alice.waitMessage(room, e.botID).Content.AsMessage().Body; got != "Here it is." {
			t.Fatalf("text %q", got)
		}
		for _, want := range []struct {
			msgType event.MessageType
			mt      string
			data    []byte
		}{{event.MsgImage, "image/png", chart}, {event.MsgFile, "text/csv", csv}} {
			m := alice.waitMessage(room, e.botID).Content.AsMessage()
			if m.MsgType != want.msgType || m.Info == nil || m.Info.MimeType != want.mt || m.Info.Size != len(want.data) {
				t.Fatalf("encrypted %v: file event %+v, want %s of %s", encrypted, m, want.msgType, want.mt)
			}
			if want.msgType == event.MsgImage && (m.Info.Width != 40 || m.Info.Height != 30) {
				t.Fatalf("image dimensions %dx%d, want 40x30", m.Info.Width, m.Info.Height)
			}
			var got []byte
			if encrypted {
				if m.File == nil || m.URL != "" {
					t.Fatalf("encrypted room: file %+v url %q, want only the encrypted file", m.File, m.URL)
				}
				mxc, _ := m.File.URL.Parse()
				stored, err := alice.cli.DownloadBytes(ctx, mxc)
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Equal(stored, want.data) {
					t.Fatal("the homeserver keeps the file in plaintext")
				}
				got = append([]byte(nil), stored...)
				if err := m.File.DecryptInPlace(got); err != nil {
					t.Fatal(err)
				}
			} else {
				mxc, _ := m.URL.Parse()
				var err error
				if got, err = alice.cli.DownloadBytes(ctx, mxc); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, want.data) {
				t.Fatalf("encrypted %v: %s arrived as %d bytes, want %d", encrypted, want.mt, len(got), len(want.data))
			}
		}
		if encrypted {
			for _, evt := range alice.botEvents(room, e.botID) {
				if evt.Type != event.EventEncrypted {
					t.Fatalf("bot event %s reached the server as %s", evt.ID, evt.Type.Type)
				}
			}
		}
		before := len(alice.botEvents(room, e.botID))
		if err := b.SendAttachments(ctx, out); err != nil {
			t.Fatal(err)
		}
		if after := len(alice.botEvents(room, e.botID)); after != before {
			t.Fatalf("the same answer sent again made %d new events, want none", after-before)
		}
	}
}
