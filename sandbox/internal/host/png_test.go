package host

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/png"
	"testing"
)

func testPNG(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// chunk is one PNG chunk with its CRC.
func chunk(typ string, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	b = append(b, typ...)
	b = append(b, body...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[4:]))
}

// TestCheckPNG: the PNG's own width and height; each kind of damage or
// forgery refused.
func TestCheckPNG(t *testing.T) {
	good := testPNG(t, 7, 3)
	if w, h, err := CheckPNG(good); err != nil || w != 7 || h != 3 {
		t.Fatalf("CheckPNG(7x3) = %d, %d, %v", w, h, err)
	}
	ihdr := func(w, h uint32, depth, color byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, w)
		b = binary.BigEndian.AppendUint32(b, h)
		return append(b, depth, color, 0, 0, 0)
	}
	forged := func(parts ...[]byte) []byte { return bytes.Join(append([][]byte{pngSignature}, parts...), nil) }
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-13] ^= 1 // inside the last IDAT's CRC or data
	for name, data := range map[string][]byte{
		"empty":      nil,
		"signature":  append([]byte("\x89PNX"), good[4:]...),
		"cut":        good[:len(good)-1],
		"trailing":   append(bytes.Clone(good), 0),
		"bad crc":    badCRC,
		"no ihdr":    forged(chunk("IDAT", nil), chunk("IEND", nil)),
		"no idat":    forged(chunk("IHDR", ihdr(1, 1, 8, 6)), chunk("IEND", nil)),
		"no iend":    forged(chunk("IHDR", ihdr(1, 1, 8, 6)), chunk("IDAT", nil)),
		"zero width": forged(chunk("IHDR", ihdr(0, 1, 8, 6)), chunk("IDAT", nil), chunk("IEND", nil)),
		"huge":       forged(chunk("IHDR", ihdr(MaxFigureSide+1, 1, 8, 6)), chunk("IDAT", nil), chunk("IEND", nil)),
		"bad depth":  forged(chunk("IHDR", ihdr(1, 1, 3, 6)), chunk("IDAT", nil), chunk("IEND", nil)),
		"two ihdr":   forged(chunk("IHDR", ihdr(1, 1, 8, 6)), chunk("IHDR", ihdr(1, 1, 8, 6)), chunk("IDAT", nil), chunk("IEND", nil)),
		"long chunk": forged(chunk("IHDR", ihdr(1, 1, 8, 6)), []byte{0x7f, 0xff, 0xff, 0xff, 'I', 'D', 'A', 'T'}),
		"short ihdr": forged(chunk("IHDR", []byte{0, 0, 0, 1}), chunk("IDAT", nil), chunk("IEND", nil)),
	} {
		if w, h, err := CheckPNG(data); err == nil {
			t.Errorf("%s: CheckPNG = %d, %d, nil; want an error", name, w, h)
		}
	}
	if _, _, err := CheckPNG(forged(chunk("IHDR", ihdr(2, 5, 8, 2)), chunk("IDAT", []byte{1}), chunk("IEND", nil))); err != nil {
		t.Errorf("a minimal forged PNG's structure: %v", err)
	}
}

// FuzzCheckPNG: no input panics, and what it takes has sides in range.
func FuzzCheckPNG(f *testing.F) {
	f.Add(testPNG(f, 2, 2))
	f.Add([]byte("\x89PNG\r\n\x1a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if w, h, err := CheckPNG(data); err == nil && (w < 1 || h < 1 || w > MaxFigureSide || h > MaxFigureSide) {
			t.Fatalf("took %dx%d", w, h)
		}
	})
}
