package setup

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/psych-runtime/psych/sandbox"
)

// fields is a Config's shared fields, as a backend's would be.
type fields struct {
	limits              sandbox.Limits
	env                 []string
	tmpBytes, tmpInodes int64
	files               sandbox.FileCaps
	out, frame          int
	log                 *slog.Logger
}

func (f *fields) common(minBytes, minInodes int64) Common {
	return Common{DefaultLimits: &f.limits, EnvAllowlist: f.env, TmpBytes: &f.tmpBytes, TmpInodes: &f.tmpInodes,
		Files: &f.files, MaxOutputBytes: &f.out, MaxFrameBytes: &f.frame, Logger: &f.log,
		MinTmpBytes: minBytes, MinTmpInodes: minInodes}
}

func TestCommonDefaults(t *testing.T) {
	var f fields
	f.out = 7
	f.common(0, 0).Defaults()
	if f.limits != (sandbox.Limits{}).Merge(sandbox.DefaultLimits()) || f.files != sandbox.DefaultFileCaps || f.log == nil {
		t.Errorf("zero limits, file caps or logger not filled: %+v", f)
	}
	if f.tmpBytes != DefaultTmpBytes || f.tmpInodes != DefaultTmpInodes || f.frame != DefaultMaxFrameBytes {
		t.Errorf("zero tmp or frame cap not filled: %+v", f)
	}
	if f.out != 7 {
		t.Errorf("a set output cap changed to %d", f.out)
	}
}

func TestCommonChecks(t *testing.T) {
	for name, tc := range map[string]struct {
		set                 func(*fields)
		minBytes, minInodes int64
	}{
		"reserved env":     {set: func(f *fields) { f.env = []string{"PATH"} }},
		"negative output":  {set: func(f *fields) { f.out = -1 }},
		"small frame":      {set: func(f *fields) { f.frame = MinFrameBytes - 1 }},
		"negative tmp":     {set: func(f *fields) { f.tmpBytes = -1 }},
		"tmp below least":  {set: func(f *fields) { f.tmpBytes = 1 << 19 }, minBytes: 1 << 20},
		"inodes below":     {set: func(f *fields) { f.tmpInodes = 63 }, minInodes: 64},
		"bad limits":       {set: func(f *fields) { f.limits.WallSeconds = -1 }},
		"negative file in": {set: func(f *fields) { f.files.InCount = -1 }},
	} {
		var f fields
		tc.set(&f)
		c := f.common(tc.minBytes, tc.minInodes)
		c.Defaults()
		if err := Validate(c.Checks()...); !errors.Is(err, sandbox.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	var f fields
	f.tmpBytes = 1 << 19
	c := f.common(0, 0)
	c.Defaults()
	if err := Validate(c.Checks()...); err != nil {
		t.Errorf("defaults with a small tmpfs where any is allowed: %v", err)
	}
}
