package seccomp

import (
	"fmt"
	"maps"
	"slices"
	"syscall"
)

// Policy is a syscall policy for native x86_64 processes, as a plain value.
// The compiled filter decides each syscall by the first of these that
// applies:
//
//  1. Another ABI (i386 through int 0x80, x32) gets BadArch.
//  2. A number the filter has no name for (newer than its syscall table, or
//     a hole in it) fails with UnknownErrno.
//  3. A name in Override fails with that errno.
//  4. A call that matches a Deny rule fails with DeniedErrno.
//  5. A call that matches an Allow rule runs.
//  6. Anything else fails with DeniedErrno.
//
// Rules are OR'd: a call matches a list when it matches any rule in it.
// Names this libseccomp cannot resolve for x86_64 are skipped, which never
// widens the policy: such a number falls under step 2 or does not exist.
type Policy struct {
	// DeniedErrno is returned by every syscall the filter knows but does not
	// allow. Default: EPERM.
	DeniedErrno syscall.Errno
	// UnknownErrno is returned for syscall numbers the filter has no name
	// for. Default: ENOSYS, so that glibc and CPython fall back to an older
	// syscall as they would on an older kernel.
	UnknownErrno syscall.Errno
	// Override maps syscall names to the errno they always fail with,
	// whatever Deny and Allow say.
	Override map[string]syscall.Errno
	// Deny lists carve-outs from otherwise allowed syscalls. Each rule must
	// have conditions; an unconditional denial belongs in Override.
	Deny []Rule
	// Allow lists what runs.
	Allow []Rule
	// BadArch is what a syscall through another ABI gets: ActKillProcess,
	// ActKillThread or ActTrap.
	BadArch Action
}

// Rule matches calls to any of Names for which every Cond holds. A rule
// without Conds matches every call to its names.
type Rule struct {
	Names []string
	// Conds are AND'd. At most one Cond per argument (a libseccomp limit):
	// write a second comparison of the same argument as a second Rule.
	Conds []Cond
	// Comment says where the rule comes from or why it exists.
	Comment string
}

// Op is how a Cond compares a syscall argument.
type Op uint8

// Comparison operators. All compare the full 64-bit argument register,
// unsigned.
const (
	OpEqual Op = iota + 1
	OpNotEqual
	OpLess
	OpLessOrEqual
	OpGreater
	OpGreaterOrEqual
	// OpMaskedEqual holds when arg&Mask == Value. With Mask 0xffffffff it
	// compares only the low 32 bits, which is what the kernel reads of an
	// int or unsigned int argument.
	OpMaskedEqual
)

func (o Op) String() string {
	switch o {
	case OpEqual:
		return "=="
	case OpNotEqual:
		return "!="
	case OpLess:
		return "<"
	case OpLessOrEqual:
		return "<="
	case OpGreater:
		return ">"
	case OpGreaterOrEqual:
		return ">="
	case OpMaskedEqual:
		return "&mask=="
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Cond compares syscall argument Arg (0 to 5) with Value.
type Cond struct {
	Arg   uint
	Op    Op
	Value uint64
	// Mask is used by OpMaskedEqual only.
	Mask uint64
}

// maxErrno is the largest errno the kernel passes back (MAX_ERRNO).
const maxErrno = 4095

// Validate reports the first reason the policy cannot be compiled as
// written, wrapped around ErrInvalidPolicy.
func (p *Policy) Validate() error {
	for _, check := range []func() error{
		p.checkErrnos,
		p.checkBadArch,
		func() error { return checkRules("deny", p.Deny, true) },
		func() error { return checkRules("allow", p.Allow, false) },
	} {
		if err := check(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
		}
	}
	return nil
}

func checkErrno(what string, e syscall.Errno) error {
	// Errno 0 would make a refused syscall report success without running.
	if e == 0 || e > maxErrno {
		return fmt.Errorf("%s: errno %d not in 1..%d", what, int(e), maxErrno)
	}
	return nil
}

func (p *Policy) checkErrnos() error {
	if err := checkErrno("denied errno", p.DeniedErrno); err != nil {
		return err
	}
	if err := checkErrno("unknown errno", p.UnknownErrno); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(p.Override)) {
		if name == "" {
			return fmt.Errorf("override: empty syscall name")
		}
		if err := checkErrno("override "+name, p.Override[name]); err != nil {
			return err
		}
	}
	return nil
}

func (p *Policy) checkBadArch() error {
	switch p.BadArch {
	case ActKillProcess, ActKillThread, ActTrap:
		return nil
	}
	return fmt.Errorf("bad-arch action %s: want kill_process, kill_thread or trap", p.BadArch)
}

func checkRules(list string, rules []Rule, needConds bool) error {
	for i, r := range rules {
		where := fmt.Sprintf("%s rule %d %v", list, i, r.Names)
		if len(r.Names) == 0 {
			return fmt.Errorf("%s: no syscall names", where)
		}
		if slices.Contains(r.Names, "") {
			return fmt.Errorf("%s: empty syscall name", where)
		}
		if needConds && len(r.Conds) == 0 {
			return fmt.Errorf("%s: no conditions (use Override to deny a syscall outright)", where)
		}
		var seen [6]bool
		for _, c := range r.Conds {
			if c.Arg > 5 {
				return fmt.Errorf("%s: argument %d out of range 0..5", where, c.Arg)
			}
			if seen[c.Arg] {
				return fmt.Errorf("%s: argument %d compared twice", where, c.Arg)
			}
			seen[c.Arg] = true
			if c.Op < OpEqual || c.Op > OpMaskedEqual {
				return fmt.Errorf("%s: unknown operator %d", where, uint8(c.Op))
			}
			if c.Op == OpMaskedEqual && c.Value&^c.Mask != 0 {
				return fmt.Errorf("%s: value %#x has bits outside mask %#x and never matches", where, c.Value, c.Mask)
			}
		}
	}
	return nil
}

// Linux UAPI numbers used by Default, spelled out so that this file builds
// on every platform. A test checks them against golang.org/x/sys/unix.
const (
	linuxEPERM  syscall.Errno = 1
	linuxENOSYS syscall.Errno = 38

	afUnix       = 1
	afInet       = 2
	afInet6      = 10
	afNetlink    = 16
	netlinkRoute = 0
	tiocsti      = 0x5412
	tioclinux    = 0x541c
	lowWord      = 0xffffffff
)

// alwaysDenied are refused with EPERM whatever any allow list says: they
// reach across the sandbox's boundaries (mounts, namespaces, other
// processes' memory, the kernel's keyring, module and BPF loading, io_uring,
// file handles that bypass the mount view) or change the whole machine.
var alwaysDenied = []string{
	"mount", "umount2", "pivot_root", "chroot",
	"fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "move_mount", "mount_setattr",
	"unshare", "setns",
	"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "pidfd_getfd",
	"bpf", "perf_event_open", "userfaultfd",
	"keyctl", "add_key", "request_key",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"reboot", "swapon", "swapoff",
	"open_by_handle_at", "name_to_handle_at",
	"modify_ldt",
}

// replaced are Docker's rules psych drops in favour of its own.
var replaced = []string{"socket", "socketpair"}

// Default returns psych's policy: Docker's default profile as it applies to
// an unprivileged x86_64 process, tightened. See the package documentation
// for what it allows and refuses, and why.
func Default() *Policy {
	p := &Policy{
		DeniedErrno:  linuxEPERM,
		UnknownErrno: linuxENOSYS,
		Override:     map[string]syscall.Errno{},
		BadArch:      ActKillProcess,
	}
	dockerAllow, dockerOverride := dockerProfile()
	maps.Copy(p.Override, dockerOverride)
	// Without clone3 glibc and CPython fall back to clone, whose flags the
	// filter can read; clone3 passes them behind a pointer.
	p.Override["clone3"] = linuxENOSYS
	for _, name := range alwaysDenied {
		p.Override[name] = linuxEPERM
	}

	p.Deny = []Rule{
		{
			Names:   []string{"setuid", "setgid", "setfsuid", "setfsgid", "setreuid", "setregid", "setresuid", "setresgid"},
			Conds:   []Cond{{Arg: 0, Op: OpMaskedEqual, Mask: lowWord, Value: 0}},
			Comment: "psych: id 0 is no run's own; unmapped in a user namespace it would be EINVAL, not EPERM",
		},
		{
			Names:   []string{"setreuid", "setregid", "setresuid", "setresgid"},
			Conds:   []Cond{{Arg: 1, Op: OpMaskedEqual, Mask: lowWord, Value: 0}},
			Comment: "psych: id 0 is no run's own (second id)",
		},
		{
			Names:   []string{"setresuid", "setresgid"},
			Conds:   []Cond{{Arg: 2, Op: OpMaskedEqual, Mask: lowWord, Value: 0}},
			Comment: "psych: id 0 is no run's own (saved id)",
		},
		{
			Names:   []string{"ioctl"},
			Conds:   []Cond{{Arg: 1, Op: OpMaskedEqual, Mask: lowWord, Value: tiocsti}},
			Comment: "TIOCSTI pushes input into a terminal another process reads",
		},
		{
			Names:   []string{"ioctl"},
			Conds:   []Cond{{Arg: 1, Op: OpMaskedEqual, Mask: lowWord, Value: tioclinux}},
			Comment: "TIOCLINUX can paste the console selection into a terminal",
		},
	}

	for _, r := range dockerAllow {
		r.Names = slices.DeleteFunc(slices.Clone(r.Names), func(n string) bool {
			_, over := p.Override[n]
			return over || slices.Contains(replaced, n)
		})
		if len(r.Names) > 0 {
			p.Allow = append(p.Allow, r)
		}
	}
	for _, af := range []uint64{afUnix, afInet, afInet6} {
		p.Allow = append(p.Allow, Rule{
			Names:   []string{"socket"},
			Conds:   []Cond{{Arg: 0, Op: OpEqual, Value: af}},
			Comment: "psych: socket domains AF_UNIX, AF_INET, AF_INET6",
		})
	}
	p.Allow = append(p.Allow,
		Rule{
			Names: []string{"socket"},
			Conds: []Cond{
				{Arg: 0, Op: OpEqual, Value: afNetlink},
				{Arg: 2, Op: OpEqual, Value: netlinkRoute},
			},
			Comment: "psych: AF_NETLINK with NETLINK_ROUTE only (getaddrinfo, if_nameindex)",
		},
		Rule{
			Names:   []string{"socketpair"},
			Conds:   []Cond{{Arg: 0, Op: OpEqual, Value: afUnix}},
			Comment: "psych: socketpair AF_UNIX only",
		},
	)
	return p
}

// RefuseInet takes AF_INET and AF_INET6 out of the socket domains Default
// allows: socket() in either fails with DeniedErrno, so a run without a
// network namespace of its own cannot reach the host's network. AF_UNIX
// and AF_NETLINK's NETLINK_ROUTE stay.
func (p *Policy) RefuseInet() {
	p.Allow = slices.DeleteFunc(p.Allow, func(r Rule) bool {
		return slices.Equal(r.Names, []string{"socket"}) && len(r.Conds) == 1 && r.Conds[0].Arg == 0 &&
			r.Conds[0].Op == OpEqual && (r.Conds[0].Value == afInet || r.Conds[0].Value == afInet6)
	})
}

// The calls that change a process's uids and gids, and how many ids each
// names (setuid one; setreuid real and effective; setresuid real,
// effective and saved). setgroups is not among them: it names its groups
// behind a pointer, and without CAP_SETGID, which no run has, the kernel
// refuses every call with EPERM before it reads them.
var (
	uidCalls = map[string]int{"setuid": 1, "setfsuid": 1, "setreuid": 2, "setresuid": 3}
	gidCalls = map[string]int{"setgid": 1, "setfsgid": 1, "setregid": 2, "setresgid": 3}
	// chownCalls name an owner and a group, from the argument given.
	chownCalls = map[string]uint{"chown": 1, "fchown": 1, "lchown": 1, "fchownat": 2}
)

// unchangedID is -1 as a uid_t or gid_t: "leave this id as it is".
const unchangedID = 0xffffffff

// ConfineIDs lets the id-changing calls (and chown, fchown, lchown and
// fchownat, for a file's owner and group) name only the ids a run already
// has: uid for setuid, setreuid, setresuid and setfsuid, gid for their gid
// twins, or -1 ("unchanged") where the call takes it (setre*id, setres*id;
// setfs*id(-1) is the query idiom). Any other id fails with DeniedErrno.
// Only the low 32 bits of each argument are compared, as the kernel reads
// a uid_t, so a sign-extended -1 is -1.
//
// A process without capabilities whose ids are all uid and gid can change
// to nothing else anyway; what this changes is the errno. Inside a user
// namespace an id that is not mapped fails with EINVAL, where programs and
// CPython's own tests expect EPERM for an id they may not take; with this
// every refused id is EPERM. Default denies id 0 in the Deny rules for any
// run; this is for a backend that knows its run's ids (a user namespace
// mapping the program to uid and gid). The rules are Allow rules, so OCI
// renders them: the engine's filter and psych's own agree.
func (p *Policy) ConfineIDs(uid, gid uint32) {
	for i := range p.Allow {
		p.Allow[i].Names = slices.DeleteFunc(slices.Clone(p.Allow[i].Names), func(n string) bool {
			_, u := uidCalls[n]
			_, g := gidCalls[n]
			_, c := chownCalls[n]
			return u || g || c
		})
	}
	p.Allow = slices.DeleteFunc(p.Allow, func(r Rule) bool { return len(r.Names) == 0 })
	add := func(calls map[string]int, own uint32, what string) {
		for _, name := range slices.Sorted(maps.Keys(calls)) {
			n := calls[name]
			values := []uint64{uint64(own), unchangedID}
			if name == "setuid" || name == "setgid" {
				values = values[:1] // -1 is no id to set
			}
			// Every combination of the allowed values over the call's
			// arguments: one rule each, as a rule compares an argument once.
			combos := [][]Cond{nil}
			for arg := range n {
				var next [][]Cond
				for _, c := range combos {
					for _, v := range values {
						next = append(next, append(slices.Clone(c), Cond{Arg: uint(arg), Op: OpMaskedEqual, Mask: lowWord, Value: v}))
					}
				}
				combos = next
			}
			for _, c := range combos {
				p.Allow = append(p.Allow, Rule{Names: []string{name}, Conds: c,
					Comment: fmt.Sprintf("psych: %s only to the run's own %s %d or -1", name, what, own)})
			}
		}
	}
	add(uidCalls, uid, "uid")
	add(gidCalls, gid, "gid")
	// chown and its kin may give a file only the run's own owner and group
	// (or -1, unchanged): an unmapped id would be EINVAL, as for set*id.
	for _, name := range slices.Sorted(maps.Keys(chownCalls)) {
		arg := chownCalls[name]
		for _, o := range []uint64{uint64(uid), unchangedID} {
			for _, g := range []uint64{uint64(gid), unchangedID} {
				p.Allow = append(p.Allow, Rule{Names: []string{name}, Conds: []Cond{
					{Arg: arg, Op: OpMaskedEqual, Mask: lowWord, Value: o},
					{Arg: arg + 1, Op: OpMaskedEqual, Mask: lowWord, Value: g},
				}, Comment: fmt.Sprintf("psych: %s only to the run's own uid %d and gid %d, or -1", name, uid, gid)})
			}
		}
	}
}
