//go:build linux && cgo

package subprocess

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/pyfacts"
	"github.com/psych-runtime/psych/test/contract"
)

// matrixCases is the contract suite's subset every interpreter runs:
// values, tracebacks, bindings, limits and hostile programs.
var matrixCases = []string{
	"Values", "FailureTraceback", "TracebackShowsSource", "SyntaxError", "Exits", "Environment",
	"Bindings", "BindingLoop", "BindingError", "UnknownName",
	"CPULimit", "WallLimit", "AddressSpace", "AddressSpaceCaught", "FileSize", "ThreadBomb", "ThreadsFitDefaults",
	"Hostile", "ForgedResult", "RecursionTraceback", "PatchedBuiltins", "LoneSurrogates",
}

// matrixMinors are the CPython minor versions this machine kind has:
// Debian's 3.11 and pyenv's 3.8, 3.9, 3.10, 3.12 and 3.13.
var matrixMinors = []string{"3.8", "3.9", "3.10", "3.11", "3.12", "3.13"}

// pyenvRoot is pyenv's root, or "" without pyenv.
func pyenvRoot() string {
	if r := os.Getenv("PYENV_ROOT"); r != "" {
		return r
	}
	if out, err := exec.Command("pyenv", "root").Output(); err == nil {
		return strings.TrimSpace(string(out))
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".pyenv")
	}
	return ""
}

// matrixPythons finds an interpreter for each minor version: pyenv's
// newest release of that minor (by number), else the system's python3.M.
func matrixPythons(t *testing.T) map[string]string {
	found := map[string]string{}
	root := pyenvRoot()
	dirs, _ := filepath.Glob(filepath.Join(root, "versions", "3.*"))
	patch := map[string]int{} // the patch release found for each minor
	for _, d := range dirs {
		parts := strings.SplitN(filepath.Base(d), ".", 3)
		if len(parts) < 3 {
			continue
		}
		p, err := strconv.Atoi(parts[2])
		minor := parts[0] + "." + parts[1]
		exe := filepath.Join(d, "bin", "python"+minor)
		if _, serr := os.Stat(exe); err != nil || serr != nil {
			continue
		}
		if old, ok := patch[minor]; !ok || p > old { // the newest: 3.9.18 over 3.9.9
			found[minor], patch[minor] = exe, p
		}
	}
	for _, m := range matrixMinors {
		if _, ok := found[m]; !ok {
			if p, err := exec.LookPath("/usr/bin/python" + m); err == nil {
				found[m] = p
			}
		}
	}
	return found
}

// TestInterpreterMatrix runs matrixCases with every CPython of matrixMinors.
// CI's machine has them all (pyenv's); elsewhere a missing one is not run,
// and the log says so.
func TestInterpreterMatrix(t *testing.T) {
	requireRoot(t) // pyenv's interpreters live under /root
	pythons := matrixPythons(t)
	for _, minor := range matrixMinors {
		python, ok := pythons[minor]
		if !ok {
			// Not a skip: the qemu lane, which allows none, has Debian's
			// 3.11 alone.
			if testutil.InCI() {
				t.Errorf("CI's machine has no Python %s (pyenv root %q)", minor, pyenvRoot())
			}
			t.Logf("no Python %s here (pyenv root %q): not run", minor, pyenvRoot())
			continue
		}
		if same(python, testPython()) {
			t.Logf("Python %s is %s, which runs the whole suite (TestContract)", minor, python)
			continue
		}
		t.Run(minor, func(t *testing.T) {
			t.Logf("python %s", python)
			contract.Run(t, contract.Backend{
				New: func(t *testing.T, opts contract.Options) sandbox.Sandbox {
					return newTestSandbox(t, Config{PythonBin: python, EnvAllowlist: opts.EnvAllowlist})
				},
				SandboxEnv: []string{"MALLOC_ARENA_MAX", "LC_ALL"},
				Cases:      matrixCases,
			})
		})
	}
}

// same reports whether two paths name one file.
func same(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// TestOldPythonRefused: an interpreter older than the bootstrap serves is
// refused by New with a clear error, not at its first run.
func TestOldPythonRefused(t *testing.T) {
	requireRoot(t)
	root := pyenvRoot()
	olds, _ := filepath.Glob(filepath.Join(root, "versions", "3.[0-7].*", "bin", "python3"))
	if len(olds) == 0 {
		if testutil.InCI() {
			t.Fatalf("CI's machine has pyenv's 3.6 and 3.7, but none was found under %s", root)
		}
		// Not a skip: the qemu lane, which allows none, has no pyenv.
		t.Logf("no Python older than %s under %s: nothing to refuse here", pyfacts.MinPython, root)
		return
	}
	for _, old := range olds {
		_, err := New(Config{PythonBin: old})
		if !errors.Is(err, sandbox.ErrInvalidConfig) || !errors.Is(err, pyfacts.ErrUnsupportedPython) || !strings.Contains(err.Error(), pyfacts.MinPython) {
			t.Errorf("New with %s: %v; want ErrInvalidConfig naming Python %s", old, err, pyfacts.MinPython)
		}
	}
}
