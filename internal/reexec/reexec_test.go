//go:build linux && cgo

package reexec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/nsexec"
)

// plainHelper is a main that only says it ran.
const plainHelper = "reexec-plain"

func init() {
	testutil.Register(plainHelper, func(string) int {
		fmt.Print("plain main ran")
		return 0
	})
	testutil.Register(filterHelper, filterChild)
}

func TestMain(m *testing.M) { testutil.Main(m) }

// A binary that links nsexec runs normally without the marker, and refuses
// to start at all with a marker value it does not know.
func TestWithoutMarker(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), testutil.HelperEnviron(plainHelper, "")...)
	out, err := cmd.Output()
	if err != nil || string(out) != "plain main ran" {
		t.Fatalf("without the marker: %q, %v", out, err)
	}
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), testutil.HelperEnviron(plainHelper, "")...), nsexec.Marker+"=bogus")
	out, err = cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != nsexec.ExitSetup || len(out) > 0 {
		t.Fatalf("with an unknown marker: %q, %v; want exit %d before main", out, err, nsexec.ExitSetup)
	}
}

func TestPlanRefuses(t *testing.T) {
	ok := Plan{OuterUID: 1, OuterGID: 1, Exe: "/x", Args: []string{"x"}}
	for name, mut := range map[string]func(*Plan){
		"outer uid 0":         func(p *Plan) { p.OuterUID = 0 },
		"outer gid 0":         func(p *Plan) { p.OuterGID = 0 },
		"no exe":              func(p *Plan) { p.Exe = "" },
		"no args":             func(p *Plan) { p.Args = nil },
		"mounts without root": func(p *Plan) { p.Mounts = []Mount{{Kind: Mkdir, Target: "/x"}} },
		"relative target":     func(p *Plan) { p.Root, p.RootData = "/r", "size=1m"; p.Mounts = []Mount{{Kind: Mkdir, Target: "x"}} },
		"dotdot target": func(p *Plan) {
			p.Root, p.RootData = "/r", "size=1m"
			p.Mounts = []Mount{{Kind: Mkdir, Target: "/a/../.."}}
		},
		"landlock paths without handled accesses": func(p *Plan) { p.LandlockPaths = []LandlockPath{{Path: "/usr", Access: 1}} },
		"landlock access beyond the handled": func(p *Plan) {
			p.LandlockFS, p.LandlockPaths = 1, []LandlockPath{{Path: "/usr", Access: 3}}
		},
		"relative landlock path": func(p *Plan) { p.LandlockFS, p.LandlockPaths = 1, []LandlockPath{{Path: "usr", Access: 1}} },
		"landlock path with NUL": func(p *Plan) { p.LandlockFS, p.LandlockPaths = 1, []LandlockPath{{Path: "/usr\x00x", Access: 1}} },
		"odd seccomp":            func(p *Plan) { p.Seccomp = make([]byte, 7) },
		"too many records":       func(p *Plan) { p.Env = make([]string, nsexec.PlanMaxItems) },
	} {
		p := ok
		mut(&p)
		if _, _, err := p.encode(); !errors.Is(err, ErrInvalidPlan) {
			t.Errorf("%s: %v, want ErrInvalidPlan", name, err)
		}
	}
	if _, _, err := ok.encode(); err != nil {
		t.Fatal(err)
	}
}

func TestPlanEncoding(t *testing.T) {
	tree, err := os.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	p := Plan{OuterUID: 7, OuterGID: 8, InnerUID: 9, InnerGID: 10, Exe: "/bin/x", Args: []string{"x"},
		Root: "/r", RootData: "size=1m",
		Mounts: []Mount{{Kind: Bind, Tree: tree, Target: "/a", Attr: 3, Recursive: true}, {Kind: File, Target: "/f", Mode: 0o444, Data: bytes.Repeat([]byte("hi"), 4096)}},
		Env:    []string{"A=1"}, Rlimits: []Rlimit{{Resource: 7, Soft: 1, Hard: 2}}, Seccomp: make([]byte, 64)}
	b, trees, err := p.encode()
	if err != nil {
		t.Fatal(err)
	}
	// The size hint holds the whole plan: it is built without growing.
	if len(b) > p.sizeHint() {
		t.Fatalf("plan of %d bytes, hinted %d", len(b), p.sizeHint())
	}
	if len(trees) != 1 || trees[0] != tree {
		t.Fatalf("trees %v", trees)
	}
	if string(b[:4]) != "PSYP" {
		t.Fatalf("magic %q", b[:4])
	}
	// Walk the records: every length must land exactly on the end.
	tags := map[uint16]int{}
	for off := 8; off < len(b); {
		if off+8 > len(b) {
			t.Fatalf("truncated record header at %d", off)
		}
		tag := uint16(b[off]) | uint16(b[off+1])<<8
		n := int(uint32(b[off+4]) | uint32(b[off+5])<<8 | uint32(b[off+6])<<16 | uint32(b[off+7])<<24)
		tags[tag]++
		off += 8 + n
		if off > len(b) {
			t.Fatalf("record %d overruns the plan", tag)
		}
	}
	if tags[nsexec.TagMount] != 2 || tags[nsexec.TagOuterIDs] != 1 || tags[nsexec.TagExe] != 1 || tags[nsexec.TagArg] != 1 {
		t.Fatalf("records %v", tags)
	}
}

// startPlan runs p and returns what the interpreter printed and the error.
func startPlan(t *testing.T, p *Plan) (string, Exit, error) {
	t.Helper()
	outR, outW, _ := os.Pipe()
	wr, ww, _ := os.Pipe()
	defer ww.Close()
	defer outR.Close()
	o := &Options{Plan: p, Stdout: outW, Stderr: outW, Wire: wr, CgroupFD: -1}
	proc, err := Start(o)
	outW.Close()
	wr.Close()
	if err != nil {
		return "", Exit{}, err
	}
	out, _ := io.ReadAll(outR)
	ex, err := proc.Wait()
	return string(out), ex, err
}

func runIDs() (uint32, uint32) {
	if os.Geteuid() == 0 {
		return 65534, 65534
	}
	return uint32(os.Geteuid()), uint32(os.Getegid())
}

// reachableDir is an empty directory the run uid can reach and mount on.
func reachableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestStartNamespaces(t *testing.T) {
	uid, gid := runIDs()
	root := reachableDir(t)
	p := &Plan{
		OuterUID: uid, OuterGID: gid, InnerUID: 1000, InnerGID: 1000,
		Namespaces: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWUTS,
		Hostname:   "planned", Root: root, RootData: "size=1m,mode=0755",
		Mounts: []Mount{
			{Kind: Bind, Source: "/usr", Target: "/usr", Attr: unix.MOUNT_ATTR_RDONLY, Recursive: true},
			{Kind: Symlink, Source: "usr/lib", Target: "/lib"},
			{Kind: Symlink, Source: "usr/lib64", Target: "/lib64"},
			{Kind: Mkdir, Target: "/etc", Mode: 0o755},
			{Kind: File, Target: "/etc/motd", Mode: 0o444, Data: []byte("from the plan")},
			{Kind: Proc, Target: "/proc"},
		},
		Cwd:  "/etc",
		Exe:  "/usr/bin/python3",
		Args: []string{"python3", "-I", "-S", "-c", "import os; print(os.getuid(), os.getpid(), os.uname().nodename, open('motd').read(), sorted(os.listdir('/')))"},
	}
	out, ex, err := startPlan(t, p)
	if err != nil {
		t.Fatal(err)
	}
	want := "1000 2 planned from the plan ['etc', 'lib', 'lib64', 'proc', 'usr']\n"
	if out != want || !ex.Reported || ex.Status.ExitStatus() != 0 {
		t.Fatalf("got %q (exit %+v), want %q", out, ex, want)
	}
}

// An Overlay's layers are resolved in the new root when it is mounted, and
// Detach takes the staging away (with all mounted below it), leaving the
// overlay whole: the interpreter runs from it.
func TestStartOverlay(t *testing.T) {
	uid, gid := runIDs()
	root := reachableDir(t)
	code := "import os\nfs = [l.split(' - ')[1].split()[0] for l in open('/proc/self/mountinfo') if l.split()[4] == '/usr']\n" +
		"print(sorted(os.listdir('/')), fs, os.stat('/usr/bin/python3').st_dev == os.stat('/usr').st_dev)"
	p := &Plan{
		OuterUID: uid, OuterGID: gid, InnerUID: 1000, InnerGID: 1000,
		Namespaces: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID,
		Root:       root, RootData: "size=1m,mode=0755",
		Mounts: []Mount{
			{Kind: Tmpfs, Target: "/.stage", Data: []byte("size=4k,mode=0700")},
			{Kind: Mkdir, Target: "/.stage/empty", Mode: 0o555},
			{Kind: Mkdir, Target: "/.stage/0", Mode: 0o700},
			{Kind: Bind, Source: "/usr", Target: "/.stage/0", Attr: unix.MOUNT_ATTR_RDONLY, Recursive: true},
			{Kind: Overlay, Target: "/usr", Attr: unix.MOUNT_ATTR_RDONLY, Data: []byte("lowerdir=./.stage/0:./.stage/empty,xino=on")},
			{Kind: Symlink, Source: "usr/lib", Target: "/lib"},
			{Kind: Symlink, Source: "usr/lib64", Target: "/lib64"},
			{Kind: Detach, Target: "/.stage"},
			{Kind: Proc, Target: "/proc"},
		},
		Exe:  "/usr/bin/python3",
		Args: []string{"python3", "-I", "-S", "-c", code},
	}
	out, ex, err := startPlan(t, p)
	if err != nil {
		t.Fatal(err)
	}
	want := "['lib', 'lib64', 'proc', 'usr'] ['overlay'] True\n"
	if out != want || !ex.Reported || ex.Status.ExitStatus() != 0 {
		t.Fatalf("got %q (exit %+v), want %q", out, ex, want)
	}
	p.Mounts = []Mount{{Kind: Overlay, Target: "/usr", Data: []byte("lowerdir=./nonexistent:./also-not")}}
	p.Exe, p.Args = "/bin/true", []string{"true"}
	_, _, err = startPlan(t, p)
	var ie *InitError
	if !errors.As(err, &ie) || ie.Step != "mounts" || !strings.Contains(ie.Message, "overlay /usr") {
		t.Fatalf("an overlay of missing layers: %v, want an InitError at mounts", err)
	}
}

func TestInitReportsFailure(t *testing.T) {
	uid, gid := runIDs()
	p := &Plan{OuterUID: uid, OuterGID: gid, InnerUID: uid, InnerGID: gid, Exe: "/nonexistent/python", Args: []string{"x"}}
	_, _, err := startPlan(t, p)
	var ie *InitError
	if !errors.As(err, &ie) || ie.Step != "exec" || ie.Errno != syscall.ENOENT || !strings.Contains(ie.Message, "/nonexistent/python") {
		t.Fatalf("exec of a missing interpreter: %v, want an InitError at exec with ENOENT", err)
	}
	root := reachableDir(t)
	p = &Plan{OuterUID: uid, OuterGID: gid, InnerUID: 1000, InnerGID: 1000,
		Namespaces: unix.CLONE_NEWUSER | unix.CLONE_NEWNS, Root: root, RootData: "size=1m",
		Mounts: []Mount{{Kind: Bind, Source: "/nonexistent", Target: "/x"}},
		Exe:    "/bin/true", Args: []string{"true"}}
	_, _, err = startPlan(t, p)
	if !errors.As(err, &ie) || ie.Step != "mounts" || ie.Errno != syscall.ENOENT {
		t.Fatalf("bind of a missing tree: %v, want an InitError at mounts", err)
	}
}

// A Ready error aborts the start and leaves nothing running.
func TestReadyAborts(t *testing.T) {
	uid, gid := runIDs()
	var initPID int
	p := &Plan{OuterUID: uid, OuterGID: gid, InnerUID: uid, InnerGID: gid, Exe: "/bin/sleep", Args: []string{"sleep", "60"}}
	wr, ww, _ := os.Pipe()
	defer ww.Close()
	boom := errors.New("boom")
	_, err := Start(&Options{Plan: p, Wire: wr, CgroupFD: -1, Ready: func(pid int, nl *os.File) error { initPID = pid; return boom }})
	wr.Close()
	if !errors.Is(err, boom) {
		t.Fatalf("Start: %v, want the Ready error", err)
	}
	if err := unix.Kill(initPID, 0); err != unix.ESRCH {
		t.Fatalf("the init %d outlived an aborted start: %v", initPID, err)
	}
}

// CgroupTasks: the first process joins each v1 cgroup whose tasks file
// the host passed (by writing "0"), before the init exists, with and
// without a user namespace; the interpreter is a member.
func TestCgroupTasks(t *testing.T) {
	base := "/sys/fs/cgroup/pids"
	if _, err := os.Stat(filepath.Join(base, "tasks")); err != nil {
		t.Skipf("no v1 pids hierarchy here (%v): the pure-v2 path needs no tasks file", err)
	}
	dir := filepath.Join(base, fmt.Sprintf("psych-reexec-test-%d", os.Getpid()))
	os.Remove(dir) // an earlier test process of this pid's, if empty
	if err := os.Mkdir(dir, 0o755); err != nil {
		testutil.RequireRoot(t, fmt.Sprintf("makes a v1 cgroup (%v)", err))
		t.Fatal(err)
	}
	// The cgroup empties once its last member is gone, a moment after it
	// was reaped: retry the removal until then.
	defer func() {
		for i := 0; i < 100 && os.Remove(dir) != nil; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("the test's cgroup %s could not be removed", dir)
		}
	}()
	uid, gid := runIDs()
	for _, ns := range []bool{true, false} {
		tasks, err := os.OpenFile(filepath.Join(dir, "tasks"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		p := &Plan{OuterUID: uid, OuterGID: gid, InnerUID: uid, InnerGID: gid,
			Exe: "/bin/cat", Args: []string{"cat", "/proc/self/cgroup"}, CgroupTasks: []*os.File{tasks}}
		out, ow, _ := os.Pipe()
		wr, ww, _ := os.Pipe()
		o := &Options{Plan: p, CgroupFD: -1, Stdout: ow, Wire: wr}
		if ns {
			p.InnerUID, p.InnerGID = 1000, 1000
			p.Namespaces = unix.CLONE_NEWUSER
		}
		proc, err := Start(o)
		tasks.Close()
		ow.Close()
		wr.Close()
		ww.Close()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(out)
		out.Close()
		proc.Wait()
		if !strings.Contains(string(got), ":pids:/"+filepath.Base(dir)+"\n") {
			t.Errorf("userns %v: the interpreter's cgroups:\n%s\nwant pids:/%s", ns, got, filepath.Base(dir))
		}
	}
}

// TestKillDuringWait: Kill from other goroutines while Wait reaps the init,
// for the race detector (make test runs this package with -race). A Kill
// after the reap is a no-op, never a signal through a closed pidfd number.
func TestKillDuringWait(t *testing.T) {
	uid, gid := runIDs()
	for i := 0; i < 20; i++ {
		p := &Plan{OuterUID: uid, OuterGID: gid, InnerUID: uid, InnerGID: gid, Exe: "/bin/true", Args: []string{"true"}}
		wr, ww, _ := os.Pipe()
		proc, err := Start(&Options{Plan: p, Wire: wr, CgroupFD: -1})
		wr.Close()
		ww.Close()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { proc.Wait(); close(done) }()
		for killing := true; killing; {
			select {
			case <-done:
				killing = false
			default:
				if err := proc.Kill(); err != nil {
					t.Fatalf("Kill: %v", err)
				}
			}
		}
		if err := proc.Kill(); err != nil {
			t.Fatalf("Kill after the reap: %v", err)
		}
	}
}

// TestProbeForks checks the in-process probe: a user namespace for the run
// ids here (CI is root with user namespaces), and ids 0 refused. The
// fallback test (sandbox/subprocess) sees it answer no.
func TestProbeForks(t *testing.T) {
	uid, gid := uint32(os.Geteuid()), uint32(os.Getegid())
	if uid == 0 {
		uid, gid = 65534, 65534
	}
	ok, _, err := Probe(uid, gid)
	if err != nil || !ok {
		t.Fatalf("Probe(%d, %d) = %v, %v; want a user namespace here", uid, gid, ok, err)
	}
	if _, _, err := Probe(0, 0); err == nil {
		t.Fatal("Probe(0, 0) succeeded; ids 0 must be refused")
	}
}

// bothPaths runs f with P cloned by the fork server and started by exec.
func bothPaths(t *testing.T, f func(t *testing.T)) {
	t.Run("forkserver", func(t *testing.T) { f(t) })
	t.Run("exec", func(t *testing.T) {
		UseForkServer(false)
		defer UseForkServer(true)
		f(t)
	})
}

// A run's output, ids and namespaces are the same whichever way P started.
func TestForkServerAndExecAgree(t *testing.T) {
	uid, gid := runIDs()
	outs := map[string]string{}
	bothPaths(t, func(t *testing.T) {
		p := &Plan{
			OuterUID: uid, OuterGID: gid, InnerUID: 1000, InnerGID: 1000,
			Namespaces: unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET,
			Exe:        "/usr/bin/python3",
			Args: []string{"python3", "-I", "-S", "-c",
				"import os; print(os.getuid(), os.getpid(), os.getsid(0) == os.getpgid(0), sorted(os.listdir('/proc/self/fd')))"},
		}
		out, ex, err := startPlan(t, p)
		if err != nil || !ex.Reported || ex.Status.ExitStatus() != 0 {
			t.Fatalf("%q %+v %v", out, ex, err)
		}
		outs[t.Name()] = out
	})
	if len(outs) != 2 || outs["TestForkServerAndExecAgree/forkserver"] != outs["TestForkServerAndExecAgree/exec"] {
		t.Fatalf("the two paths differ: %q", outs)
	}
	// fd 4 is listdir's own.
	if want := "1000 2 True ['0', '1', '2', '3', '4']\n"; outs["TestForkServerAndExecAgree/exec"] != want {
		t.Fatalf("got %q, want %q", outs["TestForkServerAndExecAgree/exec"], want)
	}
}

// A fork server that died (killed from outside) is started again by the
// next Start, which still runs.
func TestForkServerRestarts(t *testing.T) {
	uid, gid := runIDs()
	p := &Plan{OuterUID: uid, OuterGID: gid, InnerUID: uid, InnerGID: gid, Exe: "/bin/true", Args: []string{"true"}}
	run := func() {
		t.Helper()
		if out, ex, err := startPlan(t, p); err != nil || !ex.Reported || ex.Status.ExitStatus() != 0 {
			t.Fatalf("%q %+v %v", out, ex, err)
		}
	}
	run()
	first := ForkServerPID()
	if first == 0 {
		t.Fatal("no fork server after a Start")
	}
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/environ", first)); err != nil || processGone(first) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed fork server is still there")
		}
	}
	run()
	if second := ForkServerPID(); second == 0 || second == first {
		t.Fatalf("fork server %d after %d was killed; want a new one", second, first)
	}
}

// processGone is a pid that no longer runs (exited, or a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

// The server takes nothing but its socket from the host: no descriptor of
// the host's (this test holds one open without close-on-exec).
func TestForkServerHoldsOnlyItsSocket(t *testing.T) {
	uid, gid := runIDs()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	p := &Plan{OuterUID: uid, OuterGID: gid, InnerUID: uid, InnerGID: gid, Exe: "/bin/true", Args: []string{"true"}}
	if _, _, err := startPlan(t, p); err != nil {
		t.Fatal(err)
	}
	pid := ForkServerPID()
	if pid == 0 {
		t.Fatal("no fork server")
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for _, e := range ents {
		fds = append(fds, e.Name())
	}
	if strings.Join(fds, ",") != "0,1,2,3" {
		t.Fatalf("the fork server holds fds %v; want 0-3 only", fds)
	}
}

// TestLowerAndReported: after the exec the init lowers the interpreter's
// rlimits on the host's word (never raising a hard one), the kernel shows
// them, and the exit is reported before the init's reap.
func TestLowerAndReported(t *testing.T) {
	uid, gid := runIDs()
	p := &Plan{OuterUID: uid, OuterGID: gid, InnerUID: uid, InnerGID: gid,
		Exe: "/bin/sh", Args: []string{"sh", "-c", "read _ <&3; exit 7"},
		Rlimits: []Rlimit{{Resource: unix.RLIMIT_NOFILE, Soft: 512, Hard: 512}, {Resource: unix.RLIMIT_FSIZE, Soft: 1 << 20, Hard: 1 << 20}}}
	wr, ww, _ := os.Pipe()
	defer ww.Close()
	proc, err := Start(&Options{Plan: p, Wire: wr, CgroupFD: -1})
	wr.Close()
	if err != nil {
		t.Fatal(err)
	}
	var ex Exit
	reaped := make(chan struct{})
	go func() { ex, _ = proc.Wait(); close(reaped) }()
	// NOFILE above its hard limit stays at it; FSIZE comes down.
	err = proc.Lower([]Rlimit{{Resource: unix.RLIMIT_NOFILE, Soft: 4096, Hard: 4096}, {Resource: unix.RLIMIT_FSIZE, Soft: 4096, Hard: 8192}}, 5*time.Second)
	if err != nil {
		t.Fatalf("Lower: %v", err)
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", proc.InterpPID))
	for _, want := range []string{"Max open files            512                  512", "Max file size             4096                 8192"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("limits lack %q:\n%s", want, b)
		}
	}
	if err := proc.Lower(make([]Rlimit, nsexec.LowerMax+1), time.Second); !errors.Is(err, ErrInvalidPlan) {
		t.Errorf("too many rlimits: %v, want ErrInvalidPlan", err)
	}
	ww.Write([]byte("go\n"))
	<-proc.Reported()
	if st, ok := proc.ReportedStatus(); !ok || st.ExitStatus() != 7 {
		t.Errorf("reported %v %v, want exit 7", st, ok)
	}
	<-reaped
	if !ex.Reported || ex.Status.ExitStatus() != 7 {
		t.Errorf("Wait: %+v, want exit 7 reported", ex)
	}
	if err := proc.Lower(nil, time.Second); err == nil {
		t.Error("Lower after the init is gone succeeded")
	}
}

// TestInitFiles: each descriptor lands at the number nsexec.h names (the
// exec.Cmd puts ExtraFiles[i] at fd 3+i), the trees from PSYCH_FD_TREES on.
func TestInitFiles(t *testing.T) {
	sync, wire, plan := os.NewFile(10, "sync"), os.NewFile(11, "wire"), os.NewFile(12, "plan")
	trees := []*os.File{os.NewFile(13, "tree0"), os.NewFile(14, "tree1")}
	files := initFiles(sync, wire, plan, trees)
	at := func(fd int) *os.File { return files[fd-3] }
	if at(nsexec.FDSync) != sync || at(nsexec.FDWire) != wire || at(nsexec.FDPlan) != plan {
		t.Errorf("the sync socket, wire and plan are not at fds %d, %d, %d", nsexec.FDSync, nsexec.FDWire, nsexec.FDPlan)
	}
	if len(files) != nsexec.FDTrees-3+len(trees) || at(nsexec.FDTrees) != trees[0] || at(nsexec.FDTrees+1) != trees[1] {
		t.Errorf("the trees are not from fd %d on: %v", nsexec.FDTrees, files)
	}
}
