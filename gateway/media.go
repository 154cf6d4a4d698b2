package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"conch"
)

// prepareMedia has the turn's received pictures and voice prepared for the
// model (once: a resumed turn finds them prepared in the store) and tells
// the person what was understood of each voice message. A failure is a
// note for the model and the person; the turn goes on.
func (c *conversation) prepareMedia(ctx context.Context, t conch.Turn, log *slog.Logger) conch.Turn {
	g := c.g
	if g.opts.Media == nil {
		return t
	}
	todo := false
	for _, a := range t.Inbound.Attachments {
		todo = todo || (!a.Prepared && a.Ref != "")
	}
	if !todo {
		return t
	}
	as := g.opts.Media.Prepare(ctx, c.key, t.Inbound.Attachments)
	changed := false
	for i, a := range as {
		changed = changed || a.Prepared != t.Inbound.Attachments[i].Prepared
	}
	if !changed {
		return t // nothing in them for the model (a PDF), or cancelled
	}
	if u, ok := g.opts.Store.(conch.AttachmentUpdater); ok {
		if err := u.SetAttachments(ctx, t.ID, as); err != nil {
			log.Warn("prepared files not kept; the model sees them as files", "err", err)
			return t
		}
	}
	var heard []string
	for i, a := range as {
		if t.Inbound.Attachments[i].Prepared || !a.Prepared {
			continue
		}
		switch {
		case a.Transcript != "":
			heard = append(heard, fmt.Sprintf("🎤 I heard: “%s”", a.Transcript))
		case a.MediaNote != "" && a.Image == nil:
			heard = append(heard, fmt.Sprintf("“%s”: %s.", a.Name, a.MediaNote))
		}
	}
	t.Inbound.Attachments = as
	if len(heard) > 0 {
		out := c.reply(t, conch.OutboundNotice, strings.Join(heard, "\n"))
		out.ID += ".media"
		g.send(ctx, t.ID, out)
	}
	return t
}
