package eintr

import (
	"errors"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestRecvmsgInterrupted blocks Recvmsg on a socket with a receive timeout,
// which the kernel never restarts after a signal handler (signal(7)), and
// signals its thread with SIGURG (the Go runtime's preemption signal, which
// it handles) until the call is interrupted at least once; Recvmsg must
// still return the message sent after.
func TestRecvmsgInterrupted(t *testing.T) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	tv := unix.NsecToTimeval((20 * time.Second).Nanoseconds())
	if err := unix.SetsockoptTimeval(pair[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	type got struct {
		n   int
		err error
	}
	tid, done := make(chan int, 1), make(chan got, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid <- unix.Gettid()
		buf := make([]byte, 16)
		n, _, err := Recvmsg(pair[0], buf, nil, 0)
		done <- got{n, err}
	}()
	thread := <-tid
	// Signal for a while: the call is blocked in the kernel for most of it.
	for range 50 {
		if err := unix.Tgkill(os.Getpid(), thread, unix.SIGURG); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if _, err := unix.Write(pair[1], []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.n != 5 {
		t.Fatalf("Recvmsg = %d, %v, want the 5-byte message", r.n, r.err)
	}
}

func TestNamedErrors(t *testing.T) {
	var info unix.Siginfo
	var st unix.Statfs_t
	for _, tc := range []struct {
		call string
		err  error
		want unix.Errno
	}{
		{"waitid", Waitid(unix.P_PID, 0x7ffffff0, &info, unix.WEXITED, nil), unix.ECHILD},
		{"fstatfs", Fstatfs(-1, &st), unix.EBADF},
		{"recvmsg", func() error { _, _, err := Recvmsg(-1, make([]byte, 1), nil, 0); return err }(), unix.EBADF},
	} {
		var se *os.SyscallError
		if !errors.As(tc.err, &se) || se.Syscall != tc.call || !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: error %v, want an os.SyscallError naming %s with %v", tc.call, tc.err, tc.call, tc.want)
		}
	}
}

// TestWaitid reaps a real child and reads its exit status.
func TestWaitid(t *testing.T) {
	pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", "exit 3"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	var info unix.Siginfo
	if err := Waitid(unix.P_PID, pid, &info, unix.WEXITED, nil); err != nil {
		t.Fatal(err)
	}
	// struct siginfo for SIGCHLD: si_signo, si_errno, si_code, a pad, then
	// si_pid, si_uid, si_status.
	b := (*[24]int32)(unsafe.Pointer(&info))
	if b[0] != int32(unix.SIGCHLD) || b[4] != int32(pid) || b[6] != 3 {
		t.Errorf("siginfo %v, want SIGCHLD from %d with status 3", b[:8], pid)
	}
	dir, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	var st unix.Statfs_t
	if err := Fstatfs(int(dir.Fd()), &st); err != nil || st.Blocks == 0 {
		t.Errorf("Fstatfs(a directory) = %v, %d blocks", err, st.Blocks)
	}
}
