package host

import (
	"io"
	"strings"
	"unicode/utf8"
)

// Capture keeps the first Max bytes of a stream and drops the rest, so host
// memory stays bounded whatever the child writes and the child never blocks
// on a full pipe. Read Text and Truncated once the drain has ended.
type Capture struct {
	Max int
	// Emit, when set, is handed the kept bytes as they come, decoded as
	// Text decodes them: the texts it is handed concatenate to exactly
	// Text. A UTF-8 sequence cut by a read waits for the rest of it; a
	// run of invalid bytes cut by a read still gives one U+FFFD; what is
	// left at the cap, or at the end of the drain, is handed at once. It is
	// called from Write and Drain, never with an empty text.
	Emit func(text string)

	buf       []byte
	truncated bool
	// The decoding for Emit: buf[:done] has been handed on; invalid says
	// its last byte was part of an invalid run (whose U+FFFD is out);
	// final says nothing more will be handed.
	done    int
	invalid bool
	final   bool
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
	if c.Emit != nil {
		// At the cap nothing more will be kept: the tail is decided.
		c.emit(keep < len(p))
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
			if c.Emit != nil {
				c.emit(true)
			}
			return
		}
	}
}

// emit hands Emit what of the kept bytes is decided: everything when
// final, else all but an incomplete UTF-8 sequence at the end (a prefix
// that more bytes could complete). Decided bytes decode the same whatever
// follows them, so the texts concatenate to Text's strings.ToValidUTF8.
func (c *Capture) emit(final bool) {
	if c.final {
		return
	}
	c.final = final
	s := c.buf[c.done:]
	var b strings.Builder
	seg, i := 0, 0 // s[seg:i] is valid UTF-8 not yet written to b
	for i < len(s) {
		if s[i] < utf8.RuneSelf {
			i++
			c.invalid = false
			continue
		}
		if !final && !utf8.FullRune(s[i:]) {
			break
		}
		if _, w := utf8.DecodeRune(s[i:]); w > 1 {
			i += w
			c.invalid = false
			continue
		}
		// An invalid byte: one U+FFFD for the whole run.
		b.Write(s[seg:i])
		if !c.invalid {
			b.WriteString("\uFFFD")
			c.invalid = true
		}
		i++
		seg = i
	}
	c.done += i
	var text string
	if b.Len() == 0 {
		text = string(s[seg:i])
	} else {
		b.Write(s[seg:i])
		text = b.String()
	}
	if text != "" {
		c.Emit(text)
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
