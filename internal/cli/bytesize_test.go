package cli

import "testing"

func TestParseByteSize(t *testing.T) {
	good := map[string]int64{"0": 0, "1024": 1024, "4KiB": 4096, "512MiB": 512 << 20, "2GiB": 2 << 30, " 3 MiB": 3 << 20}
	for in, want := range good {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5MiB", "10XB", "MiB", "1e6", "9223372036854775807GiB", "12 KB"} {
		if got, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q) = %d, want an error", in, got)
		}
	}
}
