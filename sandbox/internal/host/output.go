package host

import (
	"io"
	"strings"
)

// Capture keeps the first Max bytes of a stream and drops the rest, so host
// memory stays bounded whatever the child writes and the child never blocks
// on a full pipe. Read Text and Truncated once the drain has ended.
type Capture struct {
	Max       int
	buf       []byte
	truncated bool
}

// Write keeps what fits and drops the rest; it never fails.
func (c *Capture) Write(p []byte) (int, error) {
	keep := min(len(p), c.Max-len(c.buf))
	if keep > 0 {
		if c.buf == nil {
			c.buf = make([]byte, 0, min(c.Max, 64<<10))
		}
		c.buf = append(c.buf, p[:keep]...)
	}
	if keep < len(p) {
		c.truncated = true
	}
	return len(p), nil
}

// Drain reads r to its end (or first error) through one fixed buffer.
func (c *Capture) Drain(r io.Reader) {
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			c.Write(chunk[:n])
		}
		if err != nil {
			return
		}
	}
}

// Text decodes the kept bytes as UTF-8, replacing invalid sequences.
func (c *Capture) Text() string {
	return strings.ToValidUTF8(string(c.buf), "\uFFFD")
}

// Truncated reports whether anything was dropped.
func (c *Capture) Truncated() bool {
	return c.truncated
}
