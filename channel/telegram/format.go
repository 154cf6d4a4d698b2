package telegram

import "conch/channel/internal/markdown"

// maxMessageLen is Telegram's limit on a message's visible text, in UTF-16
// units.
const maxMessageLen = markdown.TelegramMaxText

// renderer turns conch's Markdown into Telegram HTML messages; the
// rendering and splitting are channel/internal/markdown's.
type renderer struct{}

func newRenderer() *renderer { return &renderer{} }

// blocks renders Markdown as top-level blocks of Telegram HTML, in order.
func (r *renderer) blocks(md string) []string { return markdown.Parse(md).Telegram() }

// messages renders Markdown into HTML messages of at most limit visible
// characters each, cut at block boundaries where possible and never inside
// a tag.
func (r *renderer) messages(md string, limit int) []string {
	return markdown.SplitTelegram(r.blocks(md), limit)
}

// single renders Markdown as one message; if it is too long, its end is
// kept (progress text grows at the bottom) behind an ellipsis.
func (r *renderer) single(md string, limit int) string {
	parts := r.messages(md, limit-2)
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return "…\n" + parts[len(parts)-1]
}
