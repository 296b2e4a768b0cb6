//go:build linux && cgo

package reexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/netns"
	"github.com/psych-runtime/psych/nsexec"
)

// startContainerInit plays an engine: it starts this binary in container
// mode as the run uid, with the plan in dir, as a plain child.
func startContainerInit(t *testing.T, p *Plan) (*net.UnixListener, *exec.Cmd, *os.File) {
	t.Helper()
	dir := reachableDir(t)
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, nsexec.ContainerPlan), b, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: filepath.Join(dir, nsexec.ContainerSync), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	os.Chmod(filepath.Join(dir, nsexec.ContainerSync), 0o777)
	outR, outW, _ := os.Pipe()
	t.Cleanup(func() { outR.Close() })
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = ContainerEnv(dir)
	cmd.Stdout, cmd.Stderr = outW, outW
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: p.OuterUID, Gid: p.OuterGID}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return l, cmd, outR
}

func TestAcceptContainerInit(t *testing.T) {
	uid, gid := runIDs()
	p := &Plan{OuterUID: uid, OuterGID: gid, InnerUID: uid, InnerGID: gid, Cwd: "/", Landlock: 0,
		Exe: "/usr/bin/python3", Args: []string{"python3", "-I", "-S", "-c",
			"import os, sys\nprint(sys.stdin.read() == '', sorted(os.listdir('/proc/self/fd')), os.environ.get('ONLY'), os.getuid(), flush=True)\n" +
				"os.kill(os.getpid(), 11)"},
		Env: []string{"ONLY=this"}}
	l, cmd, out := startContainerInit(t, p)
	var readyPID int
	proc, err := Accept(context.Background(), &AcceptOptions{Listener: l, UID: int(uid), Ready: func(pid int) error { readyPID = pid; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if proc.InitPID != cmd.Process.Pid || readyPID != proc.InitPID || proc.InterpPID == 0 {
		t.Fatalf("init pid %d (ready %d), want %d; interpreter %d", proc.InitPID, readyPID, cmd.Process.Pid, proc.InterpPID)
	}
	got, _ := io.ReadAll(out)
	ex, err := proc.Wait()
	if err != nil || !ex.Reported || !ex.Status.Signaled() || ex.Status.Signal() != syscall.SIGSEGV {
		t.Fatalf("exit %+v, %v; want the SIGSEGV reported", ex, err)
	}
	if want := "True ['0', '1', '2', '3'] this "; !strings.HasPrefix(string(got), want) {
		t.Errorf("the interpreter saw %q, want stdin at EOF, fds 0-2 only (3 is the listing's own), the plan's env (prefix %q)", got, want)
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 128+11 {
		t.Errorf("the init exited %d, want 139 (128+SIGSEGV) for the engine", code)
	}
}

// TestContainerInitIdles: while its interpreter sleeps, the init burns no
// CPU (it waits on its sync socket and signalfd).
func TestContainerInitIdles(t *testing.T) {
	uid, gid := runIDs()
	p := &Plan{OuterUID: uid, OuterGID: gid, InnerUID: uid, InnerGID: gid, Cwd: "/",
		Exe: "/bin/sleep", Args: []string{"sleep", "1"}}
	l, _, _ := startContainerInit(t, p)
	proc, err := Accept(context.Background(), &AcceptOptions{Listener: l, UID: int(uid)})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", proc.InitPID))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	if ticks := utime + stime; ticks > 20 {
		t.Errorf("the init used %d clock ticks of CPU while its interpreter slept", ticks)
	}
	if ex, _ := proc.Wait(); !ex.Reported || ex.Status.ExitStatus() != 0 {
		t.Errorf("exit %+v", ex)
	}
}

func TestAcceptRefuses(t *testing.T) {
	uid, gid := runIDs()
	p := &Plan{OuterUID: uid, OuterGID: gid, InnerUID: uid, InnerGID: gid, Exe: "/bin/sleep", Args: []string{"sleep", "60"}}
	// A peer of the wrong uid.
	l, cmd, _ := startContainerInit(t, p)
	if _, err := Accept(context.Background(), &AcceptOptions{Listener: l, UID: int(uid) + 1}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a peer of another uid: %v, want ErrProtocol", err)
	}
	cmd.Wait()
	// A Ready error aborts and kills the init.
	l, cmd, _ = startContainerInit(t, p)
	boom := errors.New("boom")
	if _, err := Accept(context.Background(), &AcceptOptions{Listener: l, UID: -1, Ready: func(int) error { return boom }}); !errors.Is(err, boom) {
		t.Fatalf("Accept: %v, want the Ready error", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the init outlived an aborted Accept")
	}
	// Nobody connects: ctx ends the wait.
	l2, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "s"), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := Accept(ctx, &AcceptOptions{Listener: l2, UID: -1}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("nobody connecting: %v, want the context's error", err)
	}
	// A plan that asks for namespaces is refused in container mode.
	p.Namespaces = unix.CLONE_NEWNET
	l, cmd, _ = startContainerInit(t, p)
	_, err = Accept(context.Background(), &AcceptOptions{Listener: l, UID: -1})
	var ie *InitError
	if !errors.As(err, &ie) || ie.Step != "ids" {
		t.Fatalf("a container plan with namespaces: %v, want an InitError", err)
	}
	cmd.Wait()
}

func TestNetlinkIn(t *testing.T) {
	testutil.RequireRoot(t, "enters another process's network namespace")
	// A process in a fresh network namespace of its own, its lo down.
	other := exec.Command("unshare", "--net", "sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	var ns *os.File
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mine, _ := os.Readlink("/proc/self/ns/net")
		theirs, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", other.Process.Pid))
		if theirs != "" && theirs != mine {
			var err error
			if ns, err = os.Open(fmt.Sprintf("/proc/%d/ns/net", other.Process.Pid)); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(end) {
			t.Fatal("unshare --net never entered a namespace of its own")
		}
	}
	defer ns.Close()
	nl, err := NetlinkIn(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	// Through the socket: only lo, which the host's credentials can bring up.
	chk, err := netns.Verify(int(nl.Fd()))
	if err != nil || !chk.Denied || len(chk.Links) != 1 || !chk.Links[0].Up {
		t.Fatalf("the namespace through the helper's socket: %+v, %v; want lo alone, brought up", chk, err)
	}
	// The host's own namespace, for contrast, is not empty here.
	self, _ := os.Open("/proc/self/ns/net")
	defer self.Close()
	hnl, err := NetlinkIn(self)
	if err != nil {
		t.Fatal(err)
	}
	defer hnl.Close()
	if chk, err := netns.Verify(int(hnl.Fd())); err == nil && chk.Denied {
		t.Skip("the host itself has no link but lo: no contrast to check")
	}
}
