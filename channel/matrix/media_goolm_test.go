//go:build goolm

package matrix

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"maunium.net/go/mautrix/crypto/attachment"
	"maunium.net/go/mautrix/event"
)

// TestEncryptedPictureIn: in an encrypted room a picture is uploaded
// encrypted (the homeserver holds only ciphertext); the attachment the bot
// hands to the gateway reads the decrypted picture, and a wrong key is an
// error, never the ciphertext passed on.
func TestEncryptedPictureIn(t *testing.T) {
	e := newEnv(t)
	alice := e.newPeer("alice", true)
	b := e.startBot(e.options(string(alice.id())))
	ctx := context.Background()
	room := alice.createRoom(true, e.botID)
	alice.waitMessage(room, e.botID) // greeting

	plain := []byte("\x89PNG\r\n\x1a\n a picture only alice and conch may see")
	upload := func(ef *attachment.EncryptedFile) *event.EncryptedFileInfo {
		cipher := bytes.Clone(plain)
		ef.EncryptInPlace(cipher)
		if bytes.Contains(cipher, []byte("only alice")) {
			t.Fatal("the upload is not encrypted")
		}
		up, err := alice.cli.UploadBytes(ctx, cipher, "application/octet-stream")
		if err != nil {
			t.Fatal(err)
		}
		return &event.EncryptedFileInfo{EncryptedFile: *ef, URL: up.ContentURI.CUString()}
	}
	file := upload(attachment.NewEncryptedFile())
	alice.sendContent(room, &event.MessageEventContent{MsgType: event.MsgImage, Body: "secret.png", FileName: "secret.png",
		File: file, Info: &event.FileInfo{MimeType: "image/png", Size: len(plain)}})
	in := b.rec.nextWithText(t, "[picture]")
	if len(in.Attachments) != 1 || in.Attachments[0].Name != "secret.png" || in.Attachments[0].MediaType != "image/png" {
		t.Fatalf("attachments %+v", in.Attachments)
	}
	r, err := in.Attachments[0].Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	if !bytes.Equal(got, plain) {
		t.Fatalf("read %q, want the decrypted picture", got)
	}

	// The event carries another file's key: reading fails clearly.
	wrong := upload(attachment.NewEncryptedFile())
	other := attachment.NewEncryptedFile()
	other.EncryptInPlace([]byte("another file"))
	wrong.EncryptedFile = *other
	alice.sendContent(room, &event.MessageEventContent{MsgType: event.MsgImage, Body: "look", FileName: "other.png",
		File: wrong, Info: &event.FileInfo{MimeType: "image/png"}})
	in = b.rec.nextWithText(t, "look")
	if _, err := in.Attachments[0].Open(ctx); err == nil || !strings.Contains(err.Error(), "cannot be decrypted") {
		t.Fatalf("wrong key: err = %v, want it to say the file cannot be decrypted", err)
	}
}
