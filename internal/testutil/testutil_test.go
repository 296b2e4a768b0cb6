package testutil

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func init() {
	Register("echo-arg", func(arg string) int {
		print(arg)
		return 7
	})
}

func TestMain(m *testing.M) { Main(m) }

// A helper runs in place of the tests, sees its argument and exits with
// its code; a name nobody registered exits 2 before any test runs.
func TestHelperCommand(t *testing.T) {
	out, err := HelperCommand("echo-arg", "some mode").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 || string(out) != "some mode" {
		t.Fatalf("helper: %q, %v; want exit 7 and its argument", out, err)
	}
	out, err = HelperCommand("nobody", "").CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), `no helper "nobody"`) || strings.Contains(string(out), "PASS") {
		t.Fatalf("unknown helper: %q, %v; want exit 2 naming it, and no tests run", out, err)
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a second helper of the same name was accepted")
		}
	}()
	Register("echo-arg", func(string) int { return 0 })
}

// fakeTB records how a require function ended the test.
type fakeTB struct {
	testing.TB
	ended string
}

type ended struct{}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.ended = "fail"
	panic(ended{})
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.ended = "skip"
	panic(ended{})
}

func run(f func(tb testing.TB)) string {
	tb := &fakeTB{}
	func() {
		defer func() {
			if r := recover(); r != nil && r != (ended{}) {
				panic(r)
			}
		}()
		f(tb)
	}()
	return tb.ended
}

// Not root: CI fails (it runs as root, so a skip would hide a test), a
// developer's host skips; root goes on.
func TestRequireRoot(t *testing.T) {
	for _, c := range []struct {
		euid int
		ci   bool
		want string
	}{{1000, true, "fail"}, {1000, false, "skip"}, {0, true, ""}, {0, false, ""}} {
		if got := run(func(tb testing.TB) { requireRoot(tb, "test", c.euid, c.ci) }); got != c.want {
			t.Errorf("uid %d, CI %v: %q, want %q", c.euid, c.ci, got, c.want)
		}
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("PSYCH_TEST_PYTHON", "")
	t.Setenv("PSYCH_TEST_IMAGE", "")
	t.Setenv("PSYCH_TIME_SCALE", "")
	if Python() != DefaultPython || Image() != DefaultImage || TimeScale() != 1 {
		t.Fatalf("defaults: %q %q %v", Python(), Image(), TimeScale())
	}
	t.Setenv("PSYCH_TEST_PYTHON", "/nonexistent/python")
	t.Setenv("PSYCH_TEST_IMAGE", "example/image:1")
	t.Setenv("PSYCH_TIME_SCALE", "3")
	if Python() != "/nonexistent/python" || Image() != "example/image:1" || TimeScale() != 3 {
		t.Fatalf("set: %q %q %v", Python(), Image(), TimeScale())
	}
	t.Setenv("CI", "true")
	if !InCI() || run(func(tb testing.TB) { RequirePython(tb) }) != "fail" {
		t.Fatal("CI with no interpreter does not fail")
	}
	t.Setenv("CI", "")
	if InCI() || run(func(tb testing.TB) { RequirePython(tb) }) != "skip" {
		t.Fatal("no interpreter outside CI does not skip")
	}
}

func TestMarkers(t *testing.T) {
	m := NewMarker("psych-testutil-")
	if len(m) != len("psych-testutil-")+16 || m == NewMarker("psych-testutil-") {
		t.Fatalf("marker %q", m)
	}
	cmd := exec.Command("sh", "-c", "sleep 60; true", m)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	if got := ProcessesWith(m); len(got) != 1 {
		t.Fatalf("ProcessesWith: %v, want the sleeper", got)
	}
	KillProcessesWith(m, "sh")
	cmd.Wait()
	WaitFor(t, 5e9, "the sleeper to go", func() bool { return len(ProcessesWith(m)) == 0 })
}

func TestNullDeviceIntact(t *testing.T) {
	if err := NullDeviceIntact("/dev/null"); err != nil {
		t.Fatalf("this host's /dev/null: %v", err)
	}
	f := filepath.Join(t.TempDir(), "null")
	if err := os.WriteFile(f, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := NullDeviceIntact(f); err == nil {
		t.Error("a regular file passed for the null device")
	}
	if err := NullDeviceIntact("/dev/zero"); err == nil {
		t.Error("/dev/zero passed for the null device")
	}
}
