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
