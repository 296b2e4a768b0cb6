//go:build linux && cgo

package container

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/test/contract"
)

// privateContainerd starts a containerd of the test's own (its own socket,
// root and state), imports the test image into it from make image's
// archive, and stops it, its shims and their mounts at the end. A test that
// kills a daemon kills only this one.
func privateContainerd(t *testing.T) *testutil.Containerd {
	t.Helper()
	engineOrSkip(t, Containerd) // the shared daemon, for the skip rule
	archives, _ := filepath.Glob("/var/cache/psych/image/*/image.tar")
	if len(archives) == 0 {
		if testutil.InCI() {
			t.Fatal("no image archive under /var/cache/psych/image: make image builds it")
		}
		testutil.Unavailable(t, "no image archive under /var/cache/psych/image (make image builds it)")
	}
	d := testutil.StartContainerd(t, "psych-test-containerd-")
	d.Import(t, DefaultNamespace, archives[0])
	return d
}

// TestContainerdKilledDuringRun: containerd dying mid-run ends Run with a
// host fault within the wall limit and a few seconds; it never hangs.
func TestContainerdKilledDuringRun(t *testing.T) {
	daemon := privateContainerd(t)
	s := newTestSandbox(t, Containerd, Config{ContainerdAddress: daemon.Address})
	m := contract.Marker()
	type outcome struct {
		res *sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	const wall = 10
	go func() {
		res, err := s.Run(context.Background(), sandbox.Request{Code: sleeperCode(m, 300) + "time.sleep(300)", Limits: sandbox.Limits{WallSeconds: wall}})
		done <- outcome{res, err}
	}()
	testutil.WaitFor(t, 30*time.Second, "the run to start", func() bool { return len(contract.ProcessesWith(m)) > 0 })
	// The dead daemon never removes this run's cgroups; the test does.
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(contract.ProcessesWith(m)[0]), "cgroup")); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if f := strings.SplitN(l, ":", 3); len(f) == 3 && strings.Contains(f[2], "/psych-") {
				name := filepath.Base(f[2])
				t.Cleanup(func() {
					dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + DefaultNamespace + "/" + name)
					for _, d := range dirs {
						syscall.Rmdir(d)
					}
				})
				break
			}
		}
	}
	killed := time.Now()
	daemon.Process().Kill()
	select {
	case o := <-done:
		if !errors.Is(o.err, sandbox.ErrHostFault) || o.res != nil {
			t.Fatalf("Run after containerd died: %+v, %v; want ErrHostFault", o.res, o.err)
		}
		t.Logf("Run returned %v after containerd died: %v", time.Since(killed), o.err)
	case <-time.After((wall + 5) * time.Second):
		t.Fatal("Run did not return within the wall limit and 5 s of containerd dying")
	}
	testutil.WaitFor(t, 10*time.Second, "the run's processes to end", func() bool { return len(contract.ProcessesWith(m)) == 0 })
}
