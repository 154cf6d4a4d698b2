package web

import (
	"bufio"
	"io"
	"mime"
	"net/http"
	"regexp"

	"conch"
)

// fileRefRe is the form of a stored file's reference: two hex names, so
// a reference can never name a path outside the store.
var fileRefRe = regexp.MustCompile(`^[0-9a-f]{1,64}/[0-9a-f]{1,64}$`)

// inlineImages are the types the page shows inline; every other file is
// served as a download, so nothing the model made (an SVG, an HTML page)
// ever runs in the page's origin.
var inlineImages = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// serveFile serves a file sent with an answer:
// GET /api/files/{conv}/{ref...}?name=<file name>. It is behind the login
// (cookie and request token: the page fetches it and shows a blob), the
// conversation must exist, and the reference must be one of that
// conversation's files (Options.Files refuses others).
func (c *Channel) serveFile(w http.ResponseWriter, r *http.Request) {
	if c.opts.Files == nil {
		writeError(w, http.StatusNotFound, "files are not kept here")
		return
	}
	cv, err := c.convs.Get(r.Context(), r.PathValue("conv"))
	if err != nil {
		c.writeErr(w, "file", err)
		return
	}
	ref := r.PathValue("ref")
	if !fileRefRe.MatchString(ref) {
		writeError(w, http.StatusNotFound, "no such file")
		return
	}
	key := conch.ConversationKey{Channel: conch.ChannelWeb, ID: cv.ID}
	f, err := c.opts.Files.OpenFile(r.Context(), key, ref)
	if err != nil {
		c.log.Info("file refused", "conversation", cv.ID, "ref", ref, "err", err)
		writeError(w, http.StatusNotFound, "no such file")
		return
	}
	defer f.Close()
	br := bufio.NewReader(f)
	head, _ := br.Peek(512)
	ct := http.DetectContentType(head)
	name := conch.SafeName(r.URL.Query().Get("name"), "file")
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, no-store")
	if inlineImages[ct] {
		h.Set("Content-Type", ct)
		h.Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": name}))
	} else {
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	}
	if _, err := io.Copy(w, br); err != nil {
		c.log.Debug("file not served whole", "conversation", cv.ID, "err", err)
	}
}
