package subprocess

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/reexec"
	"github.com/psych-runtime/psych/sandbox"
)

// namespaces are the ones every isolated run gets; the network namespace is
// left out only when the request grants the network.
const namespaces = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// hooks are test-only controls, set by the package's tests and nothing else.
type hooks struct {
	// noSeccomp loads no filter, to show that the filter is what denies.
	noSeccomp bool
	// beforeNetCheck runs on the run's netlink socket before the check.
	beforeNetCheck func(fd int) error
}

// plan computes what the init carries out for this run. The returned files
// are tree clones for the init, closed by the caller after the start.
func (r *run) plan() (*reexec.Plan, []*os.File, error) {
	s := r.s
	p := &reexec.Plan{
		OuterUID: r.uid, OuterGID: r.gid,
		InnerUID: r.uid, InnerGID: r.gid,
		Exe:     s.python,
		Args:    append([]string{s.python}, s.launcher.Args(3)...),
		Rlimits: r.rlimits(),
		Cwd:     r.dir,
	}
	if !s.hooks.noSeccomp {
		p.Seccomp = s.filter.Bytes()
	}
	p.Landlock = s.landlock
	home := r.dir
	var trees []*os.File
	if s.userns {
		home = sandboxHome
		p.InnerUID, p.InnerGID = sandboxUID, sandboxGID
		p.Namespaces = namespaces
		if !r.req.Network {
			p.Namespaces |= unix.CLONE_NEWNET
		}
		p.Hostname = sandboxHost
		p.Root = r.dir
		p.RootData = "size=1m,nr_inodes=1024,mode=0755"
		p.Cwd = sandboxHome
		p.Exe = s.view.exe
		var err error
		p.Mounts, trees, err = s.view.mounts(r.dir, s.hostUID == 0, s.cfg.TmpBytes, s.cfg.TmpInodes, s.cfg.TmpBytes/4)
		if err != nil {
			return nil, nil, err
		}
	}
	p.Env = r.env(home)
	return p, trees, nil
}

// env is the child's environment, built from nothing.
func (r *run) env(home string) []string {
	env := []string{
		"HOME=" + home,
		"TMPDIR=" + home,
		"PATH=" + filepath.Dir(r.s.python) + ":/usr/local/bin:/usr/bin:/bin",
		"PYTHONDONTWRITEBYTECODE=1",
		"MALLOC_ARENA_MAX=2",
		"LC_ALL=C.UTF-8",
	}
	for _, name := range r.s.cfg.EnvAllowlist {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
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
	nproc := uint64(r.limits.ProcessCount) + 1
	if r.cg != nil {
		nproc++
	}
	return []reexec.Rlimit{
		{Resource: unix.RLIMIT_CPU, Soft: cpu, Hard: cpu + 1},
		{Resource: unix.RLIMIT_AS, Soft: as, Hard: as},
		{Resource: unix.RLIMIT_FSIZE, Soft: fsize, Hard: fsize},
		{Resource: unix.RLIMIT_NPROC, Soft: nproc, Hard: nproc},
		{Resource: unix.RLIMIT_NOFILE, Soft: 256, Hard: 256},
		{Resource: unix.RLIMIT_STACK, Soft: 8 << 20, Hard: 8 << 20},
		{Resource: unix.RLIMIT_CORE, Soft: 0, Hard: 0},
	}
}

// attest fills the run's Isolation from kernel interfaces: the init's and
// the interpreter's /proc status, their namespaces against the host's, and
// the maps. It runs before the start frame is sent.
func (r *run) attest() {
	iso := &r.iso
	iso.Mode = "fallback"
	if r.s.userns {
		iso.Mode = "namespaces"
	}
	iso.Cgroup = r.s.cg.Mode()
	if !r.s.hooks.noSeccomp {
		iso.SeccompDigest = r.s.filter.Digest()
	}
	iso.LandlockScoped = []string{}
	if r.s.landlock != 0 {
		iso.LandlockScoped = []string{"abstract_unix_socket", "signal"}
	}
	iso.Init = readStatus(r.proc.InitPID)
	pid := r.proc.InterpPID
	if pid == 0 {
		return
	}
	iso.Interpreter = readStatus(pid)
	iso.Namespaces = []string{}
	for _, ns := range nsKinds {
		mine := r.s.hostNS[ns]
		theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
		if mine != "" && err == nil && mine != theirs {
			iso.Namespaces = append(iso.Namespaces, ns)
		}
	}
	if r.s.userns {
		iso.UIDMap = readMap(pid, "uid_map")
		iso.GIDMap = readMap(pid, "gid_map")
	}
}

// nsKinds are the namespaces the attestation compares with the host's.
var nsKinds = []string{"user", "mnt", "net", "pid", "ipc", "uts", "cgroup"}

// hostNamespaces reads this process's own namespace links, once per Sandbox.
func hostNamespaces() map[string]string {
	m := map[string]string{}
	for _, ns := range nsKinds {
		if l, err := os.Readlink("/proc/self/ns/" + ns); err == nil {
			m[ns] = l
		}
	}
	return m
}

func readMap(pid int, name string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(lines, "\n")
}

// readStatus reads the security fields of /proc/PID/status.
func readStatus(pid int) sandbox.ProcessStatus {
	st := sandbox.ProcessStatus{Seccomp: -1, NoNewPrivs: -1}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Uid":
			st.UID = ints(v)
		case "Gid":
			st.GID = ints(v)
		case "Seccomp":
			st.Seccomp, _ = strconv.Atoi(v)
		case "Seccomp_filters":
			st.SeccompFilters, _ = strconv.Atoi(v)
		case "NoNewPrivs":
			st.NoNewPrivs, _ = strconv.Atoi(v)
		case "CapEff":
			st.CapEff = v
		case "CapBnd":
			st.CapBnd = v
		}
	}
	return st
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Fields(s) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

// checkOthersExec checks that the interpreter file is executable by anyone,
// which a view needs: inside, the sandbox user owns nothing of the host.
func checkOthersExec(python string) error {
	real, err := filepath.EvalSymlinks(python)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", python, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("stat %s: %w", real, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o001 == 0 {
		return fmt.Errorf("interpreter %s (mode %v) is not executable by others, as the sandbox user needs", real, fi.Mode())
	}
	return nil
}

// Landlock scopes (ABI 6), which x/sys does not name yet.
const (
	landlockScopeAbstractUnix = 1 << 0
	landlockScopeSignal       = 1 << 1
)

// landlockScopes returns the scopes to confine every run with: abstract Unix
// sockets and signals stay inside the run's own domain. Zero where the kernel
// lacks Landlock ABI 6.
func landlockScopes() uint64 {
	const createRulesetVersion = 1
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, createRulesetVersion)
	if errno != 0 || int(abi) < 6 {
		return 0
	}
	return landlockScopeAbstractUnix | landlockScopeSignal
}
