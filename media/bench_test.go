package media

import (
	"bytes"
	"image/jpeg"
	"testing"

	"conch/media/mediatest"
)

// BenchmarkPrepareImage prepares a 12-megapixel phone photo (4000×3000,
// EXIF-rotated) against a baseline in the same run: decoding it alone.
func BenchmarkPrepareImage(b *testing.B) {
	photo := mediatest.Photo(4000, 3000, 6)
	b.Run("baseline-decode", func(b *testing.B) {
		b.SetBytes(int64(len(photo)))
		for b.Loop() {
			if _, err := jpeg.Decode(bytes.NewReader(photo)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("prepare", func(b *testing.B) {
		b.SetBytes(int64(len(photo)))
		for b.Loop() {
			if _, err := PrepareImage(photo); err != nil {
				b.Fatal(err)
			}
		}
	})
}
