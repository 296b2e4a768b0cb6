package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// Containerd is a containerd of the test's own: its own socket, root and
// state under Dir. A test that kills or restarts a daemon touches only
// this one.
type Containerd struct {
	Dir     string // its root, state, socket and log
	Address string // its gRPC socket
	cmd     *exec.Cmd
}

// StartContainerd starts a private containerd in a fresh directory under
// /var/lib named after prefix, and waits (30 s, scaled) until it answers.
// At the end of the test it stops the daemon, kills its shims (which
// outlive it) and unmounts and removes what they left. The caller applies
// its own skip rules first (root, a containerd binary, an image).
func StartContainerd(t testing.TB, prefix string) *Containerd {
	t.Helper()
	dir, err := os.MkdirTemp("/var/lib", prefix)
	if err != nil {
		t.Fatal(err)
	}
	// As /run/containerd and /var/lib/containerd are: the runs' user
	// namespaces must reach their rootfs below it.
	if err := os.Chmod(dir, 0o711); err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	d := &Containerd{Dir: dir, Address: filepath.Join(dir, "containerd.sock")}
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), d.Address, d.Address+".ttrpc")
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o644); err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.cmd != nil {
			d.Kill()
		}
		KillProcessesWith(dir) // its shims: started with its address
		time.Sleep(200 * time.Millisecond)
		exec.Command("umount", "-R", "-l", dir).Run()
		unmountUnder(dir)
		os.RemoveAll(dir)
	})
	d.Start(t)
	return d
}

// Start starts the daemon (again, after Kill) and waits until it answers.
func (d *Containerd) Start(t testing.TB) {
	t.Helper()
	log, _ := os.OpenFile(filepath.Join(d.Dir, "containerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	d.cmd = exec.Command("containerd", "-c", filepath.Join(d.Dir, "config.toml"))
	d.cmd.Stdout, d.cmd.Stderr = log, log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	err := d.cmd.Start()
	if log != nil {
		log.Close() // the daemon has its own
	}
	if err != nil {
		t.Fatal(err)
	}
	WaitFor(t, 30*time.Second, "the private containerd", func() bool {
		return exec.Command("ctr", "-a", d.Address, "version").Run() == nil
	})
}

// Process is the running daemon's process.
func (d *Containerd) Process() *os.Process { return d.cmd.Process }

// Kill kills the daemon (not its shims) and reaps it.
func (d *Containerd) Kill() {
	d.cmd.Process.Kill()
	d.cmd.Wait()
}

// Import imports an image archive into the daemon's namespace ns.
func (d *Containerd) Import(t testing.TB, ns, archive string) {
	t.Helper()
	if out, err := exec.Command("ctr", "-a", d.Address, "-n", ns, "images", "import", archive).CombinedOutput(); err != nil {
		t.Fatalf("import into the private containerd: %v: %s", err, out)
	}
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return
	}
	var points []string
	for _, m := range mounts {
		points = append(points, m.Mountpoint)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		unix.Unmount(p, unix.MNT_DETACH)
	}
}
