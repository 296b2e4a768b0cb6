package host

import (
	"io"
	"strings"
	"sync"
)

// Capture keeps the first Max bytes of a stream and counts the rest away, so
// host memory stays bounded whatever the child writes and the child never
// blocks on a full pipe. Use Drain on a reader, or write into it (an engine
// that copies the stream itself); it is safe for one writer at a time and
// concurrent Text calls.
type Capture struct {
	Max       int
	mu        sync.Mutex
	buf       []byte
	truncated bool
}

// Write keeps what fits and drops the rest; it never fails.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
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
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.ToValidUTF8(string(c.buf), "\uFFFD")
}

// Truncated reports whether anything was dropped.
func (c *Capture) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.truncated
}
