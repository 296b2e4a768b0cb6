package jsonfold

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestKeyIsEqualFold checks Key against strings.EqualFold over every pair
// of a set of runes with unusual foldings, and against encoding/json's own
// matching of a key to a field.
func TestKeyIsEqualFold(t *testing.T) {
	runes := []string{"s", "S", "ſ", "k", "K", "K", "i", "I", "İ", "ı", "σ", "ς", "Σ", "ß", "ẞ", "µ", "μ", "Μ", "a", "\uFFFD"}
	for _, a := range runes {
		for _, b := range runes {
			x, y := "x"+a+"y", "X"+b+"Y"
			if got, want := Key(x) == Key(y), strings.EqualFold(x, y); got != want {
				t.Errorf("Key(%q) == Key(%q) is %v, EqualFold says %v", x, y, got, want)
			}
		}
	}
	var v struct {
		Seconds int `json:"seconds"`
	}
	if err := json.Unmarshal([]byte(`{"ſeconds":7}`), &v); err != nil || v.Seconds != 7 {
		t.Fatalf("encoding/json no longer matches ſeconds to seconds (%v, %d): revisit Key", err, v.Seconds)
	}
	if Key("ſeconds") != Key("seconds") {
		t.Errorf("Key keeps ſeconds and seconds apart; encoding/json does not")
	}
}
