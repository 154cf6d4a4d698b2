// Package media prepares received pictures for a model: it decodes them
// with pure-Go decoders, refuses image bombs before decoding, applies the
// EXIF orientation, scales them to what every provider accepts and encodes
// them again, which drops all metadata (location included). Formats no
// pure-Go decoder reads (HEIC, AVIF) are named, never sent broken.
package media

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"image/png"

	xdraw "golang.org/x/image/draw"

	// Decoders registered with image.Decode (GIF: the first frame).
	_ "image/gif"

	_ "golang.org/x/image/bmp"
	_ "golang.org/x/image/tiff"
	_ "golang.org/x/image/webp"
)

// The limits a prepared picture keeps: within every provider's (Anthropic:
// 5 MB of base64 per image and 1568 px on the long edge before it scales
// down itself; OpenAI: 20 MB, scaled to 2048 px then 768 px on the short
// edge; Gemini: 20 MB per request, 3072 px), so one picture serves any
// model and a fallback to another provider.
const (
	// MaxEdge is the long edge of a prepared picture in pixels.
	MaxEdge = 1568
	// MaxBytes is the largest prepared picture (3.75 MB is 5 MB in base64).
	MaxBytes = 3_750_000
	// MaxPixels refuses a picture whose header promises more pixels than
	// this before it is decoded (an image bomb: a few KB of PNG that
	// decodes to gigabytes). 50 MP is more than any phone camera.
	MaxPixels = 50_000_000
	// MaxSide refuses absurd shapes (1 × 40 000 000) the pixel count allows.
	MaxSide = 20_000
	// MaxInput is the largest file read for preparation.
	MaxInput = 40 << 20
)

// Prepared is a picture ready for a model: PNG or JPEG, metadata stripped.
type Prepared struct {
	MediaType     string
	Data          []byte
	Width, Height int
	// Format is the format it came in ("jpeg", "png", "webp", ...).
	Format string
}

// Error says why a file could not be prepared, in words for the model and
// the person.
type Error struct {
	// Unsupported is set for a known picture format no decoder here reads.
	Unsupported bool
	Msg         string
}

func (e *Error) Error() string { return e.Msg }

// ErrNotImage is returned for data that is no picture format at all.
var ErrNotImage = &Error{Msg: "not a picture this reader knows (PNG, JPEG, GIF, WebP, BMP, TIFF)"}

// Sniff names the picture format of data by its first bytes ("" when it is
// none): "png", "jpeg", "gif", "webp", "bmp", "tiff", or "heic"/"avif" for
// the formats that cannot be decoded here.
func Sniff(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return "png"
	case bytes.HasPrefix(data, []byte{0xFF, 0xD8, 0xFF}):
		return "jpeg"
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return "gif"
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return "webp"
	case bytes.HasPrefix(data, []byte("BM")) && len(data) > 26:
		return "bmp"
	case bytes.HasPrefix(data, []byte("II*\x00")), bytes.HasPrefix(data, []byte("MM\x00*")):
		return "tiff"
	case len(data) >= 12 && string(data[4:8]) == "ftyp":
		switch string(data[8:12]) {
		case "heic", "heix", "hevc", "heim", "heis", "hevm", "hevs", "mif1", "msf1":
			return "heic"
		case "avif", "avis":
			return "avif"
		}
	}
	return ""
}

// PrepareImage decodes data and returns the picture as a model should get
// it. Bombs, truncated files and undecodable formats are an *Error.
func PrepareImage(data []byte) (Prepared, error) {
	format := Sniff(data)
	switch format {
	case "":
		return Prepared{}, ErrNotImage
	case "heic", "avif":
		return Prepared{}, &Error{Unsupported: true, Msg: fmt.Sprintf("%s pictures cannot be decoded here (no pure-Go decoder); ask the person to send it as JPEG or PNG, or convert it in the sandbox", upper(format))}
	}
	if len(data) > MaxInput {
		return Prepared{}, &Error{Msg: fmt.Sprintf("the picture is %d MB, more than the %d MB conch prepares", len(data)>>20, MaxInput>>20)}
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return Prepared{}, &Error{Msg: fmt.Sprintf("the %s file is damaged or truncated (%v)", upper(format), err)}
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > MaxSide || cfg.Height > MaxSide || int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return Prepared{}, &Error{Msg: fmt.Sprintf("the picture is %d × %d pixels, more than conch decodes (%d megapixels, %d pixels a side): refused as a possible image bomb",
			cfg.Width, cfg.Height, MaxPixels/1_000_000, MaxSide)}
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return Prepared{}, &Error{Msg: fmt.Sprintf("the %s file is damaged or truncated (%v)", upper(format), err)}
	}
	orient := 1
	if format == "jpeg" {
		orient = JPEGOrientation(data)
	}
	out := Orient(fit(img, MaxEdge), orient)
	p, err := encode(out, format)
	if err != nil {
		return Prepared{}, err
	}
	p.Format = format
	return p, nil
}

// encode writes a picture as PNG when it came as a lossless format with
// few colours or transparency would matter (screenshots, diagrams), JPEG
// otherwise, and shrinks it until it fits MaxBytes.
func encode(img image.Image, format string) (Prepared, error) {
	b := img.Bounds()
	if format != "jpeg" {
		var buf bytes.Buffer
		if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, img); err != nil {
			return Prepared{}, fmt.Errorf("encode png: %w", err)
		}
		if buf.Len() <= MaxBytes {
			return Prepared{MediaType: "image/png", Data: buf.Bytes(), Width: b.Dx(), Height: b.Dy()}, nil
		}
	}
	flat := flatten(img)
	for _, q := range []int{85, 70, 50} {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, flat, &jpeg.Options{Quality: q}); err != nil {
			return Prepared{}, fmt.Errorf("encode jpeg: %w", err)
		}
		if buf.Len() <= MaxBytes {
			return Prepared{MediaType: "image/jpeg", Data: buf.Bytes(), Width: b.Dx(), Height: b.Dy()}, nil
		}
	}
	if b.Dx() < 64 || b.Dy() < 64 {
		return Prepared{}, errors.New("encode: picture does not fit")
	}
	return encode(fit(img, max(b.Dx(), b.Dy())*3/4), "jpeg")
}

// flatten puts a picture on white (JPEG has no transparency).
func flatten(img image.Image) image.Image {
	if o, ok := img.(interface{ Opaque() bool }); ok && o.Opaque() {
		return img
	}
	b := img.Bounds()
	dst := image.NewRGBA(b)
	draw.Draw(dst, b, image.NewUniform(color.White), image.Point{}, draw.Src)
	draw.Draw(dst, b, img, b.Min, draw.Over)
	return dst
}

// fit scales img down so its long edge is at most edge pixels; a smaller
// picture is copied as it is (into a fresh RGBA, dropping any palette;
// RGBA is what x/image/draw has fast paths for).
func fit(img image.Image, edge int) *image.RGBA {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w > edge || h > edge {
		if w >= h {
			h, w = max(1, h*edge/w), edge
		} else {
			w, h = max(1, w*edge/h), edge
		}
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	if w == b.Dx() && h == b.Dy() {
		draw.Draw(dst, dst.Bounds(), img, b.Min, draw.Src)
		return dst
	}
	// A large picture is first brought to twice the size with the cheap
	// scaler (it samples, so it is fast at any factor), then filtered down
	// with Catmull-Rom: the quality of the latter at a fraction of its cost
	// on a 12-megapixel photo (BenchmarkPrepareImage).
	if b.Dx() > 2*w && b.Dy() > 2*h {
		mid := image.NewRGBA(image.Rect(0, 0, 2*w, 2*h))
		xdraw.ApproxBiLinear.Scale(mid, mid.Bounds(), img, b, xdraw.Src, nil)
		img, b = mid, mid.Bounds()
	}
	xdraw.CatmullRom.Scale(dst, dst.Bounds(), img, b, xdraw.Src, nil)
	return dst
}

// Orient applies an EXIF orientation (1–8) to img; other values leave it.
func Orient(img *image.RGBA, o int) *image.RGBA {
	if o < 2 || o > 8 {
		return img
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	dw, dh := w, h
	if o >= 5 {
		dw, dh = h, w
	}
	dst := image.NewRGBA(image.Rect(0, 0, dw, dh))
	for y := 0; y < dh; y++ {
		for x := 0; x < dw; x++ {
			var sx, sy int
			switch o {
			case 2:
				sx, sy = w-1-x, y
			case 3:
				sx, sy = w-1-x, h-1-y
			case 4:
				sx, sy = x, h-1-y
			case 5:
				sx, sy = y, x
			case 6:
				sx, sy = y, h-1-x
			case 7:
				sx, sy = w-1-y, h-1-x
			case 8:
				sx, sy = w-1-y, x
			}
			si := img.PixOffset(b.Min.X+sx, b.Min.Y+sy)
			di := dst.PixOffset(x, y)
			copy(dst.Pix[di:di+4], img.Pix[si:si+4])
		}
	}
	return dst
}

func upper(s string) string { return string(bytes.ToUpper([]byte(s))) }
