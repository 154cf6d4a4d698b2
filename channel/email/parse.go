package email

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // decoders for non-UTF-8 charsets
	gomail "github.com/emersion/go-message/mail"

	"conch"
)

// maxBodyBytes bounds the text of one mail the channel reads (the rest is
// dropped with a note); files are bounded by MaxAttachmentBytes.
const maxBodyBytes = 1 << 20

// wordDecoder decodes RFC 2047 encoded words in any charset go-message knows.
var wordDecoder = &mime.WordDecoder{CharsetReader: message.CharsetReader}

// parsed is what the channel reads from one mail.
type parsed struct {
	MessageID  string // without angle brackets; "" when the mail has none
	From       *mail.Address
	Subject    string
	InReplyTo  []string
	References []string
	Date       time.Time

	// Text is the body as text: text/plain when there is one, otherwise
	// the HTML converted to Markdown.
	Text string
	// HTML is the HTML body when Text was converted from it.
	HTML string
	// Files are the attachments (and inline parts that are not the body).
	Files []file
	// Notes say what was left out (files over the cap, undecodable parts).
	Notes []string

	Header message.Header
}

type file struct {
	Name      string
	MediaType string
	Data      []byte
}

// errMalformed marks a mail that cannot be read at all: it is skipped.
var errMalformed = errors.New("malformed mail")

// parseHeader reads the header fields the channel decides on. It fails only
// when there is no usable From address.
func parseHeader(h message.Header) (parsed, error) {
	mh := gomail.Header{Header: h}
	p := parsed{Header: h}
	if id, err := mh.MessageID(); err == nil {
		p.MessageID = id
	}
	if p.MessageID == "" {
		// Lenient: a Message-ID without angle brackets.
		p.MessageID = strings.Trim(strings.TrimSpace(h.Get("Message-Id")), "<>")
	}
	from, err := mh.AddressList("From")
	if err != nil || len(from) == 0 {
		// A From go-message cannot parse may still hold one address.
		raw := h.Get("From")
		a, perr := mail.ParseAddress(decodeWords(raw))
		if perr != nil {
			return p, fmt.Errorf("%w: no usable From (%q)", errMalformed, raw)
		}
		from = []*mail.Address{a}
	}
	if len(from) != 1 {
		return p, fmt.Errorf("%w: %d From addresses", errMalformed, len(from))
	}
	p.From = &mail.Address{Name: from[0].Name, Address: strings.ToLower(from[0].Address)}
	if s, err := mh.Subject(); err == nil {
		p.Subject = s
	} else {
		p.Subject = decodeWords(h.Get("Subject"))
	}
	p.Subject = strings.Join(strings.Fields(p.Subject), " ")
	p.InReplyTo, _ = mh.MsgIDList("In-Reply-To")
	p.References, _ = mh.MsgIDList("References")
	if d, err := mh.Date(); err == nil {
		p.Date = d
	}
	return p, nil
}

func decodeWords(s string) string {
	if d, err := wordDecoder.DecodeHeader(s); err == nil {
		return d
	}
	return s
}

// parseMail reads a whole mail. Malformed MIME is read as far as it goes:
// a broken part ends the walk with a note, never the mail.
func parseMail(raw []byte, maxFile int64) (parsed, error) {
	// An unknown charset or transfer encoding still yields the entity.
	ent, err := message.Read(bytes.NewReader(raw))
	if ent == nil {
		return parsed{}, fmt.Errorf("%w: %v", errMalformed, err)
	}
	p, err := parseHeader(ent.Header)
	if err != nil {
		return p, err
	}
	var plain, html strings.Builder
	addBody := func(b *strings.Builder, text string) {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(text)
	}
	mr := gomail.NewReader(ent)
	defer mr.Close()
	for n := 0; ; n++ {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && part == nil {
			p.Notes = append(p.Notes, "part of the mail could not be read ("+shortErr(err)+")")
			break
		}
		mediaType, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if mediaType == "" {
			mediaType = "text/plain"
		}
		name := partName(part.Header)
		disp, _, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		isBody := name == "" && disp != "attachment" && (mediaType == "text/plain" || mediaType == "text/html")
		if isBody {
			b, rerr := io.ReadAll(io.LimitReader(part.Body, maxBodyBytes+1))
			if rerr != nil && len(b) == 0 {
				p.Notes = append(p.Notes, "a text part could not be decoded ("+shortErr(rerr)+")")
				continue
			}
			if len(b) > maxBodyBytes {
				b = b[:maxBodyBytes]
				p.Notes = append(p.Notes, fmt.Sprintf("the text was cut at %d bytes", maxBodyBytes))
			}
			text := validUTF8(string(b))
			if mediaType == "text/html" {
				addBody(&html, text)
			} else {
				addBody(&plain, text)
			}
			continue
		}
		if name == "" {
			name = fmt.Sprintf("part-%d%s", n+1, extensionFor(mediaType))
		}
		data, rerr := io.ReadAll(io.LimitReader(part.Body, maxFile+1))
		switch {
		case int64(len(data)) > maxFile:
			// Drain the rest so the walk continues past this part.
			size := int64(len(data))
			m, _ := io.Copy(io.Discard, part.Body)
			p.Notes = append(p.Notes, fmt.Sprintf("the file %q (%s) was not kept: it is over the limit of %s", name, humanBytes(size+m), humanBytes(maxFile)))
		case rerr != nil:
			p.Notes = append(p.Notes, fmt.Sprintf("the file %q could not be decoded (%s)", name, shortErr(rerr)))
		default:
			p.Files = append(p.Files, file{Name: name, MediaType: mediaType, Data: data})
		}
	}
	switch {
	case plain.Len() > 0:
		p.Text = normalizeText(plain.String())
	case html.Len() > 0:
		p.HTML = html.String()
		md, err := htmltomarkdown.ConvertString(p.HTML)
		if err != nil {
			p.Notes = append(p.Notes, "the HTML body could not be converted ("+shortErr(err)+")")
		}
		p.Text = normalizeText(md)
	}
	return p, nil
}

// partName is the file name a part declares (Content-Disposition filename,
// else Content-Type name), RFC 2047/2231 decoded.
func partName(h gomail.PartHeader) string {
	if _, params, err := mime.ParseMediaType(h.Get("Content-Disposition")); err == nil && params["filename"] != "" {
		return decodeWords(params["filename"])
	}
	if _, params, err := mime.ParseMediaType(h.Get("Content-Type")); err == nil && params["name"] != "" {
		return decodeWords(params["name"])
	}
	return ""
}

func extensionFor(mediaType string) string {
	switch mediaType {
	case "message/rfc822":
		return ".eml"
	case "text/plain":
		return ".txt"
	case "text/html":
		return ".html"
	}
	if exts, _ := mime.ExtensionsByType(mediaType); len(exts) > 0 {
		return exts[0]
	}
	return ".bin"
}

// validUTF8 keeps text readable when a part lied about its charset or
// named one nobody knows (go-message decoded the known ones): the bytes are
// read as Latin-1, which maps every byte to a character.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteRune(rune(s[i]))
	}
	return b.String()
}

// normalizeText turns CRLF into LF and trims trailing space on each line.
func normalizeText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l == "-- " {
			continue // the signature delimiter keeps its space
		}
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.Trim(strings.Join(lines, "\n"), "\n")
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// attachment turns a received file into a conch.Attachment whose Open
// reads the copy held in memory until the gateway spooled it.
func (f file) attachment() conch.Attachment {
	data := f.Data
	return conch.Attachment{
		Name:      f.Name,
		MediaType: f.MediaType,
		Size:      int64(len(data)),
		Open: func(context.Context) (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		},
	}
}
