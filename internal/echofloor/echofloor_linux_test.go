package echofloor_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/echofloor"
	"github.com/psych-runtime/psych/internal/testutil"
)

// TestSetupRoundTrips runs Setup's rt() in Python against Serve over a
// socket pair: every frame it sends comes back whole.
func TestSetupRoundTrips(t *testing.T) {
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		// CI's machine has it: scripts/deps.sh installs it.
		if testutil.InCI() {
			t.Fatalf("CI's machine has no /usr/bin/python3: %v", err)
		}
		testutil.Unavailable(t, "no /usr/bin/python3 here (scripts/deps.sh installs it): %v", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, child := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "child")
	defer host.Close()
	cmd := exec.Command(py, "-I", "-c", echofloor.Setup+"for _ in range(50):\n    rt()\nprint('ok')")
	cmd.ExtraFiles = []*os.File{child}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	served := make(chan error, 1)
	go func() { served <- echofloor.Serve(host, nil) }()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("python: %v\n%s", err, out.Bytes())
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out.String()) != "ok" {
		t.Fatalf("python printed %q", out.String())
	}
}
