package matrix

import (
	"maunium.net/go/mautrix/event"

	"conch/channel/internal/markdown"
)

// Size limits (see channel/internal/markdown): the Markdown of one part,
// body and formatted_body of one message together, and an edit's Markdown.
const (
	maxChunkBytes   = markdown.MatrixChunkBytes
	maxContentBytes = markdown.MatrixContentBytes
	maxEditBytes    = markdown.MatrixEditBytes
)

// renderer turns Markdown into Matrix messages: body is the Markdown,
// formatted_body its HTML in the subset Matrix clients accept.
type renderer struct {
	html *markdown.HTMLFormat
}

func newRenderer() *renderer { return &renderer{html: markdown.MatrixHTML()} }

// HTML renders Markdown and sanitises the result.
func (r *renderer) HTML(md string) (string, error) { return r.html.HTML(md) }

// content builds a message: body is the Markdown source, formatted_body the HTML.
func (r *renderer) content(md string, msgType event.MessageType) (*event.MessageEventContent, error) {
	html, err := r.HTML(md)
	if err != nil {
		return nil, err
	}
	return &event.MessageEventContent{
		MsgType:       msgType,
		Body:          md,
		Format:        event.FormatHTML,
		FormattedBody: html,
		Mentions:      &event.Mentions{},
	}, nil
}

// messages renders text as one or more messages, each under the size limits.
func (r *renderer) messages(text string, msgType event.MessageType) ([]*event.MessageEventContent, error) {
	var out []*event.MessageEventContent
	var add func(chunk string, limit int) error
	add = func(chunk string, limit int) error {
		c, err := r.content(chunk, msgType)
		if err != nil {
			return err
		}
		if len(c.Body)+len(c.FormattedBody) <= maxContentBytes || limit < 256 {
			out = append(out, c)
			return nil
		}
		// The HTML grew past the limit (heavy escaping): split finer.
		for _, part := range markdown.SplitSource(chunk, limit/2) {
			if err := add(part, limit/2); err != nil {
				return err
			}
		}
		return nil
	}
	for _, chunk := range markdown.SplitSource(text, maxChunkBytes) {
		if err := add(chunk, maxChunkBytes); err != nil {
			return nil, err
		}
	}
	return out, nil
}
