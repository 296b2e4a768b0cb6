//go:build linux && cgo

package subprocess

import (
	"errors"
	"log/slog"
	"path"

	"github.com/psych-runtime/psych/bootstrap"
	"github.com/psych-runtime/psych/internal/reexec"
	"github.com/psych-runtime/psych/sandbox/internal/pyfacts"
)

// fontconfigEtc is fontconfig's settings, handed in read-only where the
// host has them: without them fc-list, which matplotlib runs when it
// builds its font list, prints "Fontconfig error: Cannot load default
// config file" and finds no fonts of its own. They name font directories
// and rules, nothing of a user's.
const fontconfigEtc = "/etc/fonts"

// learnFonts returns matplotlib's font list for python as the host built
// it (pyfacts.LoadFontList: cached beside the interpreter's facts), for
// every viewed run to find read-only in bootstrap.FontsDir; nil where
// there is none to give: no matplotlib, the cache off (CacheDir "-": the
// list is not built at each New), a probe that failed, or a list naming a
// font outside the view (the run could not open it). Without it a run
// that imports matplotlib builds its own list, as it would anyway.
func learnFonts(python string, prefixes []string, v *view, cacheDir string, log *slog.Logger) *pyfacts.FontList {
	if cacheDir == pyfacts.NoCache {
		return nil
	}
	fl, hit, err := pyfacts.LoadFontList(python, prefixes, pyfacts.Options{Dir: cacheDir, Logger: log})
	switch {
	case errors.Is(err, pyfacts.ErrNoMatplotlib):
		log.Debug("psych: no matplotlib font list for the runs", "python", python, "why", err)
		return nil
	case err != nil:
		log.Warn("psych: no matplotlib font list for the runs: a run that imports matplotlib builds its own", "python", python, "err", err)
		return nil
	}
	for _, f := range fl.Fonts {
		if !v.covers(f) {
			log.Warn("psych: no matplotlib font list for the runs: it names a font outside the run's view", "python", python, "font", f)
			return nil
		}
	}
	log.Debug("psych: matplotlib font list", "python", python, "name", fl.Name, "fonts", len(fl.Fonts), "cached", hit)
	return &fl
}

// fontMounts put the font list, read-only, into a viewed run's
// bootstrap.FontsDir; none without one.
func fontMounts(fl *pyfacts.FontList) []reexec.Mount {
	if fl == nil {
		return nil
	}
	return []reexec.Mount{
		{Kind: reexec.Mkdir, Target: bootstrap.FontsDir, Mode: 0o755},
		{Kind: reexec.File, Target: path.Join(bootstrap.FontsDir, fl.Name), Mode: 0o444, Data: fl.Data},
	}
}
