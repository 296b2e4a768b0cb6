package sandbox

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckFiles(t *testing.T) {
	caps := DefaultFileCaps
	deep := strings.TrimSuffix(strings.Repeat("d/", MaxPathDepth), "/")
	for _, tc := range []struct {
		name  string
		files []File
		tmp   int64
		ok    bool
		says  string
	}{
		{"plain", []File{{Path: "a.csv"}, {Path: "dir/b.csv", Mode: 0o755}}, 0, true, ""},
		{"deepest", []File{{Path: deep}}, 0, true, ""},
		{"longest component", []File{{Path: strings.Repeat("x", MaxPathComponent)}}, 0, true, ""},
		{"empty", []File{{Path: ""}}, 0, false, "empty"},
		{"absolute", []File{{Path: "/a"}}, 0, false, "absolute"},
		{"dot", []File{{Path: "."}}, 0, false, `"."`},
		{"dotdot", []File{{Path: ".."}}, 0, false, `".."`},
		{"dotdot below", []File{{Path: "a/../b"}}, 0, false, "clean"},
		{"dot slash", []File{{Path: "./a"}}, 0, false, "clean"},
		{"double slash", []File{{Path: "a//b"}}, 0, false, "clean"},
		{"trailing slash", []File{{Path: "a/"}}, 0, false, "clean"},
		{"nul", []File{{Path: "a\x00"}}, 0, false, "NUL"},
		{"not utf-8", []File{{Path: "a\xff"}}, 0, false, "UTF-8"},
		{"too deep", []File{{Path: deep + "/d"}}, 0, false, "deep"},
		{"long component", []File{{Path: strings.Repeat("x", MaxPathComponent+1)}}, 0, false, "component"},
		{"twice", []File{{Path: "a"}, {Path: "a"}}, 0, false, "twice"},
		{"below a file", []File{{Path: "a/b/c"}, {Path: "a"}}, 0, false, "below"},
		{"setuid", []File{{Path: "a", Mode: 0o4755}}, 0, false, "permission bits"},
		{"count", make([]File, caps.InCount+1), 0, false, "in_count"},
		{"bytes", []File{{Path: "a", Data: make([]byte, 10)}}, 0, true, ""},
		{"tmpfs", []File{{Path: "a", Data: make([]byte, 10)}}, 9, false, "tmp_bytes"},
	} {
		err := CheckFiles(tc.files, caps, tc.tmp)
		if tc.ok != (err == nil) || err != nil && (!errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("%s: CheckFiles = %v; want ok %v or ErrInvalidRequest saying %q", tc.name, err, tc.ok, tc.says)
		}
	}
	small := caps
	small.InBytes = 9
	if err := CheckFiles([]File{{Path: "a", Data: make([]byte, 5)}, {Path: "b", Data: make([]byte, 5)}}, small, 0); !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "in_bytes") {
		t.Errorf("10 bytes past an in_bytes cap of 9: %v", err)
	}
}

func TestFileCapsMerge(t *testing.T) {
	c := FileCaps{OutCount: 7}.Merge()
	if c.OutCount != 7 || c.InCount != DefaultFileCaps.InCount || c.CollectTime != DefaultFileCaps.CollectTime {
		t.Fatalf("Merge = %+v", c)
	}
	if err := (FileCaps{OutBytes: -1}).Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a negative cap: %v", err)
	}
}
