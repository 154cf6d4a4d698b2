// Package mediatest makes the pictures and recordings media tests send:
// a photo with EXIF orientation and a location, an image bomb, a voice note.
package mediatest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
)

// Location is the text the EXIF block of Photo carries.
const Location = "GPS 48.858370 N 2.294481 E"

// Halves is a w×h picture, red on the left half and blue on the right.
func Halves(w, h int) *image.NRGBA {
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

// PNG encodes Halves(w, h).
func PNG(w, h int) []byte {
	var b bytes.Buffer
	_ = png.Encode(&b, Halves(w, h))
	return b.Bytes()
}

// Photo is a JPEG of Halves(w, h) whose EXIF block (APP1, big-endian TIFF)
// gives orientation and a GPS IFD holding Location.
func Photo(w, h int, orientation uint16) []byte {
	var jb bytes.Buffer
	_ = jpeg.Encode(&jb, Halves(w, h), &jpeg.Options{Quality: 95})
	jpg := jb.Bytes()
	var tiff bytes.Buffer
	be := binary.BigEndian
	put := func(v any) { _ = binary.Write(&tiff, be, v) }
	tiff.WriteString("MM\x00*")
	put(uint32(8))
	put(uint16(2))
	put([]uint16{0x0112, 3})
	put(uint32(1))
	put([]uint16{orientation, 0})
	put([]uint16{0x8825, 4})
	put(uint32(1))
	put(uint32(8 + 2 + 24 + 4))
	put(uint32(0))
	put(uint16(1))
	put([]uint16{0x0001, 2})
	put(uint32(2))
	tiff.WriteString("N\x00\x00\x00")
	put(uint32(0))
	tiff.WriteString(Location)
	seg := append([]byte("Exif\x00\x00"), tiff.Bytes()...)
	var out bytes.Buffer
	out.Write(jpg[:2])
	out.Write([]byte{0xFF, 0xE1})
	_ = binary.Write(&out, be, uint16(len(seg)+2))
	out.Write(seg)
	out.Write(jpg[2:])
	return out.Bytes()
}

// Bomb is a valid PNG header claiming w×h pixels, with one tiny IDAT: a
// few bytes that would decode to gigabytes.
func Bomb(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(typ)
		b.Write(data)
		c := crc32.NewIEEE()
		c.Write([]byte(typ))
		c.Write(data)
		_ = binary.Write(&b, binary.BigEndian, c.Sum32())
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

// Voice is a stand-in voice note: an Ogg/Opus header and the words the
// fake transcription endpoint hears (it reads what follows "SAY:").
func Voice(words string) []byte {
	return []byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00OpusHead SAY:" + words + "\x00")
}
