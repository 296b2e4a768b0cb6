//go:build linux && cgo

package subprocess

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/reexec"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/host"
	"github.com/psych-runtime/psych/sandbox/internal/resources"
	"github.com/psych-runtime/psych/sandbox/internal/setup"
)

// The sandbox user, inside the user namespace. Outside it is the run id.
const (
	sandboxUID  = resources.SandboxUID
	sandboxGID  = resources.SandboxGID
	sandboxHome = resources.Home
	sandboxHost = resources.Hostname
)

const (
	roAttr  = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	devAttr = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC
)

// view is the filesystem the program sees, resolved once per Sandbox: the
// host trees it needs (read-only) and everything else built from nothing.
//
// No host tree or file is bound into a run as it is: a bind shares the
// host's inodes, and an inotify or fanotify watch is on an inode, so a run
// that watched /usr would see every file that another run (or the host)
// opens and reads there. Each run gets read-only overlays of its own
// instead, whose inodes are its own: the host's tree, bound at a staging
// point, is an overlay's upper lower layer, an empty directory the layer
// beneath it (overlayfs without an upper layer wants two), and the staging
// bind is detached once the overlay holds its private clone. A host mount
// point below a tree is an overlay of its own inside the tree's; a host
// file (ld.so.cache, the network databases, the trust store) is bound out
// of an overlay of its directory, or of the tree it lies in. A host file
// that is itself a mount point, a file mounted below a tree and the /dev
// nodes are bound as they are.
type view struct {
	// trees are host directories handed in read-only at the same path.
	trees []string
	// subs are, by tree, the host's mount points below it, parents first.
	subs map[string][]subMount
	// links are host top-level symlinks (/lib -> usr/lib) recreated as is.
	links map[string]string
	// files are single host files and directories handed in read-only.
	files []hostFile
	// exe is the interpreter's resolved path, valid inside the view.
	exe string
	// procMasks are /proc files hidden behind /dev/null.
	procMasks []string
}

// subMount is a host mount point below a tree.
type subMount struct {
	path string
	dir  bool // else a file, bound as it is
}

// hostFile is a host file or directory the run sees at its own path.
type hostFile struct {
	path string // the path, the host's and the run's
	real string // the host file it is, symlinks resolved
	// inTree says real lies in a tree, bound out of the tree's overlay.
	inTree bool
	// group is the host directory whose overlay real is bound out of: the
	// topmost below / on real's own mount. Empty, with inTree false, where
	// real is a mount point of its own (a file bound on the host), which is
	// bound as it is.
	group string
}

// stageDir holds, while the init builds the view, the host's binds before
// each is overlaid, and the empty layer of every overlay; it is gone
// before the program starts.
const stageDir = "/.psych-lower"

// standardRoots are the library and program trees a dynamically linked
// interpreter may need. Each is bound if it is a directory and recreated if
// it is a symlink (merged /usr); absent ones are skipped.
var standardRoots = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// debianPythonEtc lists the settings of the host's Debian Python packages
// (a variable for tests).
var debianPythonEtc = resources.DebianPythonEtc

// ownedPaths are the sandbox's own: a host tree beneath one would be hidden.
var ownedPaths = []string{"/tmp", "/work", "/dev", "/proc", "/etc"}

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
	v := &view{exe: exe, links: map[string]string{}, subs: map[string][]subMount{}}
	// dpkg's database is read beside the rest (about a millisecond, the
	// first time in a process).
	debian := make(chan []string, 1)
	go func() { debian <- debianPythonEtc() }()
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
	points, err := hostMountPoints()
	if err != nil {
		return nil, err
	}
	for _, t := range v.trees {
		for _, m := range points {
			if m == t || !within(m, t) {
				continue
			}
			// One the host cannot reach (under another mount) is skipped.
			if fi, err := os.Stat(m); err == nil {
				v.subs[t] = append(v.subs[t], subMount{path: m, dir: fi.IsDir()})
			}
		}
	}
	isPoint := map[string]bool{}
	for _, m := range points {
		isPoint[m] = true
	}
	// The loader's cache, the host's network databases, trust store and
	// alternatives, fontconfig's settings (fontconfigEtc), and the
	// settings of its Debian Python packages, where it has them.
	etc := append(append([]string{"/etc/ld.so.cache", fontconfigEtc}, resources.HostEtc()...), <-debian...)
	for i, p := range etc {
		real, err := filepath.EvalSymlinks(p)
		if err != nil || slices.ContainsFunc(etc[:i], func(q string) bool { return within(p, q) }) {
			continue // absent, or handed in already (itself, or a directory above it)
		}
		f := hostFile{path: p, real: real}
		for _, t := range v.trees {
			f.inTree = f.inTree || within(real, t)
		}
		if !f.inTree && !isPoint[real] {
			g := filepath.Dir(real)
			for !isPoint[g] && filepath.Dir(g) != "/" {
				g = filepath.Dir(g)
			}
			f.group = g
		}
		v.files = append(v.files, f)
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

// below is p's path below dir (within it), "" for dir itself.
func below(p, dir string) string {
	if dir == "/" {
		return p
	}
	return p[len(dir):]
}

// hostMountPoints lists the mount points of this process's mount
// namespace (moby/sys/mountinfo, once per New), sorted, so that a parent
// comes before what is below it.
func hostMountPoints() ([]string, error) {
	infos, err := mountinfo.GetMounts(nil)
	if err != nil {
		return nil, fmt.Errorf("read the host's mounts: %w", err)
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range infos {
		if !seen[m.Mountpoint] {
			seen[m.Mountpoint] = true
			out = append(out, m.Mountpoint)
		}
	}
	sort.Strings(out)
	return out, nil
}

// overlayData is the options of a run's read-only overlay of lower (a
// path in the new root, where the init resolves the relative layers):
// lower above the empty layer, and none of overlayfs's redirects or
// metacopy followed. The tree is the top layer because overlayfs without
// an upper layer answers statfs from the top one: shutil.disk_usage of
// /usr is the host file system's, not the empty layer's tmpfs. xino gives
// every file the overlay's st_dev, as on the host, though the two layers
// are on two file systems.
func overlayData(lower string) []byte {
	esc := strings.NewReplacer(`\`, `\\`, `:`, `\:`, `,`, `\,`)
	return []byte("lowerdir=." + esc.Replace(lower) + ":." + stageDir + "/empty" +
		",redirect_dir=nofollow,metacopy=off,xino=on")
}

// mounts is one run's mount plan. Root host: every host tree (and the
// directory of each host file) is cloned here with open_tree, so the init
// (already an unprivileged uid) needs no access to the path, and a swapped
// symlink cannot redirect it. Non-root host: the init clones them itself
// (it runs as the host user, who can reach them). Either way the clone is
// staged and overlaid (view).
// The returned files are the clones; the caller closes them after the start.
// With a workspace (a root host), /tmp and /work are its directories, one
// tmpfs the host keeps a handle on; else they are the directories of one
// tmpfs the init mounts (no files come in or out).
func (v *view) mounts(root string, hostRoot bool, ws *host.Workspace, tmpBytes, tmpInodes, shmBytes int64) (ms []reexec.Mount, files []*os.File, retErr error) {
	p := &mountPlan{v: v, root: root, hostRoot: hostRoot, groups: map[string]string{}}
	defer p.undo.OnError(&retErr)
	p.links()
	p.staging()
	if err := p.trees(); err != nil {
		return nil, nil, err
	}
	p.etc()
	if err := p.hostFiles(); err != nil {
		return nil, nil, err
	}
	if ws == nil {
		p.initWorkspace(tmpBytes, tmpInodes)
	}
	p.add(reexec.Mount{Kind: reexec.Detach, Target: stageDir})
	if err := p.dev(shmBytes, tmpInodes); err != nil {
		return nil, nil, err
	}
	p.proc()
	if ws != nil {
		if err := p.workspace(ws); err != nil {
			return nil, nil, err
		}
	}
	return p.ms, p.files, nil
}

// mountPlan is a run's mount plan as mounts builds it, one method per part
// of the view, in the order the init carries them out (as runc's
// rootfs_linux.go has mountToRootfs, createDevices, setupPtmx).
type mountPlan struct {
	v        *view
	root     string // the new root, on the host
	hostRoot bool   // the host clones the trees (open_tree)
	ms       []reexec.Mount
	files    []*os.File        // the clones, for the caller to close after the start
	undo     setup.Undo        // closes the clones where the plan fails
	stages   int               // staging points made
	groups   map[string]string // host directory -> its staging point
}

func (p *mountPlan) add(m ...reexec.Mount) { p.ms = append(p.ms, m...) }

// bind binds src at target: a root host clones it here.
func (p *mountPlan) bind(src, target string, attr uint64, recursive bool) error {
	m := reexec.Mount{Kind: reexec.Bind, Source: src, Target: target, Attr: attr, Recursive: recursive}
	if p.hostRoot {
		flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC)
		if recursive {
			flags |= unix.AT_RECURSIVE
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, src, flags)
		if err != nil {
			return fmt.Errorf("clone host tree %s: %w", src, os.NewSyscallError("open_tree", err))
		}
		m.Tree = os.NewFile(uintptr(fd), src)
		p.files = append(p.files, m.Tree)
		p.undo.Push(m.Tree.Close)
	}
	p.add(m)
	return nil
}

// mkdirs makes the directories above path, from the root down.
func (p *mountPlan) mkdirs(path string) {
	var chain []string
	for d := filepath.Dir(path); d != "/"; d = filepath.Dir(d) {
		chain = append(chain, d)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		p.add(reexec.Mount{Kind: reexec.Mkdir, Target: chain[i], Mode: 0o755})
	}
}

// links recreates the host's top-level symlinks (/lib -> usr/lib).
func (p *mountPlan) links() {
	links := make([]string, 0, len(p.v.links))
	for l := range p.v.links {
		links = append(links, l)
	}
	sort.Strings(links)
	for _, l := range links {
		p.add(reexec.Mount{Kind: reexec.Symlink, Source: p.v.links[l], Target: l})
	}
}

// staging mounts the tmpfs of the staging points and the empty layer,
// detached with all that is mounted on it in one unmount at the end: each
// unmount waits for an RCU grace period.
func (p *mountPlan) staging() {
	p.add(
		reexec.Mount{Kind: reexec.Tmpfs, Target: stageDir, Data: []byte("size=4k,nr_inodes=1024,mode=0700")},
		reexec.Mount{Kind: reexec.Mkdir, Target: stageDir + "/empty", Mode: 0o555})
}

// stage binds src at a new staging point, which it returns.
func (p *mountPlan) stage(src string, recursive bool) (string, error) {
	s := fmt.Sprintf("%s/%d", stageDir, p.stages)
	p.stages++
	p.add(reexec.Mount{Kind: reexec.Mkdir, Target: s, Mode: 0o700})
	return s, p.bind(src, s, roAttr, recursive)
}

// overlay mounts the run's own read-only overlay of lower at target.
func (p *mountPlan) overlay(lower, target string) {
	p.add(reexec.Mount{Kind: reexec.Overlay, Target: target, Attr: roAttr, Data: overlayData(lower)})
}

// trees hands in each host tree through an overlay of the run's own, and
// the host's mount points below it (an overlay, or a file bound as it is).
func (p *mountPlan) trees() error {
	for _, t := range p.v.trees {
		s, err := p.stage(t, true)
		if err != nil {
			return err
		}
		p.mkdirs(t)
		p.overlay(s, t)
		for _, sub := range p.v.subs[t] {
			if sub.dir {
				p.overlay(s+below(sub.path, t), sub.path)
			} else {
				p.add(reexec.Mount{Kind: reexec.Bind, Source: p.root + s + below(sub.path, t), Target: sub.path, Attr: roAttr})
			}
		}
	}
	return nil
}

// etc makes the sandbox's own /etc files.
func (p *mountPlan) etc() {
	p.add(reexec.Mount{Kind: reexec.Mkdir, Target: "/etc", Mode: 0o755})
	for _, f := range resources.EtcFiles() {
		p.add(reexec.Mount{Kind: reexec.File, Target: f.Path, Mode: 0o444, Data: []byte(f.Content)})
	}
}

// hostFiles hands in each host file: bound out of its tree's overlay, out
// of an overlay of its directory, or as it is where it is a mount point.
func (p *mountPlan) hostFiles() error {
	for _, f := range p.v.files {
		p.mkdirs(f.path)
		switch {
		case f.inTree:
			p.add(reexec.Mount{Kind: reexec.Bind, Source: p.root + f.real, Target: f.path, Attr: roAttr})
		case f.group != "":
			s, ok := p.groups[f.group]
			if !ok {
				var err error
				if s, err = p.stage(f.group, false); err != nil {
					return err
				}
				p.overlay(s, s)
				p.groups[f.group] = s
			}
			p.add(reexec.Mount{Kind: reexec.Bind, Source: p.root + s + below(f.real, f.group), Target: f.path, Attr: roAttr})
		default:
			if err := p.bind(f.real, f.path, roAttr, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// initWorkspace is /tmp and /work without a workspace (a host that may not
// mount on its own side): still two directories of one tmpfs, which the
// init mounts on the staging tmpfs, binds, and detaches with it.
func (p *mountPlan) initWorkspace(tmpBytes, tmpInodes int64) {
	run := stageDir + "/run"
	p.add(
		reexec.Mount{Kind: reexec.Tmpfs, Target: run, Data: []byte(fmt.Sprintf("size=%d,nr_inodes=%d,mode=0755", tmpBytes, tmpInodes))},
		reexec.Mount{Kind: reexec.Mkdir, Target: run + "/" + host.WorkspaceTmp, Mode: 0o1777},
		reexec.Mount{Kind: reexec.Mkdir, Target: run + "/" + host.WorkspaceWork, Mode: 0o1777},
		reexec.Mount{Kind: reexec.Bind, Source: p.root + run + "/" + host.WorkspaceTmp, Target: "/tmp", Attr: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV},
		reexec.Mount{Kind: reexec.Bind, Source: p.root + run + "/" + host.WorkspaceWork, Target: sandbox.WorkDir, Attr: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV})
}

// dev makes /dev: the host's harmless nodes, the fd links, pseudo-terminals
// from a devpts instance of the run's own (as bubblewrap's --dev and every
// container engine give: it shows only the ptys the run opened, never a
// host terminal, and holds at most 64), and /dev/shm.
func (p *mountPlan) dev(shmBytes, tmpInodes int64) error {
	p.add(reexec.Mount{Kind: reexec.Mkdir, Target: "/dev", Mode: 0o755})
	for _, d := range []string{"null", "zero", "full", "random", "urandom"} {
		if err := p.bind("/dev/"+d, "/dev/"+d, devAttr, false); err != nil {
			return err
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		p.add(reexec.Mount{Kind: reexec.Symlink, Source: target, Target: "/dev/" + name})
	}
	p.add(
		reexec.Mount{Kind: reexec.Devpts, Target: "/dev/pts", Data: []byte("newinstance,ptmxmode=0666,mode=620,max=64")},
		reexec.Mount{Kind: reexec.Symlink, Source: "pts/ptmx", Target: "/dev/ptmx"},
		reexec.Mount{Kind: reexec.Tmpfs, Target: "/dev/shm", Attr: unix.MOUNT_ATTR_NOEXEC,
			Data: []byte(fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", shmBytes, tmpInodes))})
	return nil
}

// proc mounts /proc, its masks and the read-only /proc/sys: binds inside
// the new root, which the init clones itself.
func (p *mountPlan) proc() {
	p.add(reexec.Mount{Kind: reexec.Proc, Target: "/proc"})
	for _, m := range p.v.procMasks {
		p.add(reexec.Mount{Kind: reexec.Bind, Source: p.root + "/dev/null", Target: m, Attr: devAttr | unix.MOUNT_ATTR_RDONLY})
	}
	p.add(reexec.Mount{Kind: reexec.Bind, Source: p.root + "/proc/sys", Target: "/proc/sys", Attr: roAttr | unix.MOUNT_ATTR_NOEXEC, Recursive: true})
}

// workspace binds the workspace's /tmp and /work, clones the host holds.
func (p *mountPlan) workspace(ws *host.Workspace) error {
	for _, d := range []struct{ name, target string }{{host.WorkspaceTmp, "/tmp"}, {host.WorkspaceWork, sandbox.WorkDir}} {
		tree, err := ws.Clone(d.name)
		if err != nil {
			return err
		}
		p.files = append(p.files, tree)
		p.undo.Push(tree.Close)
		p.add(reexec.Mount{Kind: reexec.Bind, Tree: tree, Target: d.target, Attr: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV})
	}
	return nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
