package email

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"conch/channel/internal/markdown/markdowntest"
)

// Fuzz targets for what arrives from outside: whole mails (MIME, headers,
// encodings) and the Markdown the model writes, rendered into a reply.
// `go test` runs the seeds below and testdata/fuzz as regression tests;
// `make fuzz` explores further.

var mailSeeds = []string{
	"From: Alice <alice@example.org>\r\nTo: conch@example.org\r\nSubject: hi\r\nMessage-ID: <1@x>\r\n\r\nhello\r\n",
	"From: =?utf-8?q?Al=C3=AFce?= <ALICE@example.org>\r\nSubject: =?iso-8859-1?b?aOlsbG8=?=\r\nIn-Reply-To: <a@b>\r\nReferences: <a@b> <c@d>\r\nDate: Mon, 2 Jan 2026 10:00:00 +0000\r\n\r\nbody\r\n",
	"From: a@example.org\r\nContent-Type: multipart/mixed; boundary=XX\r\n\r\n--XX\r\nContent-Type: text/plain; charset=utf-8\r\n\r\ntext\r\n--XX\r\nContent-Type: application/pdf; name=\"r.pdf\"\r\nContent-Disposition: attachment; filename*=utf-8''%C3%A9t%C3%A9.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0=\r\n--XX--\r\n",
	"From: a@example.org\r\nContent-Type: multipart/alternative; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/html\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n<p>Hi <b>there</b><script>x()</script></p>=\r\n\r\n--b\r\n",
	"From: a@example.org\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: multipart/related; boundary=c\r\n\r\n--c\r\nContent-Type: image/png\r\n\r\n\x89PNG\r\n--c--\r\n--b--\r\n",
	"From: a@example.org\r\nContent-Type: text/plain; charset=x-unknown\r\nContent-Transfer-Encoding: x-weird\r\n\r\n\xff\xfe latin\r\n",
	"From: broken\r\n\r\n",
	"From: a@example.org, b@example.org\r\n\r\nx",
	"",
	"\r\n\r\n",
	"From: a@example.org\r\nContent-Type: multipart/mixed; boundary=\r\n\r\n--\r\n",
}

func FuzzParseMail(f *testing.F) {
	for _, s := range mailSeeds {
		f.Add([]byte(s))
	}
	const maxFile = 64
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := parseMail(raw, maxFile)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("error %v is not errMalformed", err)
			}
			return
		}
		if p.From == nil {
			t.Fatal("accepted a mail without a From")
		}
		if p.From.Address != strings.ToLower(p.From.Address) {
			t.Errorf("From %q is not lowercased", p.From.Address)
		}
		if strings.ContainsAny(p.Subject, "\r\n\t") || p.Subject != strings.TrimSpace(p.Subject) {
			t.Errorf("subject %q is not one trimmed line", p.Subject)
		}
		if !utf8.ValidString(p.Text) {
			t.Errorf("text is not valid UTF-8: %q", p.Text)
		}
		if strings.Contains(p.Text, "\r") {
			t.Errorf("text keeps a CR: %q", p.Text)
		}
		for _, fl := range p.Files {
			if int64(len(fl.Data)) > maxFile {
				t.Errorf("file %q kept with %d bytes, over the limit of %d", fl.Name, len(fl.Data), maxFile)
			}
			if fl.Name == "" {
				t.Error("a file has no name")
			}
		}
		// What the model reads is cut from the text, never grown.
		if got := trimReply(p.Text); len(got) > len(p.Text) {
			t.Errorf("trimReply grew the text: %q → %q", p.Text, got)
		}
	})
}

func FuzzTrimReply(f *testing.F) {
	for _, s := range []string{
		"thanks\n\nOn Mon, 1 Jan 2026 at 10:00, Alice <a@x> wrote:\n> old\n> text",
		"new\n-----Original Message-----\nFrom: x\nold",
		"> quoted\nreply inline\n> more",
		"hi\n-- \nsig",
		"hi\n\nSent from my iPhone",
		"From: a\nSent: b\nTo: c\n",
		"> only quotes\n> here",
		"",
		"\n\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got := trimReply(text)
		if len(got) > len(text) {
			t.Fatalf("trimReply grew the text: %q → %q", text, got)
		}
		// Only whole lines at the end are cut, then the space around what
		// is left: it is a piece of the input, never rewritten.
		if !strings.Contains(text, got) {
			t.Fatalf("trimReply(%q) = %q, not a piece of the input", text, got)
		}
		if strings.TrimSpace(text) != "" && got == "" {
			t.Fatalf("trimReply(%q) left nothing of a text with content", text)
		}
	})
}

func FuzzReplyHTML(f *testing.F) {
	for _, s := range markdownSeeds {
		f.Add(s)
	}
	r := newRenderer()
	f.Fuzz(func(t *testing.T, md string) {
		out, err := r.HTML(md)
		if err != nil {
			return
		}
		checkSafeHTML(t, out)
	})
}

// markdownSeeds are Markdown a model (or a prompt injection) might write.
var markdownSeeds = []string{
	"**bold** _it_ `code` [link](https://example.org) ![img](https://example.org/x.png)",
	"<script>alert(1)</script>",
	"<img src=x onerror=alert(1)>",
	"[x](javascript:alert(1)) [y](JaVaScRiPt:alert(1)) [z](data:text/html,<script>)",
	"<a href=\"&#106;avascript:alert(1)\">x</a>",
	"```go\nfunc main() {}\n```\n\n| a | b |\n|---|---|\n| <b>1</b> | 2 |",
	"- [ ] task\n- [x] done\n\n> quote\n\n1. one\n2. two",
	"<div onclick=\"x\" style=\"background:url(javascript:x)\">hi</div>",
	"<svg><script>alert(1)</script></svg><iframe src=x></iframe><object data=x>",
	"<style>*{}</style><form action=x><input type=text></form><base href=x><meta http-equiv=refresh>",
	"```\n<script>\n```",
	"",
}

// checkSafeHTML is the shared safety check (mail may carry images).
func checkSafeHTML(t *testing.T, out string) {
	t.Helper()
	markdowntest.CheckSafeHTML(t, out, false)
}
