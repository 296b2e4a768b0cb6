//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pyfacts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"

	"github.com/psych-runtime/psych/internal/eintr"
	"golang.org/x/sys/unix"
)

// fontRoots are the directories whose state a font list depends on beyond
// matplotlib's own fonts: fontconfig's settings (all of /etc/fonts) and
// the system's font trees (their directories: adding, removing or
// replacing a font changes one's mtime).
var fontRoots = []string{"/etc/fonts", "/usr/share/fontconfig", "/usr/share/fonts", "/usr/local/share/fonts"}

// maxFontDirs bounds the directories walked for a font list's key; a host
// with more gets no font list.
const maxFontDirs = 4096

// fontFormat changes whenever a font list entry's layout or key does.
const fontFormat = 1

// LoadFontList returns matplotlib's font list for the interpreter python,
// whose prefixes are its Facts' (Load): from the cache (LoadBlob's
// directory and trust rules) when an entry for this very state is there
// and passes FontList's checks, else built by one trusted start of python
// (FontList) and cached. The entry is keyed on the interpreter file after
// symlinks (its identity, the virtualenv's pyvenv.cfg), the prefixes,
// matplotlib's package files (where the prefixes' site directories hold
// one) and the state of fontRoots and matplotlib's own fonts: a changed
// interpreter, matplotlib or font tree is a miss. What the key cannot
// see: a matplotlib reached only through a .pth file or the user's site
// (then there is no list: ErrNoMatplotlib), a font directory configured
// outside fontRoots.
//
// ErrNoMatplotlib: no matplotlib where it is looked for, and nothing was
// started. An interpreter whose matplotlib fails to import, or a list that
// fails the checks, is an error; the caller runs without a list.
func LoadFontList(python string, prefixes []string, opts Options) (FontList, bool, error) {
	if err := opts.check(); err != nil {
		return FontList{}, false, err
	}
	abs, err := filepath.Abs(python)
	if err != nil {
		return FontList{}, false, fmt.Errorf("resolve interpreter %s: %w", python, err)
	}
	name, key, err := fontListKey(abs, prefixes)
	if err != nil {
		return FontList{}, false, err
	}
	var built FontList
	build := func() ([]byte, error) {
		fl, err := buildFontList(abs)
		if err != nil {
			return nil, err
		}
		built = fl
		return fl.encode()
	}
	var served FontList
	check := func(b []byte) (err error) {
		served, err = decodeFontList(b)
		return err
	}
	_, hit, err := LoadBlob(opts, name, key, build, check)
	if err != nil {
		return FontList{}, false, err
	}
	if hit {
		return served, true, nil
	}
	return built, false, nil
}

// fontListKey is the blob name and key of python's font list.
func fontListKey(abs string, prefixes []string) (name, key string, err error) {
	k, err := identify(abs)
	if err != nil {
		return "", "", err
	}
	pkgs := matplotlibDirs(prefixes)
	if len(pkgs) == 0 {
		return "", "", fmt.Errorf("%w: none in the site directories of %s's prefixes", ErrNoMatplotlib, abs)
	}
	var state []string
	for _, p := range pkgs {
		for _, f := range []string{p, filepath.Join(p, "__init__.py"), filepath.Join(p, "font_manager.py"), filepath.Join(p, "_version.py")} {
			state = append(state, fileState(f))
		}
	}
	roots := slices.Clone(fontRoots)
	for _, p := range pkgs {
		roots = append(roots, filepath.Join(p, "mpl-data", "fonts"))
	}
	dirs := 0
	for _, r := range roots {
		all := r == "/etc/fonts" // settings: every file; font trees: directories
		err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				state = append(state, p+" unreadable")
				return nil
			}
			if d.IsDir() {
				if dirs++; dirs > maxFontDirs {
					return fmt.Errorf("over %d font directories", maxFontDirs)
				}
			} else if !all {
				return nil
			}
			state = append(state, fileState(p))
			return nil
		})
		if err != nil {
			return "", "", fmt.Errorf("font list key: %w", err)
		}
	}
	sum := sha256.New()
	desc, _ := json.Marshal(struct {
		Format   int       `json:"format"`
		Real     string    `json:"real"`
		File     fileID    `json:"file"`
		Venv     [2]fileID `json:"venv"`
		Prefixes []string  `json:"prefixes"`
		State    []string  `json:"state"`
	}{fontFormat, k.Real, k.File, k.Venv, prefixes, state})
	sum.Write(desc)
	key = hex.EncodeToString(sum.Sum(nil))
	id := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%q", k.Real, prefixes)))
	return "matplotlib-fonts-" + hex.EncodeToString(id[:8]), key, nil
}

// matplotlibDirs are the matplotlib packages in the site directories of
// the prefixes (Debian's dist-packages, /usr/local's too where a prefix is
// /usr), sorted.
func matplotlibDirs(prefixes []string) []string {
	var bases []string
	for _, p := range prefixes {
		bases = append(bases, p)
		if p == "/usr" {
			bases = append(bases, "/usr/local")
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, b := range bases {
		for _, pat := range []string{"lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages", "lib64/python3*/site-packages"} {
			sites, _ := filepath.Glob(filepath.Join(b, pat))
			for _, s := range sites {
				p := filepath.Join(s, "matplotlib")
				var st unix.Stat_t
				if seen[p] || unix.Stat(filepath.Join(p, "font_manager.py"), &st) != nil {
					continue
				}
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// fileState is a path and its identity (lstat), or "absent".
func fileState(p string) string {
	var st unix.Stat_t
	if err := eintr.Retry(func() error { return unix.Lstat(p, &st) }); err != nil {
		return p + " absent"
	}
	id := idOf(&st)
	return fmt.Sprintf("%s %d %d %d %o %d %d", p, id.Dev, id.Ino, id.Size, id.Mode, id.MtimeNS, id.CtimeNS)
}
