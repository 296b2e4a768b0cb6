//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package pyfacts

import (
	"fmt"
	"runtime"
)

// LoadFontList has nothing to key a font list on here (see load): there is
// none.
func LoadFontList(python string, prefixes []string, opts Options) (FontList, bool, error) {
	return FontList{}, false, fmt.Errorf("%w: no font list on %s", ErrNoMatplotlib, runtime.GOOS)
}
