//go:build linux && cgo

package subprocess

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/reexec"
	"github.com/psych-runtime/psych/sandbox/internal/host"
)

// The sandbox user, inside the user namespace. Outside it is the run id.
const (
	sandboxUID  = host.SandboxUID
	sandboxGID  = host.SandboxGID
	sandboxHome = host.Home
	sandboxHost = host.Hostname
)

const (
	roAttr  = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	devAttr = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC
)

// view is the filesystem the program sees, resolved once per Sandbox: the
// host trees it needs (read-only) and everything else built from nothing.
type view struct {
	// trees are host directories bound read-only at the same path.
	trees []string
	// links are host top-level symlinks (/lib -> usr/lib) recreated as is.
	links map[string]string
	// files are single host files bound read-only (ld.so.cache).
	files []string
	// exe is the interpreter's resolved path, valid inside the view.
	exe string
	// procMasks are /proc files hidden behind /dev/null.
	procMasks []string
}

// standardRoots are the library and program trees a dynamically linked
// interpreter may need. Each is bound if it is a directory and recreated if
// it is a symlink (merged /usr); absent ones are skipped.
var standardRoots = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// ownedPaths are the sandbox's own: a host tree beneath one would be hidden.
var ownedPaths = []string{"/tmp", "/dev", "/proc", "/etc"}

// resolveView builds the view of python, whose prefixes (sys.prefix,
// base_prefix, exec_prefix, base_exec_prefix) the caller learned from it
// (learnPython).
func resolveView(python string, prefixes []string) (*view, error) {
	exe, err := filepath.EvalSymlinks(python)
	if err != nil {
		return nil, fmt.Errorf("resolve interpreter %s: %w", python, err)
	}
	if len(prefixes) == 0 {
		return nil, fmt.Errorf("interpreter %s: no prefixes", python)
	}
	v := &view{exe: exe, links: map[string]string{}}
	for _, r := range standardRoots {
		fi, err := os.Lstat(r)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(r); err == nil {
				v.links[r] = target
			}
		case fi.IsDir():
			v.trees = append(v.trees, r)
		}
	}
	need := append([]string{filepath.Dir(exe)}, prefixes...)
	for _, p := range need {
		real, err := filepath.EvalSymlinks(p)
		if err != nil || !filepath.IsAbs(real) {
			return nil, fmt.Errorf("resolve interpreter prefix %q: %v", p, err)
		}
		if real == "/" {
			return nil, fmt.Errorf("interpreter prefix is /: refusing to expose the whole host")
		}
		for _, own := range ownedPaths {
			if within(real, own) {
				return nil, fmt.Errorf("interpreter path %s is under %s, which the sandbox builds from nothing; install the interpreter elsewhere", real, own)
			}
		}
		if !v.covers(real) {
			v.trees = append(v.trees, real)
		}
	}
	// A tree inside another is bound with it; keep only the outermost.
	sort.Strings(v.trees)
	var outer []string
	for _, t := range v.trees {
		if len(outer) == 0 || !within(t, outer[len(outer)-1]) {
			outer = append(outer, t)
		}
	}
	v.trees = outer
	if _, err := os.Stat("/etc/ld.so.cache"); err == nil {
		v.files = append(v.files, "/etc/ld.so.cache")
	}
	for _, m := range []string{"/proc/kcore", "/proc/sysrq-trigger", "/proc/keys", "/proc/timer_list", "/proc/latency_stats", "/proc/sched_debug"} {
		if _, err := os.Stat(m); err == nil {
			v.procMasks = append(v.procMasks, m)
		}
	}
	return v, nil
}

func (v *view) covers(p string) bool {
	for _, t := range v.trees {
		if within(p, t) {
			return true
		}
	}
	for l := range v.links {
		if within(p, l) {
			return true // reached through a recreated link into a bound tree
		}
	}
	return false
}

func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// mounts is one run's mount plan. Root host: every host tree is cloned here
// with open_tree, so the init (already an unprivileged uid) needs no access
// to the path, and a swapped symlink cannot redirect it. Non-root host: the
// init clones them itself (it runs as the host user, who can reach them).
// The returned files are the clones; the caller closes them after the start.
func (v *view) mounts(root string, hostRoot bool, tmpBytes, tmpInodes, shmBytes int64) (ms []reexec.Mount, files []*os.File, retErr error) {
	defer func() {
		if retErr != nil {
			closeAll(files)
		}
	}()
	bind := func(src, target string, attr uint64, recursive bool) error {
		m := reexec.Mount{Kind: reexec.Bind, Source: src, Target: target, Attr: attr, Recursive: recursive}
		if hostRoot {
			flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC)
			if recursive {
				flags |= unix.AT_RECURSIVE
			}
			fd, err := unix.OpenTree(unix.AT_FDCWD, src, flags)
			if err != nil {
				return fmt.Errorf("clone host tree %s: %w", src, os.NewSyscallError("open_tree", err))
			}
			m.Tree = os.NewFile(uintptr(fd), src)
			files = append(files, m.Tree)
		}
		ms = append(ms, m)
		return nil
	}
	mkdirs := func(p string) {
		var chain []string
		for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
			chain = append(chain, d)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			ms = append(ms, reexec.Mount{Kind: reexec.Mkdir, Target: chain[i], Mode: 0o755})
		}
	}
	links := make([]string, 0, len(v.links))
	for l := range v.links {
		links = append(links, l)
	}
	sort.Strings(links)
	for _, l := range links {
		ms = append(ms, reexec.Mount{Kind: reexec.Symlink, Source: v.links[l], Target: l})
	}
	for _, t := range v.trees {
		mkdirs(t)
		if err := bind(t, t, roAttr, true); err != nil {
			return nil, nil, err
		}
	}
	ms = append(ms, reexec.Mount{Kind: reexec.Mkdir, Target: "/etc", Mode: 0o755})
	for _, f := range host.EtcFiles() {
		ms = append(ms, reexec.Mount{Kind: reexec.File, Target: f.Path, Mode: 0o444, Data: []byte(f.Content)})
	}
	for _, f := range v.files {
		if err := bind(f, f, roAttr, false); err != nil {
			return nil, nil, err
		}
	}
	// The host's network databases and trust store, where it has them.
	for _, p := range host.HostEtc() {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		mkdirs(p)
		if err := bind(p, p, roAttr, false); err != nil {
			return nil, nil, err
		}
	}
	ms = append(ms, reexec.Mount{Kind: reexec.Mkdir, Target: "/dev", Mode: 0o755})
	for _, d := range []string{"null", "zero", "full", "random", "urandom"} {
		if err := bind("/dev/"+d, "/dev/"+d, devAttr, false); err != nil {
			return nil, nil, err
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		ms = append(ms, reexec.Mount{Kind: reexec.Symlink, Source: target, Target: "/dev/" + name})
	}
	// Pseudo-terminals from a devpts instance of the run's own (as
	// bubblewrap's --dev and every container engine give): it shows only
	// the ptys the run opened, never a host terminal, and holds at most 64.
	ms = append(ms,
		reexec.Mount{Kind: reexec.Devpts, Target: "/dev/pts", Data: []byte("newinstance,ptmxmode=0666,mode=620,max=64")},
		reexec.Mount{Kind: reexec.Symlink, Source: "pts/ptmx", Target: "/dev/ptmx"},
	)
	ms = append(ms,
		reexec.Mount{Kind: reexec.Tmpfs, Target: "/dev/shm", Attr: unix.MOUNT_ATTR_NOEXEC,
			Data: []byte(fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", shmBytes, tmpInodes))},
		reexec.Mount{Kind: reexec.Proc, Target: "/proc"},
	)
	// Masks and the read-only /proc/sys are binds inside the new root; the
	// init clones them itself.
	for _, m := range v.procMasks {
		ms = append(ms, reexec.Mount{Kind: reexec.Bind, Source: root + "/dev/null", Target: m, Attr: devAttr | unix.MOUNT_ATTR_RDONLY})
	}
	ms = append(ms,
		reexec.Mount{Kind: reexec.Bind, Source: root + "/proc/sys", Target: "/proc/sys", Attr: roAttr | unix.MOUNT_ATTR_NOEXEC, Recursive: true},
		reexec.Mount{Kind: reexec.Tmpfs, Target: "/tmp",
			Data: []byte(fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", tmpBytes, tmpInodes))},
	)
	return ms, files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
