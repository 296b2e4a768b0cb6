//go:build linux

package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/container"
	"github.com/psych-runtime/psych/sandbox/subprocess"
)

// Thresholds.
const (
	// psych's floor: 5.12 (mount_setattr builds the view).
	minKernelMajor, minKernelMinor = 5, 12
	// From 6.1 the kernel has both cgroup peak counters (memory.peak 5.19,
	// pids.peak 6.1).
	peakKernelMajor, peakKernelMinor = 6, 1
	// landlockABI is the ABI whose scopes psych confines runs with.
	landlockABI = 6
	// shimStarts is how many starts each side of the shim's cost takes.
	shimStarts = 5
	// engineTimeout bounds one engine's check.
	engineTimeout = 30 * time.Second
)

// errNoCgo: the nsexec init and the seccomp compiler are cgo.
var errNoCgo = errors.New("this psych was built without cgo: no nsexec init, no seccomp compiler")

const cgoFix = "build psych with cgo (CGO_ENABLED=1, with gcc and libseccomp-dev installed)"

// discard receives the backends' own warnings: the report says it all.
var discard = slog.New(slog.DiscardHandler)

// host is what later checks learn from earlier ones.
type host struct {
	opts           Options
	uid            int    // this process's euid
	runUID, runGID uint32 // the run's outside ids, as subprocess.New picks them
	userns         bool   // psych's probe passed: runs get namespaces
}

func run(ctx context.Context, opts Options) Report {
	h := &host{opts: opts, uid: os.Geteuid(), runUID: uint32(os.Geteuid()), runGID: uint32(os.Getegid())}
	var idsErr error
	if h.uid == 0 {
		// The first of the range a root host's runs take their ids from.
		var ids subprocess.IDRange
		ids, idsErr = subprocess.DefaultRunAs()
		h.runUID, h.runGID = ids.UID, ids.GID
	}
	var r Report
	r.Checks = append(r.Checks, checkKernel(), checkUserns(h), checkIDs(h, idsErr))
	for _, ns := range namespaces {
		r.Checks = append(r.Checks, checkNamespace(h, ns))
	}
	r.Checks = append(r.Checks, checkCgroups(h), checkSeccomp(), checkLandlock(), checkPython(ctx, h))
	r.Checks = append(r.Checks, checkEngines(ctx, h)...)
	c, iso := checkRun(ctx, h)
	r.Checks = append(r.Checks, c, checkFallback(ctx, h))
	r.Attestation = iso
	return r
}

// ---- outside ids ----

// checkIDs says whether runs get outside ids of their own: as root, from
// subprocess.DefaultRunAs's range, where this user namespace maps it.
func checkIDs(h *host, mapped error) Check {
	c := Check{Name: "ids"}
	switch {
	case h.uid != 0:
		c.Status, c.Found = Warn, fmt.Sprintf("a non-root host: every run is uid %d outside, so the kernel's per-uid quotas (pipe buffers, inotify, processes) are shared by its runs", h.uid)
		c.Fix = "run psych as root for an outside uid per run"
	case mapped != nil:
		c.Status, c.Found = Warn, "every run is nobody outside, so the kernel's per-uid quotas are shared by the runs: "+mapped.Error()
		c.Fix = "map ids 100000000-100065535 (uid and gid) into psych's user namespace, or set subprocess.Config.RunAs to a range it maps"
	default:
		c.Status, c.Found = OK, fmt.Sprintf("every run claims its own outside uid and gid from %d-%d", h.runUID, h.runUID+65535)
	}
	return c
}

// ---- kernel ----

func checkKernel() Check {
	c := Check{Name: "kernel"}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return Check{Name: "kernel", Status: Fail, Found: "uname: " + err.Error(), Fix: "run psych on Linux 5.12 or later"}
	}
	release, machine := unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Machine[:])
	major, minor, ok := parseRelease(release)
	c.Found = fmt.Sprintf("Linux %s (%s)", release, machine)
	switch {
	case !ok:
		c.Status, c.Found = Warn, c.Found+": the version cannot be read"
		c.Fix = fmt.Sprintf("psych needs Linux %d.%d or later", minKernelMajor, minKernelMinor)
	case !atLeast(major, minor, minKernelMajor, minKernelMinor):
		c.Status, c.Found = Fail, c.Found+fmt.Sprintf(": older than psych's floor, %d.%d (mount_setattr builds the view)", minKernelMajor, minKernelMinor)
		c.Fix = fmt.Sprintf("upgrade to Linux %d.%d or later (6.12 or later also gives Landlock ABI 6)", minKernelMajor, minKernelMinor)
	case !atLeast(major, minor, peakKernelMajor, peakKernelMinor):
		c.Status, c.Found = Warn, c.Found+": without memory.peak (5.19) or pids.peak (6.1), usage reports no peaks"
		c.Fix = "upgrade to Linux 6.1 or later for the cgroup peak counters"
	default:
		c.Status = OK
	}
	return c
}

// parseRelease reads "6.18.44-fc" as 6, 18.
func parseRelease(s string) (major, minor int, ok bool) {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' || r == '+' })
	if len(f) < 2 {
		return 0, 0, false
	}
	var err1, err2 error
	major, err1 = strconv.Atoi(f[0])
	minor, err2 = strconv.Atoi(f[1])
	return major, minor, err1 == nil && err2 == nil
}

func atLeast(major, minor, wantMajor, wantMinor int) bool {
	return major > wantMajor || major == wantMajor && minor >= wantMinor
}

// ---- user namespaces ----

// sysctl reads one /proc/sys file; "not present" when it does not exist.
func sysctl(name string) (value string, present bool) {
	b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "not present", false
		}
		return "unreadable (" + err.Error() + ")", false
	}
	return strings.TrimSpace(string(b)), true
}

const (
	sysMaxUserns   = "user.max_user_namespaces"
	sysUsernsClone = "kernel.unprivileged_userns_clone"
	sysAppArmor    = "kernel.apparmor_restrict_unprivileged_userns"
)

func checkUserns(h *host) Check {
	c := Check{Name: "userns"}
	values := map[string]string{}
	var shown []string
	for _, name := range []string{sysMaxUserns, sysUsernsClone, sysAppArmor} {
		v, present := sysctl(name)
		if present {
			values[name] = v
			shown = append(shown, name+"="+v)
		} else {
			shown = append(shown, name+" "+v)
		}
	}
	ok, probeErr := probeUserns(h.runUID, h.runGID)
	h.userns = ok && probeErr == nil
	cloneErr := tryClone(0)
	attempt := fmt.Sprintf("clone(CLONE_NEWUSER) as uid %d: %s", h.uid, describe(cloneErr))
	who := fmt.Sprintf("uid %d (the run user)", h.runUID)
	switch {
	case h.userns:
		c.Status = OK
		c.Found = fmt.Sprintf("%s can create a user namespace with capabilities in it (psych's probe); %s; %s",
			who, attempt, strings.Join(shown, ", "))
		return c
	case probeErr != nil:
		c.Status = Fail
		c.Found = fmt.Sprintf("psych's probe as %s did not run: %s; %s; %s", who, oneLine(probeErr), attempt, strings.Join(shown, ", "))
		c.Fix = fmt.Sprintf("psych's probe (a forked child that makes a user namespace, as subprocess.New runs it) must be able to run as uid %d: see the error", h.runUID)
		if errors.Is(probeErr, errNoCgo) {
			c.Fix = cgoFix
		}
		return c
	default:
		c.Found = fmt.Sprintf("%s cannot create a user namespace with capabilities in it (psych's probe), so runs are refused unless --allow-fallback asks for the fallback (see fallback)", who)
	}
	c.Status = Fail
	c.Found += "; " + attempt + "; " + strings.Join(shown, ", ")
	c.Fix = usernsFix(values, cloneErr)
	return c
}

// usernsFix names the fix for the first cause the sysctls and the attempt
// point to. For AppArmor's restriction, a profile that lets psych alone make
// user namespaces comes first.
func usernsFix(values map[string]string, attempt error) string {
	var errno syscall.Errno
	errors.As(attempt, &errno)
	switch {
	case values[sysAppArmor] == "1":
		exe := selfPath()
		return fmt.Sprintf("AppArmor restricts unprivileged user namespaces: let psych alone make them with a per-binary profile: "+
			"save the profile below as /etc/apparmor.d/psych and load it with `apparmor_parser -r /etc/apparmor.d/psych` "+
			"(one profile per binary that embeds psych, at its real path; `sysctl -w %s=0` would lift the restriction for the whole host instead)\n%s",
			sysAppArmor, apparmorProfile(exe))
	case values[sysMaxUserns] == "0":
		return fmt.Sprintf("`sysctl -w %s=15000`, and keep it in /etc/sysctl.d/99-psych.conf (0 forbids user namespaces to everyone)", sysMaxUserns)
	case values[sysUsernsClone] == "0":
		return fmt.Sprintf("`sysctl -w %s=1`, and keep it in /etc/sysctl.d/99-psych.conf", sysUsernsClone)
	case errno == unix.ENOSPC:
		return fmt.Sprintf("a user-namespace limit is reached: %s here or in an enclosing namespace (a container's) is used up; raise it there", sysMaxUserns)
	case errno == unix.EINVAL || errno == unix.ENOSYS:
		return "the kernel lacks user namespaces: use a kernel built with CONFIG_USER_NS"
	default:
		return "unshare(CLONE_NEWUSER) is denied by a policy psych runs under (a container's seccomp profile, an LSM): allow it for psych, or run psych outside that container"
	}
}

// apparmorProfile is a profile that allows exe to make user namespaces and
// confines it no further.
func apparmorProfile(exe string) string {
	return fmt.Sprintf(`abi <abi/4.0>,
include <tunables/global>

profile psych %s flags=(unconfined) {
  userns,

  include if exists <local/psych>
}`, exe)
}

// selfPath is this executable's real path, which an AppArmor profile names.
func selfPath() string {
	exe, err := os.Executable()
	if err != nil {
		return "/path/to/psych"
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		return real
	}
	return exe
}

// tryClone starts `true` in a new user namespace, plus the namespaces in
// flags, as this process's own user mapped to root inside: a real attempt.
func tryClone(flags uintptr) error {
	truePath, err := exec.LookPath("true")
	if err != nil {
		return fmt.Errorf("find true: %w", err)
	}
	cmd := exec.Command(truePath)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | flags,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	return cmd.Run()
}

// describe says "ok", or the error with its errno's name.
func describe(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return fmt.Sprintf("%v (%s)", errno, unix.ErrnoName(errno))
	}
	return err.Error()
}

// ---- network, mount and pid namespaces ----

type namespace struct {
	name, what, flagName, config string
	flag                         uintptr
}

var namespaces = []namespace{
	{"netns", "network", "CLONE_NEWNET", "CONFIG_NET_NS", syscall.CLONE_NEWNET},
	{"mntns", "mount", "CLONE_NEWNS", "", syscall.CLONE_NEWNS},
	{"pidns", "pid", "CLONE_NEWPID", "CONFIG_PID_NS", syscall.CLONE_NEWPID},
}

// checkNamespace makes the namespace inside a new user namespace, as psych's
// runs do. Without a user namespace for the run user, runs make none.
func checkNamespace(h *host, ns namespace) Check {
	c := Check{Name: ns.name}
	if !h.userns {
		c.Status = Fail
		c.Found = fmt.Sprintf("not made: psych makes the %s namespace inside the run's user namespace, which the run user cannot have (see userns)", ns.what)
		c.Fix = "fix userns"
		return c
	}
	err := tryClone(ns.flag)
	c.Found = fmt.Sprintf("clone(CLONE_NEWUSER|%s) as uid %d: %s", ns.flagName, h.uid, describe(err))
	if err == nil {
		c.Status = OK
		return c
	}
	c.Status = Fail
	c.Fix = fmt.Sprintf("allow %s namespaces for psych: lift the policy that denies them (a container's seccomp profile, an LSM)", ns.what)
	if ns.config != "" {
		c.Fix += ", or use a kernel built with " + ns.config
	}
	return c
}

// ---- cgroups ----

func checkCgroups(h *host) Check {
	c := Check{Name: "cgroups"}
	layout, err := cgroups.DetectLayout()
	c.Found = layoutNames[layout]
	if err != nil {
		layout, c.Found = cgroups.LayoutNone, "none ("+oneLine(err)+")"
	}
	v1, unified := controllers()
	var desc []string
	if len(v1) > 0 {
		desc = append(desc, "v1 "+strings.Join(v1, ", "))
	}
	if unified != "" {
		desc = append(desc, fmt.Sprintf("cgroup2 at %s (controllers: %s)", unified, orNone(unifiedControllers(unified))))
	}
	if len(desc) > 0 {
		c.Found += ": " + strings.Join(desc, "; ")
	}
	m, err := cgroups.NewManager(cgroups.Config{Logger: discard})
	if err == nil {
		parents := m.Parents()
		var ps []string
		for _, k := range slices.Sorted(maps.Keys(parents)) {
			ps = append(ps, k+" "+parents[k])
		}
		how := "writable by root"
		if h.uid != 0 {
			how = fmt.Sprintf("delegated to uid %d", h.uid)
		}
		c.Status = OK
		c.Found += fmt.Sprintf("; run cgroups (mode %s, freezable %v) under %s, %s", m.Mode(), m.CanFreeze(), strings.Join(ps, ", "), how)
		return c
	}
	c.Status = Warn
	if h.opts.RequireCgroup {
		c.Status = Fail
	}
	c.Found += fmt.Sprintf("; no run cgroup as uid %d: %v; rlimits alone hold (cpu_seconds per process, no whole-run memory cap, no freezing for approvals)", h.uid, err)
	c.Fix = cgroupFix(layout, h.uid)
	return c
}

// layoutNames say what each layout is, in the terms of cgroup versions.
var layoutNames = map[cgroups.Layout]string{
	cgroups.LayoutUnified: "unified (v2 only)",
	cgroups.LayoutHybrid:  "hybrid (v1 controllers beside a cgroup2 mount)",
	cgroups.LayoutLegacy:  "legacy (v1 only)",
	cgroups.LayoutNone:    "none (no cgroup hierarchy mounted)",
}

// cgroupFix is the systemd delegation that gives a host its own subtree,
// and what to do where systemd cannot delegate (v1 controllers).
func cgroupFix(layout cgroups.Layout, uid int) string {
	switch {
	case layout == cgroups.LayoutNone:
		return "mount the cgroup hierarchies (systemd does at boot; cgroup2 on /sys/fs/cgroup)"
	case uid == 0:
		return "the memory and pids controllers must be enabled and mounted: check /proc/cgroups and the kernel's cgroup_disable= parameter"
	case layout == cgroups.LayoutUnified:
		return fmt.Sprintf("run psych in a systemd unit with Delegate=yes: `systemd-run --user --scope -p Delegate=yes psych ...` "+
			"(or `systemd-run --scope -p Delegate=yes --uid=%d ...` as root), or Delegate=yes in its service's [Service] section", uid)
	default:
		return fmt.Sprintf("systemd delegates only the unified hierarchy, and this host's memory and pids controllers are on v1: "+
			"boot with systemd.unified_cgroup_hierarchy=1 and run psych in a unit with Delegate=yes (`systemd-run --user --scope -p Delegate=yes psych ...`), "+
			"or run psych as root, or have root create parents writable by uid %d in each hierarchy and name them in subprocess.Config.Cgroups", uid)
	}
}

// controllers lists the controllers bound to v1 hierarchies, and the
// cgroup2 mount point, from /proc/self/mountinfo.
func controllers() (v1 []string, unified string) {
	known := map[string]bool{}
	if b, err := os.ReadFile("/proc/cgroups"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
				known[f[0]] = true
			}
		}
	}
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return nil, ""
	}
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup2":
			if unified == "" {
				unified = m.Mountpoint
			}
		case "cgroup":
			for _, o := range strings.Split(m.VFSOptions, ",") {
				if known[o] && !slices.Contains(v1, o) {
					v1 = append(v1, o)
				}
			}
		}
	}
	return v1, unified
}

func unifiedControllers(mount string) string {
	b, err := os.ReadFile(filepath.Join(mount, "cgroup.controllers"))
	if err != nil {
		return ""
	}
	return strings.Join(strings.Fields(string(b)), ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// ---- Landlock ----

func checkLandlock() Check {
	c := Check{Name: "landlock"}
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	fix := fmt.Sprintf("a kernel with Landlock ABI %d (Linux 6.12 or later) and landlock in its LSM list (CONFIG_LSM, or the lsm= boot parameter)", landlockABI)
	switch {
	case errno == unix.ENOSYS:
		c.Status, c.Found, c.Fix = Warn, "not built into this kernel (ENOSYS): runs are not scoped (abstract Unix sockets, signals)", fix
	case errno == unix.EOPNOTSUPP:
		c.Status, c.Found, c.Fix = Warn, "built in but not enabled (EOPNOTSUPP): runs are not scoped (abstract Unix sockets, signals)", fix
	case errno != 0:
		c.Status, c.Found, c.Fix = Warn, "landlock_create_ruleset: "+describe(errno), fix
	case int(abi) < landlockABI:
		c.Status, c.Fix = Warn, fix
		c.Found = fmt.Sprintf("ABI %d, below %d: runs are not scoped (abstract Unix sockets, signals)", abi, landlockABI)
	default:
		c.Status = OK
		c.Found = fmt.Sprintf("ABI %d: runs are scoped (abstract Unix sockets, signals)", abi)
	}
	return c
}

// ---- the interpreter ----

func checkPython(ctx context.Context, h *host) Check {
	c := Check{Name: "python"}
	path, origin := h.opts.Python, "--python"
	if path == "" {
		origin = "python3 on PATH"
		p, err := exec.LookPath("python3")
		if err != nil {
			c.Status, c.Found = Fail, "no python3 on PATH"
			c.Fix = "install Python 3 (apt-get install python3), or pass --python PATH (subprocess.Config.PythonBin)"
			return c
		}
		path = p
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	out, err := exec.CommandContext(ctx, path, "-I", "-c", "import sys; print(sys.executable); print(sys.version.split()[0])").Output()
	lines := strings.Fields(string(out))
	if err != nil || len(lines) != 2 || !filepath.IsAbs(lines[0]) {
		c.Status = Fail
		c.Found = fmt.Sprintf("%s is %s; asking it for sys.executable: %s", origin, path, orNone(errString(err, out)))
		c.Fix = "pass --python the path of a working Python 3 interpreter"
		return c
	}
	real, version := lines[0], lines[1]
	// What runs: --python as given, or what python3 on PATH resolved to.
	target := real
	if h.opts.Python != "" {
		target = path
	}
	c.Found = fmt.Sprintf("%s is %s%s; its sys.executable is %s%s, Python %s", origin, path, arrow(path), real, arrow(real), version)
	if err := subprocess.CheckInterpreter(target, h.runUID, h.runGID, h.uid == 0 && h.userns); err != nil {
		c.Status = Fail
		c.Found += fmt.Sprintf("; uid %d (the run user) cannot execute it: %v", h.runUID, err)
		c.Fix = fmt.Sprintf("chmod o+rx %s (and o+x on its directories, where no user namespace can be had), or pass --python an interpreter uid %d can execute, such as /usr/bin/python3", target, h.runUID)
		return c
	}
	c.Found += fmt.Sprintf("; uid %d (the run user) can execute it", h.runUID)
	why, shim := isShim(path)
	if !shim {
		c.Status = OK
		return c
	}
	through, err1 := medianStart(ctx, path)
	direct, err2 := medianStart(ctx, real)
	c.Status = Warn
	c.Found += fmt.Sprintf("; %s is a shim (%s)", path, why)
	if err1 == nil && err2 == nil {
		c.Found += fmt.Sprintf(": a start through it takes %s, the interpreter itself %s (%.1f×, median of %d starts of `-I -c pass`)",
			ms(through), ms(direct), through.Seconds()/direct.Seconds(), shimStarts)
	}
	if h.opts.Python != "" {
		c.Found += "; psych starts it, not the interpreter, in every run, inside a view that holds only the interpreter's trees"
	} else {
		c.Found += "; psych pays one start through it per subprocess.New (each psych run) to resolve sys.executable"
	}
	c.Fix = fmt.Sprintf("pass --python %s (subprocess.Config.PythonBin) to skip the shim", real)
	return c
}

// arrow is " → " and where path's symlinks lead, if elsewhere.
func arrow(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		return " → " + real
	}
	return ""
}

// isShim reports whether path is a shim rather than an interpreter: a
// script (it starts with "#!"), or a file in a "shims" directory (pyenv's,
// asdf's).
func isShim(path string) (why string, shim bool) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		real = path
	}
	f, err := os.Open(real)
	if err == nil {
		head := make([]byte, 2)
		n, _ := f.Read(head)
		f.Close()
		if n == 2 && string(head) == "#!" {
			return "a script", true
		}
	}
	for _, p := range []string{path, real} {
		if slices.Contains(strings.Split(filepath.Dir(p), "/"), "shims") {
			return "in a shims directory", true
		}
	}
	return "", false
}

// medianStart times shimStarts starts of `python -I -c pass`.
func medianStart(ctx context.Context, python string) (time.Duration, error) {
	var d []time.Duration
	for range shimStarts {
		t := time.Now()
		if err := exec.CommandContext(ctx, python, "-I", "-c", "pass").Run(); err != nil {
			return 0, err
		}
		d = append(d, time.Since(t))
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2], nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func errString(err error, out []byte) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(bytes.TrimSpace(ee.Stderr)) > 0 {
		return fmt.Sprintf("%v: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("unexpected output %q", out)
}

// ---- container engines ----

var engines = []container.Engine{container.Containerd, container.Podman, container.Docker}

// checkEngines checks every engine at once, each with container.New.
func checkEngines(ctx context.Context, h *host) []Check {
	out := make([]Check, len(engines))
	var wg sync.WaitGroup
	for i, e := range engines {
		wg.Go(func() { out[i] = checkEngine(ctx, h, e) })
	}
	wg.Wait()
	return out
}

func checkEngine(ctx context.Context, h *host, e container.Engine) Check {
	c := Check{Name: "engine/" + string(e), Status: Warn}
	image := h.opts.Image
	if image == "" {
		image = container.DefaultImage
	}
	if h.uid != 0 {
		c.Found = "not checked: the container backend needs a root host (the engines' sockets are root's)"
		c.Fix = "run psych doctor as root to check the engines"
		return c
	}
	type result struct {
		sb  *container.Sandbox
		err error
	}
	done := make(chan result, 1)
	go func() {
		sb, err := container.New(container.Config{Engine: e, Image: image, Logger: discard})
		done <- result{sb, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(engineTimeout):
		r.err = fmt.Errorf("no answer within %v", engineTimeout)
	case <-ctx.Done():
		r.err = ctx.Err()
	}
	if r.err != nil && r.sb == nil {
		go func() { // a late answer is closed, not leaked
			if late := <-done; late.sb != nil {
				late.sb.Close()
			}
		}()
	}
	switch {
	case r.err == nil:
		r.sb.Close()
		c.Status, c.Found = OK, fmt.Sprintf("reachable; image %s present", image)
	case errors.Is(r.err, container.ErrImageNotFound):
		c.Found = fmt.Sprintf("reachable; image %s not present", image)
		c.Fix = fmt.Sprintf("psych never pulls: pass --image with an image this engine holds (`make image` builds and imports localhost/psych-python:3.11), or import this one (%s)", oneLine(r.err))
	case errors.Is(r.err, container.ErrEngineUnreachable):
		c.Found = "unreachable: " + oneLine(r.err)
		c.Fix = engineFix(e)
	default:
		c.Found = fmt.Sprintf("cannot serve image %s: %s", image, oneLine(r.err))
		c.Fix = "see the error; the subprocess backend does not depend on it"
	}
	return c
}

func engineFix(e container.Engine) string {
	switch e {
	case container.Containerd:
		return "install and start containerd (apt-get install containerd; systemctl start containerd) so that it answers on " + container.DefaultContainerdAddress + ", or use another backend"
	case container.Podman:
		return "install podman (apt-get install podman) and make it work as root with psych's storage (see the error), or use another backend"
	default:
		return "install and start docker (apt-get install docker.io; systemctl start docker) so that it answers on " + container.DefaultDockerHost + ", or use another backend"
	}
}

// oneLine is err's text on one line.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// ---- the isolated execution ----

// allNamespaces are what a fully isolated run's interpreter does not share
// with the host.
var allNamespaces = []string{"user", "mnt", "net", "pid", "ipc", "uts", "cgroup"}

// checkRun runs None once, requiring the full isolation, and checks its
// attestation layer by layer.
func checkRun(ctx context.Context, h *host) (Check, *sandbox.Isolation) {
	c := Check{Name: "run", Status: Fail}
	cfg := subprocess.Config{
		PythonBin:            h.opts.Python,
		RequireIsolation:     true,
		RequireNetworkDenial: true,
		RequireCgroup:        h.opts.RequireCgroup,
		AllowSameUID:         h.uid != 0, // a non-root host runs as itself
		Logger:               discard,
	}
	sb, err := subprocess.New(cfg)
	if err != nil {
		c.Found = "no isolated execution: " + oneLine(err)
		c.Fix = "fix the checks above"
		return c, nil
	}
	defer sb.Close() // the run's cgroup and directory are removed there
	res, err := sb.Run(ctx, sandbox.Request{Code: "None"})
	if err != nil {
		c.Found = "no isolated execution: " + oneLine(err)
		c.Fix = "fix the checks above"
		return c, nil
	}
	gaps := attestationGaps(res)
	if len(gaps) > 0 {
		c.Found = fmt.Sprintf("the execution of None (%s) lacked: %s", ms(res.Duration), strings.Join(gaps, "; "))
		c.Fix = "fix the checks above; a run without these layers is not isolated"
		return c, res.Isolation
	}
	iso := res.Isolation
	c.Status = OK
	c.Found = fmt.Sprintf("one execution of None in %s: mode %s, namespaces %s, seccomp and no_new_privs with no capabilities, network denial verified (%s only), cgroup %s",
		ms(res.Duration), iso.Mode, strings.Join(iso.Namespaces, ","), strings.Join(iso.Network.Links, ","), iso.Cgroup)
	if h.uid != 0 {
		c.Found += fmt.Sprintf("; as the host's own uid %d (a non-root host runs as itself: subprocess.Config.AllowSameUID)", h.uid)
	}
	return c, iso
}

// attestationGaps lists what a fully isolated run should have had and did
// not, from its attestation.
func attestationGaps(res *sandbox.Result) []string {
	var gaps []string
	if f := res.Failure; f != nil {
		gaps = append(gaps, fmt.Sprintf("a clean exit (%s: %s)", f.Type, firstLine(f.Message)))
	}
	iso := res.Isolation
	if iso == nil {
		return append(gaps, "an attestation")
	}
	if iso.Mode != "namespaces" {
		gaps = append(gaps, fmt.Sprintf("mode namespaces (it had %q)", iso.Mode))
	}
	for _, ns := range allNamespaces {
		if !slices.Contains(iso.Namespaces, ns) {
			gaps = append(gaps, "a "+ns+" namespace")
		}
	}
	for _, p := range []struct {
		name string
		st   sandbox.ProcessStatus
	}{{"init", iso.Init}, {"interpreter", iso.Interpreter}} {
		if p.st.Seccomp != 2 {
			gaps = append(gaps, fmt.Sprintf("a seccomp filter in the %s (seccomp %d)", p.name, p.st.Seccomp))
		}
		if p.st.NoNewPrivs != 1 {
			gaps = append(gaps, fmt.Sprintf("no_new_privs in the %s", p.name))
		}
		if p.st.CapEff == "" || strings.Trim(p.st.CapEff, "0") != "" {
			gaps = append(gaps, fmt.Sprintf("an empty capability set in the %s (cap_eff %q)", p.name, p.st.CapEff))
		}
		if len(p.st.UID) == 0 || slices.Contains(p.st.UID, 0) {
			gaps = append(gaps, fmt.Sprintf("a non-zero uid in the %s (%v)", p.name, p.st.UID))
		}
	}
	if n := iso.Network; n == nil || !n.Verified || !res.NetworkDenied {
		gaps = append(gaps, "a verified network denial")
	}
	return gaps
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// ---- the fallback ----

// fallbackProbe tries what the fallback keeps from a program: the host's
// home directories and an IPv4 socket.
const fallbackProbe = `import os, socket
def t(f):
    try:
        f()
        return "reached"
    except OSError as e:
        return type(e).__name__
{"home": t(lambda: os.listdir("/home")), "inet": t(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())}`

// checkFallback says what the fallback gives on this host: what
// subprocess.Config.AllowFallback (psych run --allow-fallback) would run
// with where no user namespace can be had. Where none can be had here it
// runs one execution so, and reports its attestation and what the program
// could reach.
func checkFallback(ctx context.Context, h *host) Check {
	c := Check{Name: "fallback", Status: OK}
	abi := landlockABINow()
	files := fmt.Sprintf("files confined by Landlock (ABI %d) to the interpreter's trees, the run's own directory and the /dev nodes", abi)
	if abi < 1 {
		files = "files NOT confined (this kernel has no Landlock): the program reaches what the run uid can, the host's home directories included"
	}
	if h.userns {
		c.Found = fmt.Sprintf("not taken here (runs get user namespaces); where none can be had, runs are refused unless --allow-fallback, which runs with no user namespace: a root host that can still makes the network, pid, ipc, uts, mount and cgroup namespaces and the view, as root; else no namespaces and no view, with %s, and IPv4 and IPv6 sockets refused by seccomp unless --network", files)
		return c
	}
	c.Status = Warn
	c.Fix = "fix userns for the full isolation; until then `psych run --allow-fallback` (subprocess.Config.AllowFallback) runs with what is found here"
	sb, err := subprocess.New(subprocess.Config{
		PythonBin:     h.opts.Python,
		AllowFallback: true,
		AllowSameUID:  h.uid != 0,
		Logger:        discard,
	})
	if err == nil {
		defer sb.Close()
		var res *sandbox.Result
		if res, err = sb.Run(ctx, sandbox.Request{Code: fallbackProbe}); err == nil {
			return fallbackFound(c, res, files)
		}
	}
	c.Status = Fail
	c.Found = "runs are refused (no user namespace), and the fallback cannot run either: " + oneLine(err)
	c.Fix = "fix userns"
	return c
}

// fallbackFound reports a fallback execution: its attestation, and what the
// program could reach.
func fallbackFound(c Check, res *sandbox.Result, files string) Check {
	iso := res.Isolation
	var reach map[string]string
	if res.Failure != nil || iso == nil || json.Unmarshal(res.Value, &reach) != nil {
		c.Status = Fail
		c.Found = fmt.Sprintf("the fallback's execution failed: %+v", res.Failure)
		return c
	}
	viewed := iso.RootMount == "own:tmpfs"
	switch {
	case viewed:
		files = "files confined by the filesystem view"
	case len(iso.LandlockFS) == 0:
		files = "files NOT confined (no Landlock domain): the program reaches what the run uid can, the host's home directories included"
	}
	inet := "IPv4 and IPv6 sockets refused by seccomp unless --network"
	switch {
	case res.NetworkDenied:
		inet = "a verified network denial (a network namespace of its own)"
	case !iso.InetRefused:
		inet = "IPv4 and IPv6 sockets NOT refused"
	}
	ns := "no namespaces, no filesystem view, no verified network denial"
	if len(iso.Namespaces) > 0 {
		ns = "namespaces " + strings.Join(iso.Namespaces, ",") + map[bool]string{true: " and the filesystem view", false: ", no filesystem view"}[viewed] + ", no user namespace"
	}
	c.Found = fmt.Sprintf("runs are refused unless --allow-fallback; with it, one execution in %s had mode %s: %s; uid %v, seccomp %d, no_new_privs %d, cap_eff %s, cgroup %s; %s (listing /home: %s); %s (an IPv4 socket: %s)",
		ms(res.Duration), iso.Mode, ns, iso.Interpreter.UID, iso.Interpreter.Seccomp, iso.Interpreter.NoNewPrivs, iso.Interpreter.CapEff, iso.Cgroup,
		files, reach["home"], inet, reach["inet"])
	return c
}

// landlockABINow is the kernel's Landlock ABI; 0 without Landlock.
func landlockABINow() int {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(abi)
}
