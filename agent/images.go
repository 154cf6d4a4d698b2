package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"conch"
	"conch/media"
)

// Pictures in the model's view. A stored message holds a picture by
// reference (conch.Image.Ref, in Options.Media); the agent reads the bytes
// when it builds a request. Like old tool results, old pictures leave the
// context: only those of the running turn and the imageTurns turns before
// it are sent, at most maxImages of them, the newest first; the others
// become a line of text saying how to look again.
const (
	// imageTurns is how many earlier turns keep their pictures.
	imageTurns = 2
	// maxImages caps the pictures of one request.
	maxImages = 8
	// imageTokens estimates one prepared picture (at most 1568 px on the
	// long edge: Anthropic counts about w·h/750 tokens, up to ~3300;
	// OpenAI ~1100 at high detail; Gemini 258 a tile): a middle value,
	// with the estimate's margin on top.
	imageTokens = 1600
	// imageCacheBytes bounds the pictures the agent keeps read.
	imageCacheBytes = 64 << 20
)

// imageCache keeps recently read pictures by reference.
type imageCache struct {
	mu    sync.Mutex
	data  map[string][]byte
	order []string
	size  int
}

func (c *imageCache) get(ref string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.data[ref]
	return b, ok
}

func (c *imageCache) put(ref string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.data == nil {
		c.data = map[string][]byte{}
	}
	if _, ok := c.data[ref]; ok {
		return
	}
	c.data[ref] = b
	c.order = append(c.order, ref)
	c.size += len(b)
	for c.size > imageCacheBytes && len(c.order) > 1 {
		old := c.order[0]
		c.order = c.order[1:]
		c.size -= len(c.data[old])
		delete(c.data, old)
	}
}

// load returns a picture's bytes: its Data, or the stored copy by Ref.
func (a *Agent) loadImage(ctx context.Context, im conch.Image) ([]byte, error) {
	if len(im.Data) > 0 {
		return im.Data, nil
	}
	if im.Ref == "" || a.opts.Media == nil {
		return nil, fmt.Errorf("picture %q is not kept", im.Name)
	}
	if b, ok := a.images.get(im.Ref); ok {
		return b, nil
	}
	r, err := a.opts.Media.Open(ctx, im.Ref)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, 32<<20))
	if err != nil {
		return nil, err
	}
	a.images.put(im.Ref, b)
	return b, nil
}

// withImages returns msgs with the pictures a request carries loaded and
// the others turned into text: none for a model without vision, and only
// the newest of the recent turns otherwise. msgs is not changed.
func (a *Agent) withImages(ctx context.Context, v contextView, msgs []conch.Message, turn conch.TurnID, s slot) []conch.Message {
	// msgs may start with a note before v's messages.
	off := len(msgs) - len(v.msgs)
	recent := map[conch.TurnID]bool{turn: true}
	for i := len(v.pos) - 1; i >= 0 && len(recent) <= imageTurns; i-- {
		recent[v.pos[i].Turn] = true
	}
	left := maxImages
	out := make([]conch.Message, len(msgs))
	copy(out, msgs)
	for i := len(out) - 1; i >= 0; i-- {
		m := out[i]
		if len(m.Images) == 0 && (m.ToolResult == nil || len(m.ToolResult.Images) == 0) {
			continue
		}
		keep := s.vision
		why := fmt.Sprintf("the model in use (%s) cannot see pictures", s.model.Name())
		if j := i - off; keep && j >= 0 && j < len(v.pos) && !recent[v.pos[j].Turn] {
			keep, why = false, "an older picture, no longer in view; call view_image with its path to look again"
		}
		var notes []string
		kept := func(is []conch.Image) []conch.Image {
			var out []conch.Image
			for _, im := range is {
				if !keep || left <= 0 {
					w := why
					if keep {
						w = "more pictures than one request carries; call view_image with its path to look again"
					}
					notes = append(notes, fmt.Sprintf("[picture %s not shown: %s]", im.Name, w))
					continue
				}
				b, err := a.loadImage(ctx, im)
				if err != nil {
					a.opts.Logger.Warn("picture not loaded", "picture", im.Name, "err", err)
					notes = append(notes, fmt.Sprintf("[picture %s not shown: it is no longer kept]", im.Name))
					continue
				}
				im.Data = b
				out = append(out, im)
				left--
			}
			return out
		}
		if m.ToolResult != nil && len(m.ToolResult.Images) > 0 {
			r := *m.ToolResult
			r.Images = kept(r.Images)
			for _, n := range notes {
				r.Content = joinLines(r.Content, n)
			}
			m.ToolResult = &r
		} else {
			m.Images = kept(m.Images)
			for _, n := range notes {
				m.Text = joinLines(m.Text, n)
			}
		}
		out[i] = m
	}
	return out
}

func joinLines(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
}

// keepToolImages stores the pictures a tool returned (Options.Media) so
// the stored result holds them by reference; the returned images keep
// their bytes for this turn's requests. Without a place to keep them, or
// when keeping fails, a picture is named in the text instead.
func (a *Agent) keepToolImages(ctx context.Context, key conch.ConversationKey, r *conch.ToolResult) {
	if len(r.Images) == 0 {
		return
	}
	var kept []conch.Image
	for i, im := range r.Images {
		if im.Name == "" {
			im.Name = fmt.Sprintf("%s-picture-%d", r.Name, i+1)
		}
		if a.opts.Media == nil {
			r.Content = joinLines(r.Content, fmt.Sprintf("[picture %s not shown: pictures cannot be kept here]", im.Name))
			continue
		}
		if !sendable(im) {
			// An MCP tool's picture may be any type or size: made fit as
			// received pictures are, or named.
			p, err := media.PrepareImage(im.Data)
			if err != nil {
				r.Content = joinLines(r.Content, fmt.Sprintf("[picture %s not shown: %v]", im.Name, err))
				continue
			}
			im.MediaType, im.Data = p.MediaType, p.Data
		}
		data := im.Data
		ref, _, err := a.opts.Media.Put(ctx, key, conch.Attachment{Name: im.Name, MediaType: im.MediaType, Size: int64(len(data)),
			Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}, 0)
		if err != nil {
			a.opts.Logger.Warn("picture of a tool result not kept", "tool", r.Name, "err", err)
			r.Content = joinLines(r.Content, fmt.Sprintf("[picture %s not shown: it could not be kept (%s)]", im.Name, conch.UserMessage(err)))
			continue
		}
		im.Ref = ref
		a.images.put(ref, data)
		kept = append(kept, im)
	}
	r.Images = kept
}

// sendable reports whether a picture can go to every provider as it is.
func sendable(im conch.Image) bool {
	switch im.MediaType {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return len(im.Data) > 0 && len(im.Data) <= media.MaxBytes
	}
	return false
}

// imageCount is the number of pictures a message carries.
func imageCount(m conch.Message) int {
	n := len(m.Images)
	if m.ToolResult != nil {
		n += len(m.ToolResult.Images)
	}
	return n
}
