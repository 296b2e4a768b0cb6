//go:build linux && cgo

package subprocess

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/psych-runtime/psych/sandbox/internal/pyfacts"
)

// resolvePython asks python3 on PATH for sys.executable, once.
func resolvePython() (string, error) {
	shim, err := exec.LookPath("python3")
	if err != nil {
		return "", fmt.Errorf("find python3 on PATH (set PythonBin): %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, shim, "-I", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "", fmt.Errorf("ask %s for sys.executable (set PythonBin): %w", shim, err)
	}
	exe := string(bytes.TrimSpace(out))
	if !filepath.IsAbs(exe) {
		return "", fmt.Errorf("%s reports sys.executable %q, not an absolute path (set PythonBin)", shim, exe)
	}
	return exe, nil
}

// learnPython returns what New needs to know about python (its prefixes
// and the bootstrap compiled by it), from the interpreter cache in cacheDir
// when it holds a trusted entry for this very interpreter file and
// bootstrap, else from one start of python (package pyfacts). A cache that
// cannot be used is bypassed and logged, never an error.
func learnPython(python, cacheDir string, log *slog.Logger) (pyfacts.Facts, error) {
	f, hit, err := pyfacts.Load(python, pyfacts.Options{Dir: cacheDir, Logger: log})
	if err != nil {
		return pyfacts.Facts{}, err
	}
	log.Debug("psych: interpreter facts", "python", python, "version", f.Version, "cached", hit)
	return f, nil
}

// interpreterError explains how to fix an interpreter the run user cannot use.
func interpreterError(python string, uid uint32, err error) error {
	return fmt.Errorf("interpreter %s cannot be used by run uid %d: %v; "+
		"set PythonBin (psych run --python) to an interpreter that uid can execute, "+
		"such as /usr/bin/python3, or install one outside private home directories", python, uid, err)
}
