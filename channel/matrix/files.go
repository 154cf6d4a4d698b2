package matrix

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // dimensions of the pictures sent as m.image
	_ "image/jpeg"
	_ "image/png"
	"io"
	"strconv"

	"conch"

	"maunium.net/go/mautrix/crypto/attachment"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

var _ conch.AttachmentChannel = (*Channel)(nil)

// maxSendBytes bounds one file read for sending (the tool caps it lower,
// at what homeservers take by default).
const maxSendBytes = 100 << 20

// SendAttachments implements conch.AttachmentChannel: the text (if any),
// then each file as its own event: pictures as m.image (with their size
// and dimensions), other files as m.file. In an encrypted room the file is
// encrypted before upload (AES-CTR, the key in the encrypted event only),
// so the homeserver keeps ciphertext. Each event has a stable transaction
// id (the message's id and the file's index): a re-delivery after a crash
// sends it once.
func (c *Channel) SendAttachments(ctx context.Context, out conch.Outbound) error {
	if out.Text != "" {
		if _, err := c.send(ctx, out, false); err != nil {
			return err
		}
	}
	cli, err := c.client(ctx)
	if err != nil {
		return err
	}
	room, err := roomOf(out.Key)
	if err != nil {
		return err
	}
	enc, err := c.isEncrypted(ctx, room)
	if err != nil {
		return err
	}
	if enc && !e2eeAvailable {
		return fmt.Errorf("room is encrypted, files not sent: %w", errNoE2EE)
	}
	for i, a := range out.Attachments {
		if a.Open == nil {
			return fmt.Errorf("matrix send file %q: nothing to read", a.Name)
		}
		txn := ""
		if out.ID != "" {
			txn = out.ID + ".f" + strconv.Itoa(i)
			if sent, err := c.sending.sentEvent(ctx, txn); err == nil && sent != "" {
				// Sent before a restart: neither upload nor send it again.
				continue
			}
		}
		content, err := c.fileContent(ctx, a, enc)
		if err != nil {
			return err
		}
		if txn == "" {
			_, err = c.sendContent(ctx, cli, room, content, "")
		} else {
			_, err = c.sendOnce(ctx, cli, room, content, txn)
		}
		if err != nil {
			return fmt.Errorf("matrix send file %q to %s: %w", a.Name, room, err)
		}
	}
	return nil
}

// fileContent uploads a file (encrypted for an encrypted room) and returns
// the event that shows it.
func (c *Channel) fileContent(ctx context.Context, a conch.Attachment, enc bool) (*event.MessageEventContent, error) {
	rc, err := a.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("matrix send file %q: open: %w", a.Name, err)
	}
	data, err := io.ReadAll(io.LimitReader(rc, maxSendBytes+1))
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("matrix send file %q: read: %w", a.Name, err)
	}
	if len(data) > maxSendBytes {
		return nil, conch.Errorf(conch.KindInvalid, "matrix send file %q: over %d bytes", a.Name, maxSendBytes)
	}
	name := conch.SafeName(a.Name, "file")
	mt := a.MediaType
	if mt == "" {
		mt = "application/octet-stream"
	}
	content := &event.MessageEventContent{MsgType: event.MsgFile, Body: name, FileName: name,
		Info: &event.FileInfo{MimeType: mt, Size: len(data)}}
	switch mt {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		content.MsgType = event.MsgImage
		if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
			content.Info.Width, content.Info.Height = cfg.Width, cfg.Height
		}
	}
	cli, err := c.client(ctx)
	if err != nil {
		return nil, err
	}
	if !enc {
		up, err := cli.UploadBytesWithName(ctx, data, mt, name)
		if err != nil {
			return nil, fmt.Errorf("matrix upload %q: %w", a.Name, err)
		}
		content.URL = up.ContentURI.CUString()
		return content, nil
	}
	file := attachment.NewEncryptedFile()
	file.EncryptInPlace(data)
	up, err := cli.UploadBytesWithName(ctx, data, "application/octet-stream", "")
	if err != nil {
		return nil, fmt.Errorf("matrix upload %q: %w", a.Name, err)
	}
	content.File = &event.EncryptedFileInfo{EncryptedFile: *file, URL: up.ContentURI.CUString()}
	return content, nil
}

// sentEvent returns the event of txn when a send of it finished, without
// recording an attempt ("" when none did).
func (s *sendingStore) sentEvent(ctx context.Context, txn string) (id.EventID, error) {
	var started, last int64
	var sent string
	err := s.db.QueryRow(ctx, sqlGetSending, txn).Scan(&started, &last, &sent)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id.EventID(sent), err
}
