package gateway

import (
	"context"
	"fmt"
	"io"
	"strings"

	"conch"
)

// copyFile copies one spooled file into the sandbox at a.Path.
func copyFile(ctx context.Context, st conch.AttachmentStore, sb conch.Sandbox, a conch.Attachment) error {
	r, err := st.Open(ctx, a.Ref)
	if err != nil {
		return fmt.Errorf("open %s: %w", a.Ref, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read %s: %w", a.Ref, err)
	}
	if err := sb.WriteFile(ctx, a.Path, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", a.Path, err)
	}
	return nil
}

// outgoingFiles readies the files a turn's tools queued for its answer
// (stored with the turn, spooled by send_file): each reads its spooled copy,
// so an answer re-delivered after a crash sends the same files.
func (g *Gateway) outgoingFiles(as []conch.Attachment) []conch.Attachment {
	if len(as) == 0 || g.opts.Attachments == nil {
		return nil
	}
	out := make([]conch.Attachment, 0, len(as))
	for _, a := range as {
		if a.Ref == "" {
			continue
		}
		ref := a.Ref
		a.Open = func(ctx context.Context) (io.ReadCloser, error) { return g.opts.Attachments.Open(ctx, ref) }
		out = append(out, a)
	}
	return out
}

// describeSent names the files of an answer for a channel that cannot send
// files (the terminal): where each is in the workspace.
func describeSent(as []conch.Attachment) string {
	var b strings.Builder
	b.WriteString("[Files sent with this answer; this channel cannot show them:")
	for _, a := range as {
		where := a.Path
		if where == "" {
			where = a.Name
		}
		fmt.Fprintf(&b, "\n- %s (%s, %d bytes)", where, a.MediaType, a.Size)
	}
	b.WriteString("]")
	return b.String()
}
