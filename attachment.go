package conch

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode"
)

// MaxAttachmentSize is the default cap on one received file.
const MaxAttachmentSize = 25 << 20

// Attachment is a file that travels with a message.
//
// A channel that receives a file sets Name, MediaType, Size (when known) and
// Open. The gateway copies the content into its spool before the message is
// acknowledged, and sets Ref; from then on the file is durable and Open
// reads the spooled copy.
type Attachment struct {
	// Name is the file name as the sender gave it (untrusted; see SafeName).
	Name      string
	MediaType string
	// Size in bytes; -1 or 0 when unknown before reading.
	Size int64
	// Open returns the content. Each call starts from the beginning.
	Open func(ctx context.Context) (io.ReadCloser, error) `json:"-"`
	// Ref is the spool reference once stored (opaque to channels).
	Ref string
	// Path is where the file lands in the conversation's workspace
	// ("/workspace/inbox/…"), set once it was copied there.
	Path string
	// Image is the picture prepared for the model (scaled, oriented,
	// metadata stripped), kept by reference (Image.Ref, no Data); nil for
	// files that are not pictures or not prepared yet.
	Image *Image
	// Transcript is what was understood of a voice or audio file.
	Transcript string
	// MediaNote tells the model what conch could not do with the file
	// ("HEIC pictures cannot be shown", "transcription failed: …").
	MediaNote string
	// Prepared marks a file whose picture or transcript was made (or
	// failed for good), so a resumed turn does not make it again.
	Prepared bool
}

// MediaPreparer turns received pictures and voice into what the model
// reads, once per turn, before the model is called.
type MediaPreparer interface {
	// Prepare fills Image, Transcript or MediaNote of the files of a
	// message and sets Prepared; it never fails a turn (failures become
	// MediaNote).
	Prepare(ctx context.Context, key ConversationKey, as []Attachment) []Attachment
}

// AttachmentUpdater keeps what was prepared of a turn's received files.
type AttachmentUpdater interface {
	// SetAttachments replaces the stored files of the turn's message.
	SetAttachments(ctx context.Context, turn TurnID, as []Attachment) error
}

// Transcriber turns speech into text.
type Transcriber interface {
	// Transcribe returns the text spoken in audio (a file of mediaType
	// named name). A failure is a *Error whose User text may be shown.
	Transcribe(ctx context.Context, audio io.Reader, name, mediaType string) (string, error)
}

// AttachmentStore keeps received files durably until their turn copied them
// into the conversation's workspace.
type AttachmentStore interface {
	// Put stores the content of a and returns its reference. It reads at
	// most limit bytes and fails with KindInvalid beyond that.
	Put(ctx context.Context, key ConversationKey, a Attachment, limit int64) (ref string, size int64, err error)
	// Open reads a stored file.
	Open(ctx context.Context, ref string) (io.ReadCloser, error)
	// Delete removes stored files of a conversation (after a reset).
	Delete(ctx context.Context, key ConversationKey) error
}

// AttachmentChannel can send files with a message.
type AttachmentChannel interface {
	Channel
	SendAttachments(ctx context.Context, out Outbound) error
}

// SafeName turns an untrusted file name into one base name that is safe in a
// workspace: no directories, no control characters, no leading dots, at most
// 100 runes. An empty result becomes fallback.
func SafeName(name, fallback string) string {
	name = path.Base(strings.ReplaceAll(name, "\\", "/"))
	var b strings.Builder
	for _, r := range name {
		switch {
		case r == '/' || r == 0 || unicode.IsControl(r):
		case unicode.IsSpace(r):
			b.WriteByte('_')
		default:
			b.WriteRune(r)
		}
	}
	s := strings.TrimLeft(b.String(), ".")
	if rs := []rune(s); len(rs) > 100 {
		ext := path.Ext(s)
		if len([]rune(ext)) > 10 {
			ext = ""
		}
		s = string(rs[:100-len([]rune(ext))]) + ext
	}
	if s == "" || s == "." || s == ".." {
		return fallback
	}
	return s
}

// DescribeAttachments is how files are named to the model in the text of
// the message they came with.
func DescribeAttachments(as []Attachment) string {
	if len(as) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("[Files received with this message:")
	for _, a := range as {
		where := a.Path
		if where == "" {
			where = "(not available: " + a.Name + ")"
		}
		fmt.Fprintf(&b, "\n- %s (%s, %d bytes)", where, orDefault(a.MediaType, "application/octet-stream"), a.Size)
		if a.Image != nil {
			b.WriteString(": the picture is attached below")
		}
		if a.Transcript != "" {
			fmt.Fprintf(&b, "\n  voice message, transcribed: %q", a.Transcript)
		}
		if a.MediaNote != "" {
			b.WriteString("\n  note: " + a.MediaNote)
		}
	}
	b.WriteString("]")
	return b.String()
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
