//go:build linux && cgo

package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/test/contract"
)

// privateContainerd starts a containerd of the test's own (its own socket,
// root and state), imports the test image into it from make image's
// archive, and stops it, its shims and their mounts at the end. A test that
// kills a daemon kills only this one.
func privateContainerd(t *testing.T) (addr string, daemon *exec.Cmd) {
	t.Helper()
	engineOrSkip(t, Containerd) // the shared daemon, for the skip rule
	archives, _ := filepath.Glob("/var/cache/psych/image/*/image.tar")
	if len(archives) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("no image archive under /var/cache/psych/image: make image builds it")
		}
		t.Skip("no image archive under /var/cache/psych/image (make image builds it)")
	}
	dir, err := os.MkdirTemp("/var/lib", "psych-test-containerd-")
	if err != nil {
		t.Fatal(err)
	}
	// As /run/containerd and /var/lib/containerd are: the runs' user
	// namespaces must reach their rootfs below it.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	addr = filepath.Join(dir, "containerd.sock")
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), addr, addr+".ttrpc")
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	log, _ := os.Create(filepath.Join(dir, "containerd.log"))
	daemon = exec.Command("containerd", "-c", filepath.Join(dir, "config.toml"))
	daemon.Stdout, daemon.Stderr = log, log
	daemon.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		daemon.Process.Kill()
		daemon.Wait()
		// Its shims outlive it: they are started with its address.
		paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), addr) {
				var pid int
				fmt.Sscanf(p, "/proc/%d/cmdline", &pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(200 * time.Millisecond)
		exec.Command("umount", "-R", "-l", dir).Run()
		if err := os.RemoveAll(dir); err != nil {
			exec.Command("sh", "-c", "grep "+dir+" /proc/self/mountinfo | awk '{print $5}' | sort -r | xargs -r -n1 umount -l").Run()
			os.RemoveAll(dir)
		}
	})
	waitUntil(t, 30*time.Second, "the private containerd", func() bool {
		return exec.Command("ctr", "-a", addr, "version").Run() == nil
	})
	if out, err := exec.Command("ctr", "-a", addr, "-n", DefaultNamespace, "images", "import", archives[0]).CombinedOutput(); err != nil {
		t.Fatalf("import into the private containerd: %v: %s", err, out)
	}
	return addr, daemon
}

// TestContainerdKilledDuringRun: containerd dying mid-run ends Run with a
// host fault within the wall limit and a few seconds; it never hangs.
func TestContainerdKilledDuringRun(t *testing.T) {
	addr, daemon := privateContainerd(t)
	s := newTestSandbox(t, Containerd, Config{ContainerdAddress: addr})
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
	waitUntil(t, 30*time.Second, "the run to start", func() bool { return len(contract.ProcessesWith(m)) > 0 })
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
	daemon.Process.Kill()
	select {
	case o := <-done:
		if !errors.Is(o.err, sandbox.ErrHostFault) || o.res != nil {
			t.Fatalf("Run after containerd died: %+v, %v; want ErrHostFault", o.res, o.err)
		}
		t.Logf("Run returned %v after containerd died: %v", time.Since(killed), o.err)
	case <-time.After((wall + 5) * time.Second):
		t.Fatal("Run did not return within the wall limit and 5 s of containerd dying")
	}
	waitUntil(t, 10*time.Second, "the run's processes to end", func() bool { return len(contract.ProcessesWith(m)) == 0 })
}
