// Package jsonfold folds a JSON object's key as encoding/json matches it
// to a struct field: two keys with the same Key are ones encoding/json
// would take for the same field, so a decoder that refuses both can tell.
package jsonfold

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Key maps s to one representative of the strings strings.EqualFold holds
// equal to it: each rune becomes the least rune of its simple case-folding
// orbit (as encoding/json's own foldName does), so "ſ" (U+017F) folds with
// "s" and "K" (U+212A) with "k", which strings.ToLower alone keeps apart.
func Key(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r == utf8.RuneError {
			b.WriteRune(r)
			continue
		}
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}
