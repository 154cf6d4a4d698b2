package email

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"mime"
	"strings"

	"github.com/emersion/go-message"
	gomail "github.com/emersion/go-message/mail"

	"conch"
)

// inlineImage reports whether a file is shown inside the mail's HTML: the
// picture types mail readers display.
func inlineImage(a conch.Attachment) bool {
	switch a.MediaType {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// composeWithFiles writes a reply that carries files:
//
//	multipart/mixed
//	├ multipart/related            (when there are pictures)
//	│ ├ multipart/alternative      text/plain, text/html (the pictures by cid:)
//	│ └ image/… inline, Content-ID one part per picture
//	└ other files as attachments
//
// so readers show the pictures in the message, after the text, and offer the
// other files for download.
func (c *Channel) composeWithFiles(ctx context.Context, h gomail.Header, out conch.Outbound, id, text, body string) ([]byte, error) {
	var images, others []conch.Attachment
	for _, a := range out.Attachments {
		if inlineImage(a) {
			images = append(images, a)
		} else {
			others = append(others, a)
		}
	}
	cids := make([]string, len(images))
	var figs strings.Builder
	for i, a := range images {
		cids[i] = fmt.Sprintf("file%d.%s", i+1, id)
		fmt.Fprintf(&figs, "<p><img src=\"cid:%s\" alt=\"%s\" style=\"max-width:100%%\"></p>\n", html.EscapeString(cids[i]), html.EscapeString(conch.SafeName(a.Name, "picture")))
	}
	var buf bytes.Buffer
	top := h.Header
	top.SetContentType("multipart/mixed", nil)
	mw, err := message.CreateWriter(&buf, top)
	if err != nil {
		return nil, err
	}
	alternativeIn := mw
	var rel *message.Writer
	if len(images) > 0 {
		var rh message.Header
		rh.SetContentType("multipart/related", map[string]string{"type": "multipart/alternative"})
		if rel, err = mw.CreatePart(rh); err != nil {
			return nil, err
		}
		alternativeIn = rel
	}
	var ah message.Header
	ah.SetContentType("multipart/alternative", nil)
	alt, err := alternativeIn.CreatePart(ah)
	if err != nil {
		return nil, err
	}
	for _, part := range []struct{ ctype, body string }{
		{"text/plain", text},
		{"text/html", "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head><body>\n" + body + "\n" + figs.String() + "</body></html>\n"},
	} {
		var ph message.Header
		ph.SetContentType(part.ctype, map[string]string{"charset": "utf-8"})
		ph.Set("Content-Transfer-Encoding", "quoted-printable")
		pw, err := alt.CreatePart(ph)
		if err != nil {
			return nil, err
		}
		if _, err := io.WriteString(pw, part.body); err != nil {
			return nil, err
		}
		if err := pw.Close(); err != nil {
			return nil, err
		}
	}
	if err := alt.Close(); err != nil {
		return nil, err
	}
	for i, a := range images {
		if err := writeFilePart(ctx, rel, a, "inline", cids[i]); err != nil {
			return nil, err
		}
	}
	if rel != nil {
		if err := rel.Close(); err != nil {
			return nil, err
		}
	}
	for _, a := range others {
		if err := writeFilePart(ctx, mw, a, "attachment", ""); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeFilePart writes one file as a base64 part.
func writeFilePart(ctx context.Context, w *message.Writer, a conch.Attachment, disposition, cid string) error {
	if a.Open == nil {
		return fmt.Errorf("attachment %q cannot be read", a.Name)
	}
	r, err := a.Open(ctx)
	if err != nil {
		return fmt.Errorf("attachment %q: %w", a.Name, err)
	}
	defer r.Close()
	name := conch.SafeName(a.Name, "file")
	var h message.Header
	mt, params, err := mime.ParseMediaType(a.MediaType)
	if err != nil || a.MediaType == "" {
		mt, params = "application/octet-stream", nil
	}
	if params == nil {
		params = map[string]string{}
	}
	params["name"] = name
	h.SetContentType(mt, params)
	h.SetContentDisposition(disposition, map[string]string{"filename": name})
	h.Set("Content-Transfer-Encoding", "base64")
	if cid != "" {
		h.Set("Content-Id", "<"+cid+">")
	}
	pw, err := w.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := io.Copy(pw, r); err != nil {
		return fmt.Errorf("attachment %q: %w", a.Name, err)
	}
	return pw.Close()
}
