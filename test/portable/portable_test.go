// Package portable checks sandbox/doc.go's rule that every package builds on
// any GOOS and without cgo, and that a Linux-only backend's stub refuses to
// construct rather than pretend.
package portable

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func goCmd(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestBuilds(t *testing.T) {
	for _, env := range [][]string{
		{"GOOS=darwin", "GOARCH=arm64"},
		{"GOOS=windows", "GOARCH=amd64"},
		{"GOOS=linux", "CGO_ENABLED=0"},
	} {
		if out, err := goCmd(t, env, "build", "./..."); err != nil {
			t.Errorf("%s go build ./...: %v\n%s", strings.Join(env, " "), err, out)
		}
	}
	// The tests too: a test file of a Linux-only backend carries its build
	// constraint.
	if out, err := goCmd(t, []string{"GOOS=linux", "CGO_ENABLED=0"}, "vet", "./..."); err != nil {
		t.Errorf("CGO_ENABLED=0 go vet ./...: %v\n%s", err, out)
	}
}

// TestStubsRefuse runs a program built without cgo: the backends' stubs must
// return a configuration error from New.
func TestStubsRefuse(t *testing.T) {
	out, err := goCmd(t, []string{"CGO_ENABLED=0"}, "run", "./test/portable/stub")
	if err != nil {
		t.Fatalf("stub program: %v\n%s", err, out)
	}
	for _, backend := range []string{"subprocess", "container"} {
		if !strings.Contains(out, backend+": refused: invalid sandbox configuration") {
			t.Errorf("the %s stub did not refuse: %s", backend, out)
		}
	}
}
