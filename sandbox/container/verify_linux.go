//go:build linux && cgo

package container

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/eintr"
)

// engineEnv are the variables an engine adds to a container's first
// process whatever the image says (docker: PATH, HOSTNAME, HOME; with a
// terminal TERM; podman: container). Their names do not reach the loader
// and psych's init reads none of them; anything else in the init's start
// environment but psych's own came from somewhere it must not.
var engineEnv = []string{"PATH", "HOSTNAME", "HOME", "TERM", "container"}

// checkInitEnv refuses an init whose start environment (/proc/PID/environ,
// as the kernel keeps it from the execve) holds a variable that neither
// psych (want, NAME=value each) nor the engine set: an image's ENV
// (LD_PRELOAD, GLIBC_TUNABLES, psych's own _PSYCH_NSEXEC_DIR) would have
// reached the loader and the init before any check.
func checkInitEnv(pid int, want []string) error {
	f, err := os.Open(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return fmt.Errorf("read the init's environment: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return fmt.Errorf("read the init's environment: %w", err)
	}
	var extra []string
	for _, kv := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
		if len(kv) == 0 || slices.Contains(want, string(kv)) {
			continue
		}
		k, _, _ := strings.Cut(string(kv), "=")
		if !slices.Contains(engineEnv, k) {
			extra = append(extra, fmt.Sprintf("%.64q", k))
		}
	}
	if len(extra) > 0 {
		return fmt.Errorf("the container's init started with variables psych did not set (%s)", strings.Join(extra, ", "))
	}
	return nil
}

// seccompFilters reads, through ptrace (PTRACE_SECCOMP_GET_FILTER, which
// needs CAP_SYS_ADMIN, no seccomp filter on this host process, and a kernel
// with checkpoint/restore),
// how many seccomp filters pid has and the digest of the newest ("sha256:"
// and the hex SHA-256 of its sock_filter array, as seccomp.Filter.Digest).
// The process is stopped for the reading and resumed after it, with any
// signal that arrived meanwhile delivered.
func seccompFilters(pid int) (count int, newest string, err error) {
	runtime.LockOSThread() // ptrace's tracer is a thread
	defer runtime.UnlockOSThread()
	if err := unix.PtraceSeize(pid); err != nil {
		return 0, "", fmt.Errorf("ptrace seize %d: %w", pid, err)
	}
	sig := 0
	defer func() { unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(pid), 0, uintptr(sig), 0, 0) }()
	if err := unix.PtraceInterrupt(pid); err != nil {
		return 0, "", fmt.Errorf("ptrace interrupt %d: %w", pid, err)
	}
	// Bounded: a process that cannot stop (frozen) fails the check, and is
	// killed with its run.
	var ws unix.WaitStatus
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		got, err := eintr.Value(func() (int, error) { return unix.Wait4(pid, &ws, unix.WALL|unix.WNOHANG, nil) })
		if err == nil && got == 0 && time.Now().Before(end) {
			continue
		}
		if err != nil || got == 0 {
			return 0, "", fmt.Errorf("wait for %d to stop: %v", pid, err)
		}
		break
	}
	if !ws.Stopped() {
		return 0, "", fmt.Errorf("process %d ended while its filters were read", pid)
	}
	if uint32(ws)>>16 != unix.PTRACE_EVENT_STOP {
		sig = int(ws.StopSignal()) // a signal-delivery stop: the signal is passed on at detach
	}
	get := func(i int, buf []byte) (int, error) {
		var p unsafe.Pointer
		if len(buf) > 0 {
			p = unsafe.Pointer(&buf[0])
		}
		n, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SECCOMP_GET_FILTER, uintptr(pid), uintptr(i), uintptr(p), 0, 0)
		if errno != 0 {
			return 0, errno
		}
		return int(n), nil
	}
	for ; count < 1024; count++ {
		if _, err := get(count, nil); err != nil {
			if errors.Is(err, unix.ENOENT) {
				break
			}
			return 0, "", fmt.Errorf("read the seccomp filters of %d: %w", pid, err)
		}
	}
	if count == 0 {
		return 0, "", nil
	}
	// The kernel counts from the oldest: the newest is the last.
	n, err := get(count-1, nil)
	if err != nil || n <= 0 || n > 1<<16 {
		return 0, "", fmt.Errorf("read the newest seccomp filter of %d: %d instructions, %v", pid, n, err)
	}
	buf := make([]byte, n*8) // struct sock_filter
	if _, err := get(count-1, buf); err != nil {
		return 0, "", fmt.Errorf("read the newest seccomp filter of %d: %w", pid, err)
	}
	sum := sha256.Sum256(buf)
	return count, "sha256:" + hex.EncodeToString(sum[:]), nil
}
