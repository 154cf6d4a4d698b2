package fakellm

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"strings"

	// The decoders the real APIs read.
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/webp"
)

// Image is a picture a request carried, decoded and checked as the real
// API checks it.
type Image struct {
	MediaType     string
	Data          []byte
	Width, Height int
}

// mediaError is a request the real API refuses for its media: the server
// answers it with the API's own 400 and message.
type mediaError struct {
	msg  string
	code string
}

func (e *mediaError) Error() string { return e.msg }

// The providers' published limits on one picture.
const (
	anthropicMaxImageBytes = 5 << 20 // of the base64 text
	anthropicMaxSide       = 8000
	openAIMaxImageBytes    = 20 << 20
	geminiMaxRequestBytes  = 20 << 20 // inline data, whole request
)

// sniffImage names the format of data by its magic bytes.
func sniffImage(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(data, []byte{0xFF, 0xD8, 0xFF}):
		return "image/jpeg"
	case bytes.HasPrefix(data, []byte("GIF8")):
		return "image/gif"
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return "image/webp"
	case len(data) >= 12 && string(data[4:8]) == "ftyp" && (string(data[8:12]) == "heic" || string(data[8:12]) == "mif1"):
		return "image/heic"
	}
	return ""
}

// decodePicture checks a picture as every API does: base64, a format it
// takes, content matching the declared type, a picture that decodes.
func decodePicture(p Provider, where, mediaType, b64 string) (Image, error) {
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		switch p {
		case Anthropic:
			return Image{}, &mediaError{msg: where + ".source.base64: invalid base64 data"}
		case Gemini:
			return Image{}, &mediaError{msg: fmt.Sprintf("Invalid value at '%s.inline_data.data' (TYPE_BYTES), Base64 decoding failed for %q", where, clipText(b64, 20))}
		}
		return Image{}, &mediaError{msg: "Invalid base64 image_url.", code: "invalid_image_url"}
	}
	allowed := []string{"image/png", "image/jpeg", "image/gif", "image/webp"}
	if p == Gemini {
		allowed = []string{"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"}
	}
	ok := false
	for _, a := range allowed {
		ok = ok || a == mediaType
	}
	if !ok {
		switch p {
		case Anthropic:
			return Image{}, &mediaError{msg: fmt.Sprintf("%s.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", where)}
		case Gemini:
			return Image{}, &mediaError{msg: fmt.Sprintf("Unsupported MIME type: %s", mediaType)}
		}
		return Image{}, &mediaError{msg: fmt.Sprintf("Invalid MIME type. Only image types are supported. (got %s)", mediaType), code: "invalid_image_format"}
	}
	switch p {
	case Anthropic:
		if len(b64) > anthropicMaxImageBytes {
			return Image{}, &mediaError{msg: fmt.Sprintf("%s.source.base64: image exceeds 5 MB maximum: %d bytes > %d bytes", where, len(b64), anthropicMaxImageBytes)}
		}
	case OpenAI, Responses:
		if len(data) > openAIMaxImageBytes {
			return Image{}, &mediaError{msg: "Image too large: the maximum size is 20 MB.", code: "image_too_large"}
		}
	}
	if got := sniffImage(data); got != mediaType {
		if p == Anthropic && got != "" {
			return Image{}, &mediaError{msg: fmt.Sprintf("%s.source.base64.data: Image does not match the provided media type %s", where, mediaType)}
		}
		if got == "" {
			return Image{}, invalidImage(p, where)
		}
	}
	img := Image{MediaType: mediaType, Data: data}
	if mediaType == "image/heic" || mediaType == "image/heif" {
		return img, nil // Gemini reads it; no decoder here
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return Image{}, invalidImage(p, where)
	}
	if _, _, err := image.Decode(bytes.NewReader(data)); err != nil {
		return Image{}, invalidImage(p, where)
	}
	if p == Anthropic && (cfg.Width > anthropicMaxSide || cfg.Height > anthropicMaxSide) {
		return Image{}, &mediaError{msg: fmt.Sprintf("%s.source.base64.data: At least one of the image dimensions exceed max allowed size: %d pixels", where, anthropicMaxSide)}
	}
	img.Width, img.Height = cfg.Width, cfg.Height
	return img, nil
}

func invalidImage(p Provider, where string) error {
	switch p {
	case Anthropic:
		return &mediaError{msg: where + ".source.base64.data: Could not process image"}
	case Gemini:
		return &mediaError{msg: "Unable to process input image. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"}
	}
	return &mediaError{msg: "You uploaded an unsupported image. Please make sure your image is valid.", code: "invalid_image_format"}
}

// dataURL splits OpenAI's data:<type>;base64,<data> image URL.
func dataURL(url string) (mediaType, b64 string, ok bool) {
	rest, found := strings.CutPrefix(url, "data:")
	if !found {
		return "", "", false
	}
	head, data, found := strings.Cut(rest, ",")
	mt, isB64 := strings.CutSuffix(head, ";base64")
	return mt, data, found && isB64
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
