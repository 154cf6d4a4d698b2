package mcp

import (
	"encoding/json"
	"fmt"
	"strings"

	"conch"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxImageBytes bounds one image handed to the model; a larger one is
// named, not sent.
const maxImageBytes = 5 << 20

// maxImages bounds the images of one result.
const maxImages = 4

// imageTypes are the pictures providers take.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// result maps a tool result (or a resource read) into what the model
// reads: text as is, images as conch.Image (named in the text too),
// embedded text resources with their URI, binary ones and audio named,
// resource links listed, structured content as JSON when the server gave
// no text. The text is cut at limit characters, saying so.
type result struct {
	b      strings.Builder
	images []conch.Image
}

func (r *result) line(s string) {
	if r.b.Len() > 0 {
		r.b.WriteString("\n")
	}
	r.b.WriteString(s)
}

func (r *result) image(mime string, data []byte, where string) {
	switch {
	case !imageTypes[mime]:
		r.line(fmt.Sprintf("[image %s of %d bytes%s: a type the model cannot view]", mime, len(data), where))
	case len(data) > maxImageBytes:
		r.line(fmt.Sprintf("[image %s of %d bytes%s: too large to view (limit %d)]", mime, len(data), where, maxImageBytes))
	case len(r.images) >= maxImages:
		r.line(fmt.Sprintf("[image %s of %d bytes%s: not shown, a result shows at most %d]", mime, len(data), where, maxImages))
	default:
		r.images = append(r.images, conch.Image{MediaType: mime, Data: data, Name: strings.TrimPrefix(where, " from ")})
		r.line(fmt.Sprintf("[image %s, %d bytes%s: attached]", mime, len(data), where))
	}
}

func (r *result) resource(rc *mcpsdk.ResourceContents) {
	if rc == nil {
		return
	}
	switch {
	case rc.Text != "" || len(rc.Blob) == 0:
		head := "resource " + rc.URI
		if rc.MIMEType != "" {
			head += " (" + rc.MIMEType + ")"
		}
		r.line(head + ":\n" + rc.Text)
	case strings.HasPrefix(rc.MIMEType, "image/"):
		r.image(rc.MIMEType, rc.Blob, " from "+rc.URI)
	default:
		r.line(fmt.Sprintf("[resource %s: %d bytes of %s, binary]", rc.URI, len(rc.Blob), orUnknown(rc.MIMEType)))
	}
}

func (r *result) content(cs []mcpsdk.Content) {
	for _, c := range cs {
		switch c := c.(type) {
		case *mcpsdk.TextContent:
			r.line(c.Text)
		case *mcpsdk.ImageContent:
			r.image(c.MIMEType, c.Data, "")
		case *mcpsdk.AudioContent:
			r.line(fmt.Sprintf("[audio %s of %d bytes: the model cannot listen to it]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcpsdk.EmbeddedResource:
			r.resource(c.Resource)
		case *mcpsdk.ResourceLink:
			s := "resource link: " + c.URI
			if c.Name != "" {
				s += " (" + c.Name + ")"
			}
			if c.Description != "" {
				s += ": " + c.Description
			}
			r.line(s)
		case nil:
		default:
			b, err := json.Marshal(c)
			if err != nil {
				r.line(fmt.Sprintf("[content of type %T that conch cannot show]", c))
				continue
			}
			r.line(string(b))
		}
	}
}

// output is the ToolOutput with text cut at limit characters.
func (r *result) output(isError bool, limit int) conch.ToolOutput {
	text := r.b.String()
	if limit > 0 && len(text) > limit {
		cut := limit
		for cut > 0 && !utf8Start(text[cut]) {
			cut--
		}
		text = text[:cut] + fmt.Sprintf("\n[result cut: %d of %d characters shown]", cut, len(r.b.String()))
	}
	return conch.ToolOutput{Content: text, IsError: isError, Images: r.images}
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}

// callOutput maps a CallToolResult.
func callOutput(res *mcpsdk.CallToolResult, limit int) conch.ToolOutput {
	var r result
	r.content(res.Content)
	if res.StructuredContent != nil && !hasText(res.Content) {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			r.line(string(b))
		}
	}
	if r.b.Len() == 0 && len(r.images) == 0 {
		if res.IsError {
			r.line("the tool failed without saying why")
		} else {
			r.line("(the tool returned nothing)")
		}
	}
	return r.output(res.IsError, limit)
}

func hasText(cs []mcpsdk.Content) bool {
	for _, c := range cs {
		if t, ok := c.(*mcpsdk.TextContent); ok && t.Text != "" {
			return true
		}
	}
	return false
}
