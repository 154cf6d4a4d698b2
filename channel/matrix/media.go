package matrix

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch"
)

// mediaAttachment describes an m.image, m.audio, m.file or m.video as an
// attachment read from the homeserver's media repository when the gateway
// spools it (decrypted when the room is encrypted). A file that cannot be
// taken becomes a note for the model instead.
func (c *Channel) mediaAttachment(content *event.MessageEventContent) (*conch.Attachment, string) {
	name := conch.SafeName(content.GetFileName(), "file")
	var uri id.ContentURIString
	var enc *event.EncryptedFileInfo
	switch {
	case content.File != nil && content.File.URL != "":
		enc, uri = content.File, content.File.URL
	case content.URL != "":
		uri = content.URL
	default:
		return nil, fmt.Sprintf("[The file %s was not received: the event has no media URL.]", name)
	}
	mxc, err := uri.Parse()
	if err != nil {
		return nil, fmt.Sprintf("[The file %s was not received: its media URL is not an mxc:// URL.]", name)
	}
	var size int64
	mt := ""
	if content.Info != nil {
		size, mt = int64(content.Info.Size), content.Info.MimeType
	}
	if size > conch.MaxAttachmentSize {
		return nil, fmt.Sprintf("[The file %s (%d MB) was not received: larger than the %d MB limit.]", name, size>>20, conch.MaxAttachmentSize>>20)
	}
	if mt == "" && content.MsgType == event.MsgAudio {
		mt = "audio/ogg"
	}
	return &conch.Attachment{Name: name, MediaType: mt, Size: size, Open: func(ctx context.Context) (io.ReadCloser, error) {
		data, err := c.cli.DownloadBytes(ctx, mxc)
		if err != nil {
			return nil, fmt.Errorf("download %s: %w", mxc, err)
		}
		if enc != nil {
			if err := enc.PrepareForDecryption(); err != nil {
				return nil, undecryptable(name, err)
			}
			if err := enc.DecryptInPlace(data); err != nil {
				return nil, undecryptable(name, err)
			}
		}
		return io.NopCloser(bytes.NewReader(data)), nil
	}}, ""
}

// mediaText is the text of a media message: its caption, or what it is.
func mediaText(t event.MessageType, name, caption, note string) string {
	text := caption
	if text == "" {
		switch t {
		case event.MsgImage:
			text = "[picture]"
		case event.MsgAudio:
			text = "[voice message]"
		default:
			text = "[file " + name + "]"
		}
	}
	if note != "" {
		text += "\n\n" + note
	}
	return text
}

// undecryptable is a file whose key does not open it: bad_request, not
// invalid (which the gateway reads as "too large"), with words to show.
func undecryptable(name string, err error) error {
	return &conch.Error{Kind: conch.KindBadRequest, User: fmt.Sprintf("the encrypted file %s cannot be decrypted", name), Err: err}
}
