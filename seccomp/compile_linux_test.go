//go:build linux && cgo

package seccomp

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

const (
	allow  = uint32(ActAllow)
	eperm  = uint32(ActErrno) | uint32(unix.EPERM)
	enosys = uint32(ActErrno) | uint32(unix.ENOSYS)
	kill   = uint32(ActKillProcess)
)

func mustDefaultFilter(t testing.TB) *Filter {
	t.Helper()
	f, err := DefaultFilter()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func native(nr uintptr, args ...uint64) Data {
	d := Data{Nr: int32(nr), Arch: AuditArchX86_64, InstructionPointer: 0x7f0000001000}
	copy(d.Args[:], args)
	return d
}

func expect(t *testing.T, f *Filter, what string, d Data, want uint32) {
	t.Helper()
	got, err := f.Evaluate(d)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got != want {
		t.Errorf("%s: got %s, want %s", what, FormatReturn(got), FormatReturn(want))
	}
}

func TestLinuxConstants(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"EPERM", uint64(linuxEPERM), uint64(unix.EPERM)},
		{"ENOSYS", uint64(linuxENOSYS), uint64(unix.ENOSYS)},
		{"AF_UNIX", afUnix, unix.AF_UNIX},
		{"AF_INET", afInet, unix.AF_INET},
		{"AF_INET6", afInet6, unix.AF_INET6},
		{"AF_NETLINK", afNetlink, unix.AF_NETLINK},
		{"NETLINK_ROUTE", netlinkRoute, unix.NETLINK_ROUTE},
		{"TIOCSTI", tiocsti, unix.TIOCSTI},
		{"TIOCLINUX", tioclinux, unix.TIOCLINUX},
		{"AUDIT_ARCH_X86_64", uint64(AuditArchX86_64), unix.AUDIT_ARCH_X86_64},
		{"AUDIT_ARCH_I386", uint64(AuditArchI386), unix.AUDIT_ARCH_I386},
		{"SECCOMP_RET_KILL_PROCESS", uint64(ActKillProcess), unix.SECCOMP_RET_KILL_PROCESS},
		{"SECCOMP_RET_ERRNO", uint64(ActErrno), unix.SECCOMP_RET_ERRNO},
		{"SECCOMP_RET_ALLOW", uint64(ActAllow), unix.SECCOMP_RET_ALLOW},
		{"SECCOMP_RET_TRACE", uint64(ActTrace), unix.SECCOMP_RET_TRACE},
		{"SECCOMP_RET_USER_NOTIF", uint64(ActUserNotif), unix.SECCOMP_RET_USER_NOTIF},
		{"SECCOMP_RET_LOG", uint64(ActLog), unix.SECCOMP_RET_LOG},
		{"SECCOMP_RET_TRAP", uint64(ActTrap), unix.SECCOMP_RET_TRAP},
	} {
		if c.got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

const (
	threadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS |
		unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	forkFlags = unix.CLONE_CHILD_SETTID | unix.CLONE_CHILD_CLEARTID | uint64(unix.SIGCHLD)

	// linux/personality.h
	addrNoRandomize = 0x0040000
	readImpliesExec = 0x0400000
)

func TestDefaultFilterSyscalls(t *testing.T) {
	f := mustDefaultFilter(t)
	for _, tc := range []struct {
		what string
		d    Data
		want uint32
	}{
		{"read", native(unix.SYS_READ, 0, 0, 10), allow},
		{"write", native(unix.SYS_WRITE, 1), allow},
		{"openat", native(unix.SYS_OPENAT, uint64(0xffffff9c)), allow},
		{"mmap", native(unix.SYS_MMAP, 0, 4096, 3, 0x22, ^uint64(0)), allow},
		{"futex", native(unix.SYS_FUTEX), allow},
		{"exit_group", native(unix.SYS_EXIT_GROUP), allow},
		{"execve", native(unix.SYS_EXECVE), allow},
		{"wait4", native(unix.SYS_WAIT4), allow},
		{"ppoll", native(unix.SYS_PPOLL), allow},
		{"signalfd4", native(unix.SYS_SIGNALFD4), allow},
		{"sendmsg", native(unix.SYS_SENDMSG), allow},
		{"rt_sigprocmask", native(unix.SYS_RT_SIGPROCMASK), allow},
		{"fork", native(unix.SYS_FORK), allow},
		{"vfork", native(unix.SYS_VFORK), allow},
		{"rseq", native(unix.SYS_RSEQ), allow},
		{"prlimit64", native(unix.SYS_PRLIMIT64), allow},
		{"pidfd_open", native(unix.SYS_PIDFD_OPEN), allow},
		{"seccomp (only narrows)", native(unix.SYS_SECCOMP), allow},

		{"clone thread flags", native(unix.SYS_CLONE, threadFlags), allow},
		{"clone glibc fork flags", native(unix.SYS_CLONE, forkFlags), allow},
		{"clone Go exec flags", native(unix.SYS_CLONE, unix.CLONE_VFORK|unix.CLONE_VM|unix.CLONE_PIDFD|uint64(unix.SIGCHLD)), allow},
		{"clone 0x80 is an exit-signal bit, not CLONE_NEWTIME", native(unix.SYS_CLONE, 0x80), allow},
		{"clone CLONE_NEWUSER", native(unix.SYS_CLONE, unix.CLONE_NEWUSER|forkFlags), eperm},
		{"clone CLONE_NEWNS", native(unix.SYS_CLONE, unix.CLONE_NEWNS), eperm},
		{"clone CLONE_NEWCGROUP", native(unix.SYS_CLONE, unix.CLONE_NEWCGROUP), eperm},
		{"clone CLONE_NEWUTS", native(unix.SYS_CLONE, unix.CLONE_NEWUTS), eperm},
		{"clone CLONE_NEWIPC", native(unix.SYS_CLONE, unix.CLONE_NEWIPC), eperm},
		{"clone CLONE_NEWPID", native(unix.SYS_CLONE, unix.CLONE_NEWPID|threadFlags), eperm},
		{"clone CLONE_NEWNET", native(unix.SYS_CLONE, unix.CLONE_NEWNET), eperm},
		{"clone3", native(unix.SYS_CLONE3), enosys},

		{"ioctl FIONREAD (TIOCINQ)", native(unix.SYS_IOCTL, 0, unix.TIOCINQ), allow},
		{"ioctl TCGETS", native(unix.SYS_IOCTL, 0, unix.TCGETS), allow},
		{"ioctl TIOCGWINSZ", native(unix.SYS_IOCTL, 1, unix.TIOCGWINSZ), allow},
		{"ioctl TIOCSTI", native(unix.SYS_IOCTL, 0, unix.TIOCSTI), eperm},
		{"ioctl TIOCSTI, upper half set", native(unix.SYS_IOCTL, 0, 1<<32|unix.TIOCSTI), eperm},
		{"ioctl TIOCLINUX", native(unix.SYS_IOCTL, 0, unix.TIOCLINUX), eperm},

		{"personality query", native(unix.SYS_PERSONALITY, 0xffffffff), allow},
		{"personality PER_LINUX", native(unix.SYS_PERSONALITY, 0), allow},
		{"personality ADDR_NO_RANDOMIZE", native(unix.SYS_PERSONALITY, addrNoRandomize), eperm},
		{"personality READ_IMPLIES_EXEC", native(unix.SYS_PERSONALITY, readImpliesExec), eperm},

		{"known, not allowed: acct", native(unix.SYS_ACCT), eperm},
		{"known, not allowed: sethostname", native(unix.SYS_SETHOSTNAME), eperm},
		{"known, not allowed: syslog", native(unix.SYS_SYSLOG), eperm},
		{"known, not allowed: iopl", native(unix.SYS_IOPL), eperm},
		{"known, not allowed: settimeofday", native(unix.SYS_SETTIMEOFDAY), eperm},
		{"known, not allowed: mbind", native(unix.SYS_MBIND), eperm},
		{"unknown number 1000", native(1000), enosys},
		{"unknown number 0x3fffffff", native(0x3fffffff), enosys},
		{"hole in the x86_64 table (335)", native(335), enosys},
		{"hole in the x86_64 table (423)", native(423), enosys},

		{"i386 ABI", Data{Nr: 20, Arch: AuditArchI386}, kill},
		{"i386 ABI, number 0", Data{Nr: 0, Arch: AuditArchI386}, kill},
		{"aarch64 ABI", Data{Nr: 63, Arch: unix.AUDIT_ARCH_AARCH64}, kill},
		{"x32 read", native(unix.SYS_READ | X32SyscallBit), kill},
		{"x32 write", native(unix.SYS_WRITE|X32SyscallBit, 1), kill},
		{"x32 own number (x32 ioctl 514)", native(514 | X32SyscallBit), kill},
	} {
		expect(t, f, tc.what, tc.d, tc.want)
	}
}

func TestDefaultFilterAlwaysDenied(t *testing.T) {
	f := mustDefaultFilter(t)
	for name, nr := range map[string]uintptr{
		"mount": unix.SYS_MOUNT, "umount2": unix.SYS_UMOUNT2, "pivot_root": unix.SYS_PIVOT_ROOT,
		"chroot": unix.SYS_CHROOT, "unshare": unix.SYS_UNSHARE, "setns": unix.SYS_SETNS,
		"ptrace": unix.SYS_PTRACE, "process_vm_readv": unix.SYS_PROCESS_VM_READV,
		"process_vm_writev": unix.SYS_PROCESS_VM_WRITEV, "kcmp": unix.SYS_KCMP,
		"pidfd_getfd": unix.SYS_PIDFD_GETFD, "bpf": unix.SYS_BPF,
		"perf_event_open": unix.SYS_PERF_EVENT_OPEN, "keyctl": unix.SYS_KEYCTL,
		"add_key": unix.SYS_ADD_KEY, "request_key": unix.SYS_REQUEST_KEY,
		"userfaultfd": unix.SYS_USERFAULTFD, "io_uring_setup": unix.SYS_IO_URING_SETUP,
		"io_uring_enter": unix.SYS_IO_URING_ENTER, "io_uring_register": unix.SYS_IO_URING_REGISTER,
		"kexec_load": unix.SYS_KEXEC_LOAD, "kexec_file_load": unix.SYS_KEXEC_FILE_LOAD,
		"init_module": unix.SYS_INIT_MODULE, "finit_module": unix.SYS_FINIT_MODULE,
		"delete_module": unix.SYS_DELETE_MODULE, "reboot": unix.SYS_REBOOT,
		"swapon": unix.SYS_SWAPON, "swapoff": unix.SYS_SWAPOFF,
		"open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT, "name_to_handle_at": unix.SYS_NAME_TO_HANDLE_AT,
		"fsopen": unix.SYS_FSOPEN, "open_tree": unix.SYS_OPEN_TREE, "move_mount": unix.SYS_MOVE_MOUNT,
		"mount_setattr": unix.SYS_MOUNT_SETATTR, "modify_ldt": unix.SYS_MODIFY_LDT,
	} {
		// Arguments must not matter.
		expect(t, f, name, native(nr), eperm)
		expect(t, f, name+" with arguments", native(nr, 1, 2, 3, 4, 5, 6), eperm)
	}
}

func TestDefaultFilterSockets(t *testing.T) {
	f := mustDefaultFilter(t)
	for _, tc := range []struct {
		what                 string
		domain, typ, proto   uint64
		wantSocket, wantPair uint32
	}{
		{"AF_UNIX stream", unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0, allow, allow},
		{"AF_UNIX dgram", unix.AF_UNIX, unix.SOCK_DGRAM, 0, allow, allow},
		{"AF_INET tcp", unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_TCP, allow, eperm},
		{"AF_INET udp", unix.AF_INET, unix.SOCK_DGRAM, 0, allow, eperm},
		{"AF_INET6", unix.AF_INET6, unix.SOCK_STREAM, 0, allow, eperm},
		{"AF_NETLINK NETLINK_ROUTE", unix.AF_NETLINK, unix.SOCK_RAW | unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE, allow, eperm},
		{"AF_NETLINK NETLINK_ROUTE dgram", unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_ROUTE, allow, eperm},
		{"AF_NETLINK NETLINK_AUDIT", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT, eperm, eperm},
		{"AF_NETLINK NETLINK_KOBJECT_UEVENT", unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_KOBJECT_UEVENT, eperm, eperm},
		{"AF_NETLINK NETLINK_SOCK_DIAG", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_SOCK_DIAG, eperm, eperm},
		{"AF_NETLINK NETLINK_ROUTE, upper half set", unix.AF_NETLINK, unix.SOCK_RAW, 1 << 32, eperm, eperm},
		{"AF_PACKET", unix.AF_PACKET, unix.SOCK_RAW, 0x0300, eperm, eperm},
		{"AF_VSOCK", unix.AF_VSOCK, unix.SOCK_STREAM, 0, eperm, eperm},
		{"AF_ALG", unix.AF_ALG, unix.SOCK_SEQPACKET, 0, eperm, eperm},
		{"AF_KEY", unix.AF_KEY, unix.SOCK_RAW, 2, eperm, eperm},
		{"AF_BLUETOOTH", unix.AF_BLUETOOTH, unix.SOCK_RAW, 0, eperm, eperm},
		{"AF_XDP", unix.AF_XDP, unix.SOCK_RAW, 0, eperm, eperm},
		{"AF_CAN", unix.AF_CAN, unix.SOCK_RAW, 0, eperm, eperm},
		{"AF_UNSPEC", unix.AF_UNSPEC, unix.SOCK_STREAM, 0, eperm, eperm},
		{"AF_UNIX, upper half set", 1<<32 | unix.AF_UNIX, unix.SOCK_STREAM, 0, eperm, eperm},
	} {
		expect(t, f, "socket "+tc.what, native(unix.SYS_SOCKET, tc.domain, tc.typ, tc.proto), tc.wantSocket)
		expect(t, f, "socketpair "+tc.what, native(unix.SYS_SOCKETPAIR, tc.domain, tc.typ, tc.proto), tc.wantPair)
	}
}

// TestRefuseInet: the fallback's filter refuses IPv4 and IPv6 sockets and
// keeps the other domains Default allows.
func TestRefuseInet(t *testing.T) {
	p := Default()
	p.RefuseInet()
	f, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what               string
		domain, typ, proto uint64
		want               uint32
	}{
		{"AF_INET tcp", unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_TCP, eperm},
		{"AF_INET udp", unix.AF_INET, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC, 0, eperm},
		{"AF_INET6", unix.AF_INET6, unix.SOCK_STREAM, 0, eperm},
		{"AF_INET6 raw", unix.AF_INET6, unix.SOCK_RAW, 0, eperm},
		{"AF_UNIX", unix.AF_UNIX, unix.SOCK_STREAM, 0, allow},
		{"AF_NETLINK NETLINK_ROUTE", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE, allow},
	} {
		expect(t, f, "socket "+tc.what, native(unix.SYS_SOCKET, tc.domain, tc.typ, tc.proto), tc.want)
	}
	if f.Digest() == mustDefaultFilter(t).Digest() {
		t.Fatal("the filter refusing IPv4 and IPv6 has Default's digest")
	}
}

// TestDefaultFilterWholeTable checks every native number against what the
// policy says, from libseccomp's table and the policy value alone.
func TestDefaultFilterWholeTable(t *testing.T) {
	f := mustDefaultFilter(t)
	p := Default()
	c, err := newCompiler()
	if err != nil {
		t.Fatal(err)
	}
	unconditional := map[string]bool{}
	conditional := map[string]bool{}
	for _, r := range append(slices.Clone(p.Allow), p.Deny...) {
		for _, n := range r.Names {
			if len(r.Conds) == 0 {
				unconditional[n] = true
			} else {
				conditional[n] = true
			}
		}
	}
	counts := map[string]int{}
	for n := range tableScan {
		d := native(uintptr(n))
		name, err := libseccomp.ScmpSyscall(n).GetNameByArch(libseccomp.ArchAMD64)
		want := eperm
		switch errno, over := p.Override[name]; {
		case err != nil:
			want = enosys
		case over:
			want = uint32(ActErrno) | uint32(errno)
		case conditional[name]:
			continue // decided by arguments: see the tables above
		case unconditional[name]:
			want = allow
		}
		counts[FormatReturn(want)]++
		expect(t, f, fmt.Sprintf("%d (%s)", n, name), d, want)
		expect(t, f, fmt.Sprintf("x32 %d (%s)", n, name), native(uintptr(n|X32SyscallBit)), kill)
		expect(t, f, fmt.Sprintf("i386 %d", n), Data{Nr: int32(n), Arch: AuditArchI386}, kill)
	}
	expect(t, f, "first number above the table", native(uintptr(c.maxKnown+1)), enosys)
	t.Logf("libseccomp %v knows x86_64 numbers up to %d; %v", libseccompVersion(), c.maxKnown, counts)
	if counts["allow"] < 250 || counts["errno(1)"] < 30 {
		t.Errorf("implausible policy: %v", counts)
	}
}

// TestCompileOrder checks the documented order on a small policy: override,
// then deny, then allow, then DeniedErrno.
func TestCompileOrder(t *testing.T) {
	p := &Policy{
		DeniedErrno:  unix.EACCES,
		UnknownErrno: unix.ENOSYS,
		Override: map[string]syscall.Errno{
			"getpid":  unix.EIO,    // also allowed below: the override wins
			"getppid": unix.EACCES, // also allowed, and equal to DeniedErrno
			"ioctl":   unix.EBADF,  // and denied below: the override wins
		},
		Deny: []Rule{
			{Names: []string{"fcntl"}, Conds: []Cond{{Arg: 1, Op: OpEqual, Value: 7}}},
			{Names: []string{"fcntl"}, Conds: []Cond{{Arg: 1, Op: OpEqual, Value: 8}, {Arg: 2, Op: OpGreater, Value: 100}}},
			{Names: []string{"ioctl"}, Conds: []Cond{{Arg: 1, Op: OpEqual, Value: 1}}},
		},
		Allow: []Rule{
			{Names: []string{"fcntl", "getpid", "getppid", "ioctl"}},
			{Names: []string{"write"}, Conds: []Cond{{Arg: 0, Op: OpEqual, Value: 1}, {Arg: 2, Op: OpLess, Value: 10}}},
			{Names: []string{"write"}, Conds: []Cond{{Arg: 0, Op: OpEqual, Value: 2}}},
			{Names: []string{"psych_no_such_syscall", "socketcall"}},
		},
		BadArch: ActKillThread,
	}
	f, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	errno := func(e syscall.Errno) uint32 { return uint32(ActErrno) | uint32(e) }
	for _, tc := range []struct {
		what string
		d    Data
		want uint32
	}{
		{"override beats allow", native(unix.SYS_GETPID), errno(unix.EIO)},
		{"override equal to the default", native(unix.SYS_GETPPID), errno(unix.EACCES)},
		{"override beats deny", native(unix.SYS_IOCTL, 0, 1), errno(unix.EBADF)},
		{"deny beats allow", native(unix.SYS_FCNTL, 0, 7), errno(unix.EACCES)},
		{"second deny rule, both conditions", native(unix.SYS_FCNTL, 0, 8, 101), errno(unix.EACCES)},
		{"second deny rule, one condition", native(unix.SYS_FCNTL, 0, 8, 100), allow},
		{"no deny rule matches", native(unix.SYS_FCNTL, 0, 1), allow},
		{"allow rules are OR'd: first", native(unix.SYS_WRITE, 1, 0, 9), allow},
		{"allow rules are OR'd: second", native(unix.SYS_WRITE, 2, 0, 1000), allow},
		{"allow conditions are AND'd", native(unix.SYS_WRITE, 1, 0, 10), errno(unix.EACCES)},
		{"conditional allow falls through to DeniedErrno", native(unix.SYS_WRITE, 3), errno(unix.EACCES)},
		{"known, not allowed", native(unix.SYS_READ), errno(unix.EACCES)},
		{"unknown", native(777), errno(unix.ENOSYS)},
		{"other ABI", Data{Nr: 1, Arch: AuditArchI386}, uint32(ActKillThread)},
		{"x32", native(1 | X32SyscallBit), uint32(ActKillThread)},
	} {
		expect(t, f, tc.what, tc.d, tc.want)
	}
	if got := f.Unresolved(); !slices.Contains(got, "psych_no_such_syscall") || !slices.Contains(got, "socketcall") {
		t.Errorf("Unresolved = %v", got)
	}
}

// TestCompileWithoutDeny covers a policy with no deny stage.
func TestCompileWithoutDeny(t *testing.T) {
	p := Default()
	p.Deny = nil
	f, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	expect(t, f, "ioctl TIOCSTI", native(unix.SYS_IOCTL, 0, unix.TIOCSTI), allow)
	expect(t, f, "x32", native(unix.SYS_IOCTL|X32SyscallBit), kill)
	expect(t, f, "above the table", native(1000), enosys)
	if f.Len() >= mustDefaultFilter(t).Len() {
		t.Errorf("%d instructions without deny stage, %d with", f.Len(), mustDefaultFilter(t).Len())
	}
}

func TestCompileRefusesInvalidPolicy(t *testing.T) {
	p := Default()
	p.DeniedErrno = 0
	if _, err := p.Compile(); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("got %v, want ErrInvalidPolicy", err)
	}
}

func TestDigest(t *testing.T) {
	a, err := Default().Compile()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Default().Compile()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(a.Bytes())
	if want := "sha256:" + hex.EncodeToString(sum[:]); a.Digest() != want {
		t.Errorf("Digest %s, want %s", a.Digest(), want)
	}
	if a.Digest() != b.Digest() || !slices.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("two compiles differ: %s, %s", a.Digest(), b.Digest())
	}
	if a.Len() != len(a.Bytes())/8 || a.Len() == 0 {
		t.Errorf("Len %d for %d bytes", a.Len(), len(a.Bytes()))
	}
	p := Default()
	p.Override["getpid"] = unix.EPERM
	c, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if c.Digest() == a.Digest() {
		t.Error("a different policy has the same digest")
	}
	if d := mustDefaultFilter(t); d.Digest() != a.Digest() {
		t.Errorf("DefaultFilter %s, Default().Compile() %s", d.Digest(), a.Digest())
	}
	if x, y := mustDefaultFilter(t), mustDefaultFilter(t); x != y {
		t.Error("DefaultFilter compiled twice")
	}
	t.Logf("default filter: %d instructions, %s, libseccomp %s", a.Len(), a.Digest(), libseccompVersion())
}

func BenchmarkCompile(b *testing.B) {
	p := Default()
	for b.Loop() {
		if _, err := p.Compile(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvaluate(b *testing.B) {
	f := mustDefaultFilter(b)
	d := native(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)
	for b.Loop() {
		if _, err := f.Evaluate(d); err != nil {
			b.Fatal(err)
		}
	}
}
