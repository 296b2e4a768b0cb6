//go:build linux && cgo

package seccomp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/testutil"
)

// The filter is installed only in a re-executed child of the test binary
// (the helper childHelper, its argument the child's mode), never in the
// test process: seccomp cannot be undone.
const (
	childHelper = "seccomp-child"
	pythonEnv   = "PSYCH_SECCOMP_TEST_PYTHON" // the interpreter the child runs
)

func init() { testutil.Register(childHelper, child) }

func TestMain(m *testing.M) { testutil.Main(m) }

// child sets no_new_privs, installs the default filter unless mode is a
// control, and runs the probes of its mode. Exit code 2: setup failed.
func child(mode string) int {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "prctl(PR_SET_NO_NEW_PRIVS):", err)
		return 2
	}
	switch mode {
	case "control", "x32-control":
	case "filter", "x32-filter":
		f, err := DefaultFilter()
		if err == nil {
			err = install(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", mode)
		return 2
	}
	if strings.HasPrefix(mode, "x32") {
		// No core file from the expected SIGSYS.
		_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
		_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
		_, _, errno := unix.RawSyscall(unix.SYS_GETPID|X32SyscallBit, 0, 0, 0)
		fmt.Printf("survived x32 getpid: errno %d\n", errno)
		return 0
	}
	if err := json.NewEncoder(os.Stdout).Encode(runProbes()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// install loads f into this process, all threads, as the sandbox's init
// does (without TSYNC there: it is single-threaded).
func install(f *Filter) error {
	raw := f.Bytes()
	prog := unix.SockFprog{Len: uint16(f.Len()), Filter: (*unix.SockFilter)(unsafe.Pointer(&raw[0]))}
	r1, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(raw)
	if errno != 0 {
		return os.NewSyscallError("seccomp", errno)
	}
	if r1 != 0 {
		return fmt.Errorf("seccomp: thread %d could not be synchronised", r1)
	}
	return nil
}

// probeResult is what one probe saw: errno 0 for success.
type probeResult struct {
	Errno  syscall.Errno `json:"errno"`
	Detail string        `json:"detail,omitempty"`
}

func errnoOf(err error) probeResult {
	if err == nil {
		return probeResult{}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return probeResult{Errno: errno}
	}
	return probeResult{Errno: ^syscall.Errno(0), Detail: err.Error()}
}

func closeFd(fd int, err error) error {
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func rawErr(errno syscall.Errno) error {
	if errno == 0 {
		return nil
	}
	return errno
}

func runProbes() map[string]probeResult {
	devNull, err := os.Open("/dev/null")
	if err != nil {
		panic(err)
	}
	defer devNull.Close()
	r := map[string]probeResult{}
	do := func(name string, fn func() error) { r[name] = errnoOf(fn()) }

	// Succeed without privilege and without a filter.
	do("unshare(0)", func() error { return unix.Unshare(0) })
	do("clone(CLONE_NEWUSER)", func() error {
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
		return cmd.Run()
	})
	do("keyctl(KEYCTL_GET_KEYRING_ID)", func() error {
		_, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_PROCESS_KEYRING, true)
		return err
	})
	do("add_key", func() error {
		_, err := unix.AddKey("user", "psych-seccomp-test", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
		return err
	})
	do("io_uring_setup", func() error {
		var params [120]byte // struct io_uring_params
		fd, _, errno := unix.RawSyscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
		return closeFd(int(fd), rawErr(errno))
	})
	do("socket(AF_VSOCK)", func() error {
		return closeFd(unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0))
	})
	do("socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT)", func() error {
		return closeFd(unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_KOBJECT_UEVENT))
	})
	do("process_vm_readv(self)", func() error {
		src, dst := uint64(42), uint64(0)
		local := []unix.Iovec{{Base: (*byte)(unsafe.Pointer(&dst)), Len: 8}}
		remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&src)), Len: 8}}
		_, err := unix.ProcessVMReadv(os.Getpid(), local, remote, 0)
		return err
	})
	do("personality(ADDR_NO_RANDOMIZE)", func() error {
		prev, _, errno := unix.RawSyscall(unix.SYS_PERSONALITY, addrNoRandomize, 0, 0)
		if errno == 0 {
			unix.RawSyscall(unix.SYS_PERSONALITY, prev, 0, 0)
		}
		return rawErr(errno)
	})

	// Fail either way, differently.
	do("clone3(NULL, 0)", func() error {
		_, _, errno := unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
		return rawErr(errno)
	})
	do("ioctl(/dev/null, TIOCSTI)", func() error {
		c := byte('x')
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, devNull.Fd(), unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		return rawErr(errno)
	})
	do("ioctl(/dev/null, TIOCSTI|1<<32)", func() error {
		c := byte('x')
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, devNull.Fd(), 1<<32|unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		return rawErr(errno)
	})

	// Ordinary work.
	r["/proc/self/status"] = statusProbe()
	do("write, read and remove a file", func() error {
		f, err := os.CreateTemp("", "psych-seccomp-*")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		if _, err := f.WriteString("hello"); err != nil {
			return err
		}
		b, err := os.ReadFile(f.Name())
		if err == nil && string(b) != "hello" {
			err = fmt.Errorf("read back %q", b)
		}
		return err
	})
	do("exec /bin/true", func() error { return exec.Command("/bin/true").Run() })
	do("new OS threads", func() error {
		// A locked goroutine that exits takes its thread with it, so the
		// runtime must clone new ones.
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { runtime.LockOSThread() })
		}
		wg.Wait()
		return nil
	})
	do("socket(AF_NETLINK, NETLINK_ROUTE)", func() error {
		return closeFd(unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE))
	})
	do("socket(AF_INET6)", func() error {
		return closeFd(unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0))
	})
	do("socketpair(AF_UNIX) and FIONREAD", func() error {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fds[0])
		defer unix.Close(fds[1])
		if _, err := unix.Write(fds[0], []byte("abc")); err != nil {
			return err
		}
		n, err := unix.IoctlGetInt(fds[1], unix.TIOCINQ)
		if err == nil && n != 3 {
			err = fmt.Errorf("FIONREAD %d, want 3", n)
		}
		return err
	})
	r["python"] = pythonProbe()
	return r
}

// statusProbe reports the kernel's view of this process's seccomp state.
func statusProbe() probeResult {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return errnoOf(err)
	}
	defer f.Close()
	var fields []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, _ := strings.Cut(s.Text(), ":")
		switch k {
		case "NoNewPrivs", "Seccomp", "Seccomp_filters":
			fields = append(fields, k+"="+strings.TrimSpace(v))
		}
	}
	return probeResult{Detail: strings.Join(fields, " ")}
}

// pythonScript does what an ordinary program does, and reports each step's
// errno as JSON. Threads and subprocess go through glibc's clone3, which
// must fall back to clone.
const pythonScript = `
import json, os, socket, subprocess, tempfile, threading
r = {}
def probe(name, fn):
    try:
        fn()
        r[name] = 0
    except OSError as e:
        r[name] = e.errno
def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
def thread():
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
def tmp():
    with tempfile.TemporaryFile() as f:
        f.write(b"x")
probe("if_nameindex", socket.if_nameindex)
probe("getaddrinfo localhost", lambda: socket.getaddrinfo("localhost", 80))
probe("socketpair", lambda: [s.close() for s in socket.socketpair()])
probe("inet socket", lambda: socket.socket().close())
probe("thread", thread)
probe("fork", fork)
probe("subprocess", lambda: subprocess.run(["/bin/true"], check=True))
probe("tempfile", tmp)
probe("vsock", lambda: socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close())
print(json.dumps(r))
`

func pythonProbe() probeResult {
	out, err := exec.Command(os.Getenv(pythonEnv), "-I", "-c", pythonScript).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return probeResult{Errno: ^syscall.Errno(0), Detail: fmt.Sprintf("%v: %s", err, ee.Stderr)}
		}
		return errnoOf(err)
	}
	return probeResult{Detail: strings.TrimSpace(string(out))}
}

// pythonPath resolves python3 on PATH (perhaps a pyenv shim) to the
// interpreter itself.
func pythonPath(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("find python3 (the sandbox's interpreter): %v", err)
	}
	return strings.TrimSpace(string(out))
}

func runChild(t *testing.T, mode, python string) (stdout []byte, err error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), testutil.HelperEnviron(childHelper, mode)...), pythonEnv+"="+python)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if errOut.Len() > 0 {
		t.Logf("%s child stderr: %s", mode, errOut.Bytes())
	}
	return out.Bytes(), err
}

func probeChild(t *testing.T, mode, python string) map[string]probeResult {
	t.Helper()
	out, err := runChild(t, mode, python)
	if err != nil {
		t.Fatalf("%s child: %v (stdout %q)", mode, err, out)
	}
	var r map[string]probeResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%s child: %v (stdout %q)", mode, err, out)
	}
	return r
}

// TestInstalledFilter installs the default filter in a child and shows
// that it, and nothing else, denies what the policy denies: a control child
// with no_new_privs and no filter runs the same probes.
func TestInstalledFilter(t *testing.T) {
	python := pythonPath(t)
	filtered := probeChild(t, "filter", python)
	control := probeChild(t, "control", python)

	want := map[string]struct{ filter, control syscall.Errno }{
		"unshare(0)":                    {unix.EPERM, 0},
		"clone(CLONE_NEWUSER)":          {unix.EPERM, 0},
		"keyctl(KEYCTL_GET_KEYRING_ID)": {unix.EPERM, 0},
		"add_key":                       {unix.EPERM, 0},
		"io_uring_setup":                {unix.EPERM, 0},
		"socket(AF_VSOCK)":              {unix.EPERM, 0},
		"socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT)": {unix.EPERM, 0},
		"process_vm_readv(self)":                     {unix.EPERM, 0},
		"personality(ADDR_NO_RANDOMIZE)":             {unix.EPERM, 0},
		"clone3(NULL, 0)":                            {unix.ENOSYS, unix.EINVAL},
		"ioctl(/dev/null, TIOCSTI)":                  {unix.EPERM, unix.ENOTTY},
		"ioctl(/dev/null, TIOCSTI|1<<32)":            {unix.EPERM, unix.ENOTTY},
		"/proc/self/status":                          {0, 0},
		"write, read and remove a file":              {0, 0},
		"exec /bin/true":                             {0, 0},
		"new OS threads":                             {0, 0},
		"socket(AF_NETLINK, NETLINK_ROUTE)":          {0, 0},
		"socket(AF_INET6)":                           {0, 0},
		"socketpair(AF_UNIX) and FIONREAD":           {0, 0},
		"python":                                     {0, 0},
	}
	for name, w := range want {
		f, c := filtered[name], control[name]
		if f.Errno != w.filter {
			t.Errorf("%s under the filter: errno %d (%v) %s, want %d (%v)", name, f.Errno, f.Errno, f.Detail, w.filter, w.filter)
		}
		if c.Errno != w.control {
			t.Errorf("%s in the control: errno %d (%v) %s, want %d (%v)", name, c.Errno, c.Errno, c.Detail, w.control, w.control)
		}
	}
	for name := range filtered {
		if _, ok := want[name]; !ok {
			t.Errorf("probe %q has no expectation", name)
		}
	}

	if got, want := filtered["/proc/self/status"].Detail, "NoNewPrivs=1 Seccomp=2 Seccomp_filters=1"; got != want {
		t.Errorf("filtered child status %q, want %q", got, want)
	}
	if got, want := control["/proc/self/status"].Detail, "NoNewPrivs=1 Seccomp=0 Seccomp_filters=0"; got != want {
		t.Errorf("control child status %q, want %q", got, want)
	}

	for mode, r := range map[string]map[string]probeResult{"filter": filtered, "control": control} {
		var steps map[string]syscall.Errno
		if err := json.Unmarshal([]byte(r["python"].Detail), &steps); err != nil {
			t.Errorf("%s: python output %q: %v", mode, r["python"].Detail, err)
			continue
		}
		for _, step := range []string{"if_nameindex", "getaddrinfo localhost", "socketpair", "inet socket", "thread", "fork", "subprocess", "tempfile", "vsock"} {
			wantErrno := syscall.Errno(0)
			if step == "vsock" && mode == "filter" {
				wantErrno = unix.EPERM
			}
			if got, ok := steps[step]; !ok || got != wantErrno {
				t.Errorf("%s: python %s: errno %d (reported %v), want %d", mode, step, got, ok, wantErrno)
			}
		}
	}
}

// TestInstalledFilterKillsX32 makes an x32 syscall in a child: the filter
// kills it with SIGSYS; without the filter it survives.
func TestInstalledFilterKillsX32(t *testing.T) {
	out, err := runChild(t, "x32-filter", "")
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("filtered child: %v, stdout %q; want death by SIGSYS", err, out)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != unix.SIGSYS {
		t.Fatalf("filtered child: %v, stdout %q; want death by SIGSYS", err, out)
	}

	out, err = runChild(t, "x32-control", "")
	if err != nil || !bytes.HasPrefix(out, []byte("survived")) {
		t.Fatalf("control child: %v, stdout %q; want it to survive", err, out)
	}
}
