// Package testutil is psych's test support: the test interpreter and image,
// whether the tests run in CI, the root rule, waiting, process markers, a
// private containerd, one registry of re-exec helpers, and what a run's
// tests set on the host for a program to reach (public directories, a host
// service, Python's t(f)).
//
// Only _test.go files and packages under test/ import it
// (test/importrules enforces this). It imports nothing of psych, so that
// every package's own tests can use it.
package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// PythonEnv and ImageEnv name the interpreter and the image under
	// test, for a test that passes them on to a process it starts.
	PythonEnv = "PSYCH_TEST_PYTHON"
	ImageEnv  = "PSYCH_TEST_IMAGE"
	// DefaultPython is the interpreter the tests run where
	// PSYCH_TEST_PYTHON is unset: the system's, never a PATH lookup (which
	// may find a slow shim).
	DefaultPython = "/usr/bin/python3"
	// DefaultImage is the container image the tests run where
	// PSYCH_TEST_IMAGE is unset: psych's own (make image builds it).
	DefaultImage = "localhost/psych-python:3.11"
)

// Python is the interpreter under test: PSYCH_TEST_PYTHON, else
// DefaultPython. It does not check that the file exists (RequirePython
// does).
func Python() string {
	if p := os.Getenv(PythonEnv); p != "" {
		return p
	}
	return DefaultPython
}

// RequirePython returns Python, after checking that it exists: where it
// does not, the test fails in CI (which installs it) and skips elsewhere,
// saying why.
func RequirePython(t testing.TB) string {
	t.Helper()
	p := Python()
	if _, err := os.Stat(p); err != nil {
		if InCI() {
			t.Fatalf("no Python interpreter at %s (PSYCH_TEST_PYTHON); CI installs one: %v", p, err)
		}
		t.Skipf("needs a Python interpreter at %s (set PSYCH_TEST_PYTHON): %v", p, err)
	}
	return p
}

// Image is the container image under test: PSYCH_TEST_IMAGE, else
// DefaultImage.
func Image() string {
	if v := os.Getenv(ImageEnv); v != "" {
		return v
	}
	return DefaultImage
}

// InCI reports whether the tests run in CI (CI set, as CI sets CI=true).
// There a missing engine, image, interpreter or root is a failure, never a
// skip: a skip in CI would hide a broken sandbox.
func InCI() bool {
	return os.Getenv("CI") != ""
}

// RequireRoot ends the test unless it runs as root: it fails in CI (which
// runs as root) and skips elsewhere, both saying why the test needs root.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	requireRoot(t, why, os.Geteuid(), InCI())
}

func requireRoot(t testing.TB, why string, euid int, ci bool) {
	t.Helper()
	if euid == 0 {
		return
	}
	if ci {
		t.Fatalf("needs root (%s), and CI runs as root: uid %d", why, euid)
	}
	t.Skipf("needs root: %s (uid %d)", why, euid)
}

// TimeScale is PSYCH_TIME_SCALE where it is a positive number, else 1: the
// factor by which tests on a slow host (an emulated VM) stretch time bounds.
func TimeScale() float64 {
	if v, err := strconv.ParseFloat(os.Getenv("PSYCH_TIME_SCALE"), 64); err == nil && v > 0 {
		return v
	}
	return 1
}

// Scaled is d stretched by TimeScale.
func Scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * TimeScale())
}

// WaitFor polls cond every 10 ms until it holds, and fails the test if it
// does not within timeout (stretched by TimeScale), naming what it waited
// for.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	timeout = Scaled(timeout)
	for end := time.Now().Add(timeout); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// HostLaneOnly reports, and logs, that t is the host lane's and not the
// VM lane's (test/vm sets PSYCH_TEST_LANE=vm): a test the emulated kernel
// cannot finish within the lane's bounds, or that needs what its rootfs
// does not have. The caller returns when it is true. It logs one
// "PSYCH-HOST-LANE-ONLY: <test>" line, which the VM lane compares with its
// own list (test/vm/run.sh, VM_HOST_ONLY) and fails on any difference: a
// test leaves that lane only by being named there, never by skipping.
func HostLaneOnly(t testing.TB, why string) bool {
	t.Helper()
	if os.Getenv("PSYCH_TEST_LANE") != "vm" {
		return false
	}
	t.Logf("the VM lane does not run this test (%s); the host lane does", why)
	fmt.Printf("PSYCH-HOST-LANE-ONLY: %s\n", t.Name())
	return true
}

// Unavailable ends the test for want of something CI's machine always has
// (a pseudo-terminal, dpkg, a trust store, the image archive): it fails in
// CI and skips elsewhere, saying what is missing.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI's machine has this, so it may not be missing: "+format, args...)
	}
	t.Skipf(format, args...)
}

// RequireMatplotlib ends the test where the interpreter py cannot import
// matplotlib. Debian's has it in CI (scripts/deps.sh installs
// python3-matplotlib), so there it fails (Unavailable); pyenv's builds,
// which make test also runs some tests on, cannot have it (no package
// downloads here) and skip, saying so.
func RequireMatplotlib(t testing.TB, py string) {
	t.Helper()
	if err := exec.Command(py, "-c", "import matplotlib").Run(); err != nil {
		if !strings.HasPrefix(py, "/usr/bin/") {
			t.Skipf("%s has no matplotlib (only Debian's interpreter gets it): %v", py, err)
		}
		Unavailable(t, "the interpreter has no matplotlib: %v", err)
	}
}
