package subprocess

import (
	"io"
	"strings"
)

// capture drains r to EOF, keeping the first max bytes. It reads through one
// fixed buffer, so host memory stays bounded whatever the child writes.
type capture struct {
	buf       []byte
	max       int
	truncated bool
}

func (c *capture) drain(r io.Reader) {
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			keep := min(n, c.max-len(c.buf))
			if keep > 0 {
				if c.buf == nil {
					c.buf = make([]byte, 0, min(c.max, 64<<10))
				}
				c.buf = append(c.buf, chunk[:keep]...)
			}
			if keep < n {
				c.truncated = true
			}
		}
		if err != nil {
			return
		}
	}
}

// text decodes the kept bytes as UTF-8, replacing invalid sequences.
func (c *capture) text() string { return strings.ToValidUTF8(string(c.buf), "\uFFFD") }
