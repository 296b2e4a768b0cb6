package full

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Escape makes s safe to print on a terminal: every rune that is not
// printable (unicode.IsPrint, the ASCII space aside) becomes a \x, \u or \U
// escape, among them the C0 and C1 controls, DEL, the bidirectional
// controls (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C) and the
// line and paragraph separators; an invalid UTF-8 byte becomes \xNN.
// Newlines and tabs are kept unless oneLine.
func Escape(s string, oneLine bool) string {
	out, _ := escapeCapped(s, oneLine, -1)
	return out
}

// escapeCapped is Escape, stopping once the output holds max runes
// (max < 0: no cap); more is how many bytes of s were not shown.
func escapeCapped(s string, oneLine bool, max int) (out string, more int) {
	var b strings.Builder
	n := 0
	for i := 0; i < len(s); {
		if max >= 0 && n >= max {
			return b.String(), len(s) - i
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && size == 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case !oneLine && (r == '\n' || r == '\t'):
			piece = string(r)
		case r == ' ' || unicode.IsPrint(r):
			piece = s[i : i+size]
		case r < 0x80:
			piece = fmt.Sprintf(`\x%02x`, r)
		case r <= 0xffff:
			piece = fmt.Sprintf(`\u%04x`, r)
		default:
			piece = fmt.Sprintf(`\U%08x`, r)
		}
		b.WriteString(piece)
		n += utf8.RuneCountInString(piece)
		i += size
	}
	return b.String(), 0
}

// Shown is a JSON text as a person is shown it: compact, escaped, at most
// max runes, then how many bytes more there are.
func Shown(raw json.RawMessage, max int) (string, int) {
	out, more := escapeCapped(compact(raw), true, max)
	if more > 0 {
		out += fmt.Sprintf("… (%d more bytes)", more)
	}
	return out, more
}

// JSONSafe is a JSON text with every rune Escape would escape written as a
// \u escape (a surrogate pair past U+FFFF), the newlines between values
// aside: the same JSON value, with nothing a terminal acts on. Such runes
// occur only inside strings, where \u escapes mean them.
func JSONSafe(b []byte) []byte {
	var out bytes.Buffer
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		switch {
		case r == '\n' || r == ' ' || unicode.IsPrint(r):
			out.Write(b[:size])
		case r == utf8.RuneError && size == 1:
			out.WriteString(`\ufffd`) // encoding/json writes none; never raw
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&out, `\u%04x\u%04x`, hi, lo)
		default:
			fmt.Fprintf(&out, `\u%04x`, r)
		}
		b = b[size:]
	}
	return out.Bytes()
}
