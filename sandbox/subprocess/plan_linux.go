//go:build linux && cgo

package subprocess

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/bootstrap"
	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/internal/layers"
	"github.com/psych-runtime/psych/internal/reexec"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/attest"
	"github.com/psych-runtime/psych/sandbox/internal/host"
	"github.com/psych-runtime/psych/sandbox/internal/resources"
)

// bootDir and bootFile hold the compiled bootstrap in the view; without
// one it is runBootFile in the run directory.
const (
	bootDir     = "/.psych"
	bootFile    = bootDir + "/bootstrap"
	runBootFile = ".psych-bootstrap"
	// workspaceDir is where the run's workspace is mounted on the host
	// until the init's clones of it are made.
	workspaceDir = ".psych-workspace"
)

// hooks are test-only controls, set by the package's tests and nothing else.
type hooks struct {
	// noSeccomp loads no filter, to show that the filter is what denies.
	noSeccomp bool
	// beforeNetCheck runs on the run's netlink socket before the check.
	beforeNetCheck func(fd int) error
	// pooled runs on each pooled sandbox once it is ready.
	pooled func(r *run)
	// poolPlan changes a pooled sandbox's plan before it starts.
	poolPlan func(p *reexec.Plan)
	// atDispatch runs on a pooled sandbox's netlink socket before its
	// check at dispatch.
	atDispatch func(fd int) error
}

// plan computes what the init carries out for this run. The returned files
// are tree clones for the init, closed by the caller after the start.
func (r *run) plan() (*reexec.Plan, []*os.File, error) {
	s, l := r.s, r.layers
	p := &reexec.Plan{
		OuterUID: r.uid, OuterGID: r.gid,
		InnerUID: r.uid, InnerGID: r.gid,
		Exe: s.python,
		Cwd: r.dir,
	}
	if !r.viewed() {
		// Without a view the compiled bootstrap is a read-only file of the
		// run directory, not a 100 KB argument the interpreter decodes
		// (about 2.5 ms); with one it is a file of the view (planView).
		code := filepath.Join(r.dir, runBootFile)
		if err := os.WriteFile(code, s.launcher.Code(), 0o444); err != nil {
			return nil, nil, fmt.Errorf("write the compiled bootstrap: %w", err)
		}
		p.Args = append([]string{s.python}, s.launcher.FileArgs(code, reexec.WireFD)...)
	}
	if l.Rlimits {
		p.Rlimits = r.rlimits()
	}
	r.planNamespaces(p)
	r.planSeccomp(p)
	home := r.dir
	var trees []*os.File
	if r.viewed() {
		home = sandboxHome
		var err error
		if trees, err = r.planView(p); err != nil {
			return nil, nil, err
		}
	}
	if r.req == nil {
		p.Args = append(p.Args, bootstrap.PreloadArgs(s.preload)...)
	}
	r.home = home
	p.Env = r.environ(home)
	r.env = p.Env
	r.iso.EnvKeys = host.EnvKeys(p.Env)
	r.iso.PythonPath = s.python
	if r.req == nil && s.hooks.poolPlan != nil {
		s.hooks.poolPlan(p)
	}
	return p, trees, nil
}

// planNamespaces sets the namespaces the run gets. A root host without
// user namespaces still makes the others, as root, and the run keeps its
// outer ids inside (fallback.rootNS).
func (r *run) planNamespaces(p *reexec.Plan) {
	s, l := r.s, r.layers
	if !(s.userns && l.UserNS || s.fallback.rootNS) {
		return
	}
	if s.userns {
		p.InnerUID, p.InnerGID = sandboxUID, sandboxGID
		p.Namespaces = unix.CLONE_NEWUSER
	}
	if l.NetNS && (r.req == nil || !r.req.Network) {
		p.Namespaces |= unix.CLONE_NEWNET
	}
	if l.PidIpcUts {
		p.Namespaces |= unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS
		p.Hostname = sandboxHost
		r.pidNS = true
	}
}

// planSeccomp sets the run's seccomp filter and Landlock scopes. The
// fallback's files are confined by Landlock where no view confines them,
// and it gets no IPv4 or IPv6 socket where the request does not grant the
// network and no network namespace denies it.
func (r *run) planSeccomp(p *reexec.Plan) {
	s, l := r.s, r.layers
	r.filter = s.filter
	if !l.Seccomp {
		return
	}
	if !s.userns {
		if !r.viewed() {
			s.fallback.landlock(p, r.dir, r.req != nil && r.req.Network)
			r.iso.LandlockFS = landlockNames(p.LandlockPaths, r.dir)
		}
		if r.req != nil && !r.req.Network && p.Namespaces&unix.CLONE_NEWNET == 0 {
			r.filter = s.fallback.noInet
			r.iso.InetRefused = !s.hooks.noSeccomp
		}
	}
	if !s.hooks.noSeccomp {
		p.Seccomp = r.filter.Bytes()
	}
	p.Landlock = s.landlock
}

// planView sets the run's new root: the mount plan of the view (its tree
// clones returned, for the caller to close after the start), the
// workspace a root host holds, /etc naming the run's ids without a user
// namespace, and the compiled bootstrap as a file of the view.
func (r *run) planView(p *reexec.Plan) ([]*os.File, error) {
	s := r.s
	p.Namespaces |= unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP
	p.Root = r.dir
	p.RootData = "size=1m,nr_inodes=1024,mode=0755"
	p.Cwd = sandbox.WorkDir
	p.Exe = s.view.exe
	var err error
	if s.hostUID == 0 {
		// /tmp and /work on one tmpfs the host holds (host.Workspace),
		// detached from the host as soon as the init's clones are made.
		// A root that may not mount here (in a user namespace of its
		// own), like a non-root host, gets the init's /tmp and /work:
		// no files come in or out, and a request with files is refused
		// (writeFiles).
		r.ws, err = host.NewWorkspace(filepath.Join(r.dir, workspaceDir), s.cfg.TmpBytes, s.cfg.TmpInodes, r.uid, r.gid)
		switch {
		case errors.Is(err, unix.EPERM):
			s.log.Warn("psych: this host may not mount a run's /work; runs take no files", "err", err)
		case err != nil:
			return nil, err
		}
	}
	var trees []*os.File
	p.Mounts, trees, err = s.view.mounts(r.dir, s.hostUID == 0, r.ws, s.cfg.TmpBytes, s.cfg.TmpInodes, s.cfg.TmpBytes/4)
	if err == nil {
		err = r.ws.Detach()
	}
	if err != nil {
		closeAll(trees)
		return nil, err
	}
	if !s.userns {
		// No user namespace maps the program to the sandbox user: it
		// finds itself in /etc/passwd under its own outer ids.
		etc := map[string]string{}
		for _, f := range resources.EtcFilesFor(r.uid, r.gid) {
			etc[f.Path] = f.Content
		}
		for i, m := range p.Mounts {
			if c, ok := etc[m.Target]; ok && m.Kind == reexec.File {
				p.Mounts[i].Data = []byte(c)
			}
		}
	}
	p.Mounts = append(p.Mounts,
		reexec.Mount{Kind: reexec.Mkdir, Target: bootDir, Mode: 0o755},
		reexec.Mount{Kind: reexec.File, Target: bootFile, Mode: 0o444, Data: s.launcher.Code()})
	p.Mounts = append(p.Mounts, fontMounts(s.fonts)...)
	p.Args = append([]string{s.python}, s.launcher.FileArgs(bootFile, reexec.WireFD)...)
	return trees, nil
}

// viewed reports whether the run gets the filesystem view: a mount
// namespace, which needs the user and pid namespaces, or a root host
// making them without a user namespace (fallback.rootNS).
func (r *run) viewed() bool {
	l := r.layers
	return (r.s.userns && l.UserNS || r.s.fallback.rootNS) && l.PidIpcUts && l.Mount
}

// environ is the child's environment, built from nothing: in a pooled run
// before dispatch only the sandbox's own variables (dispatch sets the
// request's).
func (r *run) environ(home string) []string {
	if r.req == nil {
		return host.Env(home, r.s.python, nil, nil)
	}
	return host.Env(home, r.s.python, r.s.cfg.EnvAllowlist, r.req.Env)
}

// rlimits are the per-process limits, set by the init before it drops its
// privileges, so no line of the program runs without them. The init itself
// is one process of the run's user, so RLIMIT_NPROC allows one more. With a
// pids cgroup, pids.max is the exact cap and RLIMIT_NPROC (checked first by
// the kernel) a backstop one above it, so that the cgroup's event records
// the hit.
func (r *run) rlimits() []reexec.Rlimit {
	cpu := uint64(math.Ceil(r.limits.CPUSeconds))
	as, fsize := uint64(r.limits.AddressSpaceBytes), uint64(r.limits.FileSizeBytes)
	stack, nofile := uint64(r.limits.StackBytes), uint64(r.limits.OpenFiles)
	nproc := uint64(r.limits.ProcessCount) + 1
	if r.cg != nil {
		nproc++
	}
	return []reexec.Rlimit{
		{Resource: unix.RLIMIT_CPU, Soft: cpu, Hard: cpu + 1},
		{Resource: unix.RLIMIT_AS, Soft: as, Hard: as},
		{Resource: unix.RLIMIT_FSIZE, Soft: fsize, Hard: fsize},
		{Resource: unix.RLIMIT_NPROC, Soft: nproc, Hard: nproc},
		{Resource: unix.RLIMIT_NOFILE, Soft: nofile, Hard: nofile},
		{Resource: unix.RLIMIT_STACK, Soft: stack, Hard: stack},
		{Resource: unix.RLIMIT_CORE, Soft: 0, Hard: 0},
	}
}

// attest fills the run's Isolation from kernel interfaces: the init's and
// the interpreter's /proc status, their namespaces against the host's, and
// the maps. It runs before the start frame is sent.
func (r *run) attest() {
	iso := &r.iso
	iso.Backend = "subprocess"
	switch {
	case r.layers != layers.Full():
		iso.Mode = "partial" // psych's own benchmark took layers away
	case r.s.userns:
		iso.Mode = "namespaces"
	default:
		iso.Mode = "fallback"
	}
	iso.Cgroup = cgroups.ModeNone
	if r.cg != nil {
		iso.Cgroup = r.cg.Mode()
	}
	if r.layers.Seccomp {
		if !r.s.hooks.noSeccomp {
			iso.SeccompDigest = r.filter.Digest()
		}
		iso.LandlockScoped = attest.ScopeNames(r.s.landlock)
	}
	attest.AttestProcesses(iso, r.proc.InitPID, r.proc.InterpPID, r.s.hostNS)
}
