package sandbox

import (
	"regexp"
	"strings"
	"testing"
)

// TestHandWrittenPatterns: validID and identifier accept exactly what the
// patterns they replace accept.
func TestHandWrittenPatterns(t *testing.T) {
	idRE := regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)
	identRE := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	cases := []string{"", "a", "A9", "9a", "_", "a.b:c-d_e", "a b", "é", "a/b", "a\x00", strings.Repeat("x", 64), strings.Repeat("x", 65), "01ARZ3NDEKTSV4RRFFQ69G5FAV", "x\n"}
	for _, c := range cases {
		if validID(c) != idRE.MatchString(c) {
			t.Errorf("validID(%q) = %v", c, validID(c))
		}
		if identifier(c) != identRE.MatchString(c) {
			t.Errorf("identifier(%q) = %v", c, identifier(c))
		}
	}
}
