// Package echofloor is the floor a binding round trip is measured against:
// the frame a binding call sends, written and read back by bare Python with
// nothing but os.write and os.read, against a Go echo of each frame over
// the same kind of channel. psych bench (internal/bench) and the bootstrap's
// benchmark both measure it; this package is the one copy of both ends. It
// is a leaf: it imports nothing of this module.
package echofloor

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Setup is Python that defines rt(), one round trip of the call frame
// over fd 3, to be followed by the caller's loop around it.
const Setup = `import os, struct
fd = 3
msg = b'{"type":"call","id":1,"name":"echo","args":{"i":1}}'
out = struct.pack(">I", len(msg)) + msg
def rt():
    os.write(fd, out)
    n = struct.unpack(">I", os.read(fd, 4))[0]
    got = b""
    while len(got) < n:
        got += os.read(fd, n - len(got))
`

// maxFrame bounds a frame the echo accepts; Setup's is 55 bytes.
const maxFrame = 1 << 16

// Serve echoes every length-prefixed frame it reads from rw until EOF,
// which it returns as nil. first, if not nil, is called once the first
// frame's header has arrived, so that a caller's clock can start there.
// A frame longer than 64 KiB is refused with an error, never allocated.
func Serve(rw io.ReadWriter, first func()) error {
	var hdr [4]byte
	buf := make([]byte, 4+maxFrame)
	for i := 0; ; i++ {
		if _, err := io.ReadFull(rw, hdr[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if i == 0 && first != nil {
			first()
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > maxFrame {
			return fmt.Errorf("echofloor: a frame of %d bytes (at most %d)", n, maxFrame)
		}
		copy(buf, hdr[:])
		if _, err := io.ReadFull(rw, buf[4:4+n]); err != nil {
			return err
		}
		if _, err := rw.Write(buf[:4+n]); err != nil {
			return err
		}
	}
}
