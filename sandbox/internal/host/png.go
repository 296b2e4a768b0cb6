package host

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"regexp"
)

// MaxFigureSide is the widest and tallest figure the host takes, in pixels
// (Agg draws none larger).
const MaxFigureSide = 1 << 16

var pngSignature = []byte("\x89PNG\r\n\x1a\n")

// figureName is the form of the names the bootstrap gives figures.
var figureName = regexp.MustCompile(`^figure-[0-9]{1,9}(-[0-9]{1,9})?\.png$`)

// errPNG: the bytes are not a PNG the host takes.
var errPNG = errors.New("not a valid PNG")

// CheckPNG returns the width and height of a PNG from its own header,
// after checking its structure without decoding it: the signature, an
// IHDR first (sides 1 to MaxFigureSide, a valid bit depth and colour
// type), every chunk whole with a matching CRC, at least one IDAT, and
// nothing after IEND. It reads no byte past data.
func CheckPNG(data []byte) (width, height int, err error) {
	if !bytes.HasPrefix(data, pngSignature) {
		return 0, 0, fmt.Errorf("%w: no PNG signature", errPNG)
	}
	rest := data[len(pngSignature):]
	var idat bool
	for i := 0; ; i++ {
		if len(rest) < 12 {
			return 0, 0, fmt.Errorf("%w: chunk %d cut short", errPNG, i)
		}
		n := binary.BigEndian.Uint32(rest)
		if n > 1<<31-1 || uint64(n) > uint64(len(rest)-12) {
			return 0, 0, fmt.Errorf("%w: chunk %d of %d bytes runs past the end", errPNG, i, n)
		}
		typ, body := string(rest[4:8]), rest[8:8+n]
		if crc32.ChecksumIEEE(rest[4:8+n]) != binary.BigEndian.Uint32(rest[8+n:]) {
			return 0, 0, fmt.Errorf("%w: chunk %d (%q): bad CRC", errPNG, i, typ)
		}
		rest = rest[12+n:]
		switch {
		case i == 0 && typ != "IHDR":
			return 0, 0, fmt.Errorf("%w: the first chunk is not IHDR", errPNG)
		case i == 0:
			if width, height, err = checkIHDR(body); err != nil {
				return 0, 0, err
			}
		case typ == "IHDR":
			return 0, 0, fmt.Errorf("%w: a second IHDR", errPNG)
		case typ == "IDAT":
			idat = true
		case typ == "IEND":
			if !idat {
				return 0, 0, fmt.Errorf("%w: no IDAT", errPNG)
			}
			if len(rest) != 0 {
				return 0, 0, fmt.Errorf("%w: %d bytes after IEND", errPNG, len(rest))
			}
			return width, height, nil
		}
	}
}

func checkIHDR(b []byte) (int, int, error) {
	if len(b) != 13 {
		return 0, 0, fmt.Errorf("%w: IHDR of %d bytes", errPNG, len(b))
	}
	w, h := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	if w == 0 || h == 0 || w > MaxFigureSide || h > MaxFigureSide {
		return 0, 0, fmt.Errorf("%w: %dx%d pixels (1 to %d a side)", errPNG, w, h, MaxFigureSide)
	}
	depth, color := b[8], b[9]
	ok := false
	switch color {
	case 0:
		ok = depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16
	case 3:
		ok = depth == 1 || depth == 2 || depth == 4 || depth == 8
	case 2, 4, 6:
		ok = depth == 8 || depth == 16
	}
	if !ok || b[10] != 0 || b[11] != 0 || b[12] > 1 {
		return 0, 0, fmt.Errorf("%w: IHDR depth %d, colour type %d, methods %d/%d/%d", errPNG, depth, color, b[10], b[11], b[12])
	}
	return int(w), int(h), nil
}
