//go:build linux && cgo

package subprocess

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/reexec"
	"github.com/psych-runtime/psych/sandbox/internal/attest"
	"github.com/psych-runtime/psych/sandbox/internal/resources"
	"github.com/psych-runtime/psych/seccomp"
)

// fallback is what a run gets where no user namespace can be had and
// Config.AllowFallback asked for the fallback, beyond the rlimits, the uid
// drop and psych's filter: Landlock confining its files, and a filter that
// refuses IPv4 and IPv6 sockets unless the request grants the network.
type fallback struct {
	// handled is the file-system accesses the run's Landlock domain
	// handles; zero where the kernel lacks Landlock (files unconfined).
	handled uint64
	// paths are what the run may reach but its own directory: the
	// interpreter's trees, the host files a view also hands in, and the
	// /dev nodes.
	paths []reexec.LandlockPath
	// netPaths are the host's resolver configuration, for a run granted
	// the network.
	netPaths []reexec.LandlockPath
	// noInet is psych's filter with AF_INET and AF_INET6 refused.
	noInet *seccomp.Filter
	// rootNS: a root host that makes the network, pid, ipc, uts, mount and
	// cgroup namespaces without a user namespace, and builds the view.
	rootNS bool
}

// rootNamespaces reports why this process cannot make a run's namespaces
// without a user namespace and hand it the interpreter's trees (nil where
// it can): it clones a tree, as a view's binds do, and starts `true` in
// new network, pid, ipc, uts, mount and cgroup namespaces.
func rootNamespaces() error {
	if testNoUserns {
		// psych's own tests on a root host with user namespaces.
		if testNoRootNS {
			return fmt.Errorf("no namespaces without a user namespace (psych's test)")
		}
		return nil
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	unix.Close(fd)
	truePath, err := exec.LookPath("true")
	if err != nil {
		truePath = "/bin/true"
	}
	cmd := exec.Command(truePath)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWNET | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("namespaces without a user namespace: %w", err)
	}
	return nil
}

// testNoUserns makes New take the fallback as if the probe had found no
// user namespace, and testNoRootNS as if a root host could make no other
// namespace without one: set by the package's tests only, before New.
var testNoUserns, testNoRootNS bool

// fallbackDevices are the /dev nodes a run gets, as in a view.
var fallbackDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// newFallback works out the fallback's rules for python, whose prefixes
// learnPython found (none where it failed: the trees beside the
// interpreter then serve).
func newFallback(python string, prefixes []string) (fallback, error) {
	var fb fallback
	p := seccomp.Default()
	p.RefuseInet()
	var err error
	if fb.noInet, err = p.Compile(); err != nil {
		return fb, fmt.Errorf("compile the fallback's filter: %w", err)
	}
	fb.handled = attest.LandlockHandledFS(attest.LandlockABI())
	if fb.handled == 0 {
		return fb, nil
	}
	exe, err := filepath.EvalSymlinks(python)
	if err != nil {
		return fb, fmt.Errorf("resolve interpreter %s: %w", python, err)
	}
	add := func(to *[]reexec.LandlockPath, path string, access uint64) {
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return
		}
		a, ok := attest.LandlockRule(real, access, fb.handled)
		if !ok || slices.ContainsFunc(fb.paths, func(l reexec.LandlockPath) bool { return within(real, l.Path) && a&^l.Access == 0 }) {
			return // nothing, or nothing more than a path above it gives
		}
		*to = append(*to, reexec.LandlockPath{Path: real, Access: a})
	}
	// The library and program trees (a merged /usr's links resolve into
	// it), the interpreter's own directory and prefixes.
	for _, r := range append(slices.Clone(standardRoots), append([]string{filepath.Dir(exe)}, prefixes...)...) {
		if r != "/" {
			add(&fb.paths, r, attest.LandlockExec)
		}
	}
	// The loader's cache, the host's network databases, trust store,
	// alternatives and Debian Python packages' settings: what a view hands
	// in of /etc, read-only; and the host's own versions of the files a
	// view makes (the users and groups, the hosts file, the name service's
	// configuration), where the view has its own.
	etc := append([]string{"/etc/ld.so.cache", fontconfigEtc}, resources.HostEtc()...)
	etc = append(etc, resources.DebianPythonEtc()...)
	etc = append(etc, "/etc/passwd", "/etc/group", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf")
	for _, f := range etc {
		add(&fb.paths, f, attest.LandlockRead)
	}
	for _, d := range fallbackDevices {
		if _, err := os.Stat(d); err == nil {
			add(&fb.paths, d, attest.LandlockDev)
		}
	}
	add(&fb.netPaths, "/etc/resolv.conf", attest.LandlockRead)
	return fb, nil
}

// landlock sets the plan's Landlock rules: the fallback's paths, the
// resolver's files where the run has the network, and the run directory,
// read and write.
func (fb *fallback) landlock(p *reexec.Plan, dir string, network bool) {
	if fb.handled == 0 {
		return
	}
	p.LandlockFS = fb.handled
	p.LandlockPaths = slices.Clone(fb.paths)
	if network {
		p.LandlockPaths = append(p.LandlockPaths, fb.netPaths...)
	}
	p.LandlockPaths = append(p.LandlockPaths, reexec.LandlockPath{Path: dir, Access: attest.LandlockWrite & fb.handled})
}

// landlockNames names the plan's Landlock paths for Isolation.LandlockFS;
// the run's own directory (dir) is "$HOME", the same in every run.
func landlockNames(paths []reexec.LandlockPath, dir string) []string {
	out := make([]string, 0, len(paths))
	for _, l := range paths {
		path := l.Path
		if path == dir {
			path = "$HOME"
		}
		mode := "r"
		switch {
		case l.Access&attest.LandlockAnyWrite != 0:
			mode = "rw"
		case l.Access&attest.LandlockExec&^attest.LandlockRead != 0:
			mode = "rx"
		}
		out = append(out, path+":"+mode)
	}
	return out
}
