package media

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"
)

// halves is a w×h picture, red on the left half and blue on the right.
func halves(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.NRGBA{R: 255, A: 255}
			if x >= w/2 {
				c = color.NRGBA{B: 255, A: 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	return img
}

// withExif inserts an APP1 EXIF segment (big-endian TIFF) after SOI: IFD0
// has the orientation and a GPS IFD pointer, the GPS IFD a latitude, and a
// maker string marks where the location text is.
func withExif(t *testing.T, jpg []byte, orientation uint16) []byte {
	t.Helper()
	var tiff bytes.Buffer
	be := binary.BigEndian
	tiff.WriteString("MM\x00*")
	binary.Write(&tiff, be, uint32(8))
	// IFD0: 2 entries.
	binary.Write(&tiff, be, uint16(2))
	binary.Write(&tiff, be, []uint16{0x0112, 3})
	binary.Write(&tiff, be, uint32(1))
	binary.Write(&tiff, be, []uint16{orientation, 0})
	gpsOff := uint32(8 + 2 + 24 + 4)
	binary.Write(&tiff, be, []uint16{0x8825, 4})
	binary.Write(&tiff, be, uint32(1))
	binary.Write(&tiff, be, gpsOff)
	binary.Write(&tiff, be, uint32(0))
	// GPS IFD: GPSLatitudeRef "N" and an ASCII note.
	binary.Write(&tiff, be, uint16(1))
	binary.Write(&tiff, be, []uint16{0x0001, 2})
	binary.Write(&tiff, be, uint32(2))
	tiff.WriteString("N\x00\x00\x00")
	binary.Write(&tiff, be, uint32(0))
	tiff.WriteString("GPS 48.858370 N 2.294481 E")
	seg := append([]byte("Exif\x00\x00"), tiff.Bytes()...)
	var out bytes.Buffer
	out.Write(jpg[:2])
	out.Write([]byte{0xFF, 0xE1})
	binary.Write(&out, be, uint16(len(seg)+2))
	out.Write(seg)
	out.Write(jpg[2:])
	return out.Bytes()
}

func encodeJPEG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestPrepareOrientsAndStripsLocation(t *testing.T) {
	src := withExif(t, encodeJPEG(t, halves(40, 20)), 6)
	if !bytes.Contains(src, []byte("GPS 48.858370")) || JPEGOrientation(src) != 6 {
		t.Fatal("test picture lacks its EXIF block")
	}
	p, err := PrepareImage(src)
	if err != nil {
		t.Fatal(err)
	}
	if p.MediaType != "image/jpeg" || p.Width != 20 || p.Height != 40 {
		t.Fatalf("prepared %s %d×%d, want image/jpeg 20×40 (rotated 90° clockwise)", p.MediaType, p.Width, p.Height)
	}
	for _, leak := range []string{"Exif", "GPS", "48.858370"} {
		if bytes.Contains(p.Data, []byte(leak)) {
			t.Errorf("prepared picture still holds %q", leak)
		}
	}
	img, err := jpeg.Decode(bytes.NewReader(p.Data))
	if err != nil {
		t.Fatal(err)
	}
	// Rotated clockwise, the left (red) half is on top.
	top, bottom := img.At(10, 5), img.At(10, 35)
	if r, _, b, _ := top.RGBA(); r < 0xC000 || b > 0x4000 {
		t.Errorf("top is %v, want red", top)
	}
	if r, _, b, _ := bottom.RGBA(); b < 0xC000 || r > 0x4000 {
		t.Errorf("bottom is %v, want blue", bottom)
	}
}

func TestOrientations(t *testing.T) {
	// A 3×2 picture with distinct pixels; each orientation moves pixel
	// (0,0) of the stored picture to a known corner of the shown one.
	src := image.NewRGBA(image.Rect(0, 0, 3, 2))
	src.SetRGBA(0, 0, color.RGBA{R: 255, A: 255})
	corner := map[int]image.Point{1: {0, 0}, 2: {2, 0}, 3: {2, 1}, 4: {0, 1}, 5: {0, 0}, 6: {1, 0}, 7: {1, 2}, 8: {0, 2}}
	for o, want := range corner {
		out := Orient(src, o)
		if got := out.RGBAAt(want.X, want.Y); got.R != 255 {
			t.Errorf("orientation %d: pixel (0,0) not at %v", o, want)
		}
		if o >= 5 && out.Bounds().Dx() != 2 {
			t.Errorf("orientation %d: width %d, want 2", o, out.Bounds().Dx())
		}
	}
}

func TestPrepareScalesToMaxEdge(t *testing.T) {
	p, err := PrepareImage(encodePNG(t, halves(3000, 1000)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Width != MaxEdge || p.Height != 1000*MaxEdge/3000 || p.MediaType != "image/png" {
		t.Fatalf("prepared %s %d×%d", p.MediaType, p.Width, p.Height)
	}
	if len(p.Data) > MaxBytes {
		t.Fatalf("%d bytes, more than %d", len(p.Data), MaxBytes)
	}
}

// bomb is a valid PNG header claiming w×h pixels, with one tiny IDAT.
func bomb(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(typ)
		b.Write(data)
		c := crc32.NewIEEE()
		c.Write([]byte(typ))
		c.Write(data)
		binary.Write(&b, binary.BigEndian, c.Sum32())
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr, w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 6
	chunk("IHDR", ihdr)
	chunk("IDAT", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})
	chunk("IEND", nil)
	return b.Bytes()
}

func TestPrepareRefusesBadPictures(t *testing.T) {
	good := encodePNG(t, halves(200, 200))
	for _, c := range []struct {
		name, want  string
		data        []byte
		unsupported bool
	}{
		{"bomb", "image bomb", bomb(100000, 100000), false},
		{"thin bomb", "image bomb", bomb(1, 40_000_000), false},
		{"truncated png", "damaged or truncated", good[:len(good)/2], false},
		{"heic", "HEIC pictures cannot be decoded", append([]byte("\x00\x00\x00\x18ftypheic\x00\x00\x00\x00"), make([]byte, 64)...), true},
		{"text", "not a picture", []byte("hello, world"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := PrepareImage(c.data)
			var me *Error
			if !errors.As(err, &me) || !strings.Contains(err.Error(), c.want) || me.Unsupported != c.unsupported {
				t.Fatalf("err = %v, want *Error with %q (unsupported %v)", err, c.want, c.unsupported)
			}
		})
	}
}

func FuzzPrepareImage(f *testing.F) {
	f.Add(bomb(10, 10))
	f.Add([]byte("\xff\xd8\xff\xe1\x00\x10Exif\x00\x00MM\x00*\x00\x00\x00\x08"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = JPEGOrientation(data)
		p, err := PrepareImage(data)
		if err == nil && (len(p.Data) == 0 || len(p.Data) > MaxBytes || p.Width > MaxEdge || p.Height > MaxEdge) {
			t.Fatalf("prepared %s %d×%d, %d bytes", p.MediaType, p.Width, p.Height, len(p.Data))
		}
	})
}
