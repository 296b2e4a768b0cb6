//go:build linux && cgo

package reexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/testutil"
)

// The init checks every call a security property rests on. These tests
// start it under a seccomp filter it inherits, which makes one such call
// fail, or return success without effect (SECCOMP_RET_ERRNO with errno 0),
// and want the start refused with an InitError naming the step. Filters are
// installed in a child process, never in the test process.

// filterHelper is the child that installs the filter; its argument is
// the filterCase as JSON.
const filterHelper = "reexec-filter"

// filterCase is one call the filter interferes with.
type filterCase struct {
	Name   string
	NR     uint32 // the syscall
	Option uint32 // for prctl, its option (args[0]); 0 matches any call
	Errno  uint32 // 0: the call "succeeds" without running
	Step   string // the step the init must report
	// UserNS runs the plan in a user namespace, where the init holds
	// capabilities until it drops them.
	UserNS bool
	// Runs: the start must succeed (Step is empty).
	Runs bool
}

var filterCases = []filterCase{
	{"pdeathsig ignored", unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, 0, "pdeathsig", false, false},
	{"dumpable refused", unix.SYS_PRCTL, unix.PR_SET_DUMPABLE, uint32(unix.EPERM), "dumpable", false, false},
	{"dumpable ignored", unix.SYS_PRCTL, unix.PR_SET_DUMPABLE, 0, "dumpable", false, false},
	{"no_new_privs ignored", unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 0, "capabilities", false, false},
	{"capset ignored", unix.SYS_CAPSET, 0, 0, "capabilities", true, false},
	{"no_new_privs ignored, user namespace", unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 0, "capabilities", true, false},
	{"landlock refused", unix.SYS_LANDLOCK_RESTRICT_SELF, 0, uint32(unix.EPERM), "landlock", false, false},
	{"landlock ruleset refused", unix.SYS_LANDLOCK_CREATE_RULESET, 0, uint32(unix.ENOSYS), "landlock", false, false},
	// A host under a container engine's default filter has no clone3: the
	// fork server cannot clone P, and the start takes the exec path.
	{"clone3 missing", unix.SYS_CLONE3, 0, uint32(unix.ENOSYS), "", true, true},
}

// installFilter loads a filter on every thread of this process that gives
// c's call c.Errno and allows everything else.
func installFilter(c filterCase) error {
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		deny = unix.SECCOMP_RET_ERRNO
	)
	prog := []unix.SockFilter{
		{Code: ldW, K: 0}, // nr
		{Code: jeq, K: c.NR, Jt: 0, Jf: 3},
		{Code: ldW, K: 16}, // args[0], low word
		{Code: jeq, K: c.Option, Jt: 1, Jf: 0},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		{Code: ret, K: deny | c.Errno},
	}
	if c.Option == 0 {
		// Any call of NR: jump straight to the action.
		prog = []unix.SockFilter{
			{Code: ldW, K: 0},
			{Code: jeq, K: c.NR, Jt: 1, Jf: 0},
			{Code: ret, K: unix.SECCOMP_RET_ALLOW},
			{Code: ret, K: deny | c.Errno},
		}
	} else {
		prog[4] = unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW}
		prog[3].Jt, prog[3].Jf = 2, 1
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	runtime.LockOSThread()
	// Root (CAP_SYS_ADMIN) needs no no_new_privs to load a filter, and must
	// not set it: the init's own no_new_privs is under test.
	if os.Geteuid() != 0 {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return err
		}
	}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return os.NewSyscallError("seccomp", errno)
	}
	return nil
}

// filterChild runs in the child: installs the filter, starts a plan with
// Landlock scopes, and prints what Start returned.
func filterChild(spec string) int {
	var c filterCase
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		fmt.Println(err)
		return 2
	}
	if err := installFilter(c); err != nil {
		fmt.Printf(`{"setup": %q}`, err.Error())
		return 0
	}
	uid, gid := runIDs()
	p := &Plan{OuterUID: uid, OuterGID: gid, InnerUID: uid, InnerGID: gid, Exe: "/bin/true", Args: []string{"true"},
		Landlock: 1 | 2}
	o := &Options{Plan: p, CgroupFD: -1}
	if c.UserNS {
		p.Namespaces = unix.CLONE_NEWUSER
		p.InnerUID, p.InnerGID = 1000, 1000
	}
	wr, ww, _ := os.Pipe()
	o.Wire = wr
	proc, err := Start(o)
	wr.Close()
	ww.Close()
	out := map[string]any{}
	var ie *InitError
	switch {
	case errors.As(err, &ie):
		out["step"], out["errno"], out["message"] = ie.Step, int(ie.Errno), ie.Message
	case err != nil:
		out["error"] = err.Error()
	default:
		ex, _ := proc.Wait()
		out["ran"] = ex.Status.ExitStatus()
	}
	b, _ := json.Marshal(out)
	fmt.Print(string(b))
	return 0
}

func TestInitChecksSecurityCalls(t *testing.T) {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1)
	landlock := errno == 0 && abi >= 6
	for _, c := range filterCases {
		t.Run(c.Name, func(t *testing.T) {
			switch {
			case (c.NR == unix.SYS_LANDLOCK_RESTRICT_SELF || c.NR == unix.SYS_LANDLOCK_CREATE_RULESET) && !landlock:
				t.Skipf("the kernel has no Landlock ABI 6 (%d, %v): no scopes are applied", abi, errno)
			case c.Option == unix.PR_SET_DUMPABLE && c.Errno == 0 && os.Geteuid() == 0:
				// A root host's first process switches to the run uid,
				// which alone makes it non-dumpable; the unprivileged pass
				// (scripts/test-unpriv.sh) runs this case.
				t.Skip("a root host's uid switch already makes the init non-dumpable")
			case c.Option == unix.PR_SET_NO_NEW_PRIVS && os.Geteuid() != 0:
				// A non-root process needs no_new_privs to load the test's
				// filter; the root pass runs this case.
				t.Skip("loading the test filter as non-root sets no_new_privs itself")
			}
			spec, _ := json.Marshal(c)
			cmd := testutil.HelperCommand(filterHelper, string(spec))
			b, err := cmd.Output()
			if err != nil {
				t.Fatalf("child: %v: %s", err, b)
			}
			var got struct {
				Step, Message, Error, Setup string
				Errno                       int
				Ran                         *int
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("child printed %q: %v", b, err)
			}
			if got.Setup != "" {
				t.Fatalf("installing the test filter: %s", got.Setup)
			}
			if c.Runs {
				if got.Ran == nil || *got.Ran != 0 {
					t.Fatalf("start under a filter on %s: %s; want the plan run", c.Name, b)
				}
				return
			}
			if got.Step != c.Step {
				t.Fatalf("init under a filter on %s: %s; want an InitError at %q", c.Name, b, c.Step)
			}
			if c.Errno != 0 && got.Errno != int(c.Errno) {
				t.Errorf("errno %d, want %d (%s)", got.Errno, c.Errno, syscall.Errno(c.Errno))
			}
		})
	}
}
