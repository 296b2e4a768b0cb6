//go:build linux && cgo

package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// minus1 is -1 as a 64-bit register holds it sign-extended (ctypes' c_long,
// Go's syscall package); glibc passes a uid_t -1 zero-extended (0xffffffff).
const minus1 = ^uint64(0)

// TestDefaultFilterRootID: Default refuses every id-changing call that
// names id 0 with EPERM, whatever the upper half of the register holds, and
// leaves every other id to the kernel.
func TestDefaultFilterRootID(t *testing.T) {
	f := mustDefaultFilter(t)
	for _, tc := range []struct {
		what string
		d    Data
		want uint32
	}{
		{"setuid(0)", native(unix.SYS_SETUID, 0), eperm},
		{"setuid(0), upper half set", native(unix.SYS_SETUID, 1<<32), eperm},
		{"setgid(0)", native(unix.SYS_SETGID, 0), eperm},
		{"setfsuid(0)", native(unix.SYS_SETFSUID, 0), eperm},
		{"setfsgid(0)", native(unix.SYS_SETFSGID, 0), eperm},
		{"setreuid(0, -1)", native(unix.SYS_SETREUID, 0, minus1), eperm},
		{"setreuid(-1, 0)", native(unix.SYS_SETREUID, minus1, 0), eperm},
		{"setregid(1000, 0)", native(unix.SYS_SETREGID, 1000, 0), eperm},
		{"setresuid(0, -1, -1)", native(unix.SYS_SETRESUID, 0, minus1, minus1), eperm},
		{"setresuid(-1, 0, -1)", native(unix.SYS_SETRESUID, minus1, 0, minus1), eperm},
		{"setresuid(-1, -1, 0)", native(unix.SYS_SETRESUID, minus1, minus1, 0), eperm},
		{"setresgid(1000, 1000, 0)", native(unix.SYS_SETRESGID, 1000, 1000, 0), eperm},

		{"setuid(1000)", native(unix.SYS_SETUID, 1000), allow},
		{"setuid(65534): the kernel decides", native(unix.SYS_SETUID, 65534), allow},
		{"setgid(1000)", native(unix.SYS_SETGID, 1000), allow},
		{"setreuid(-1, -1)", native(unix.SYS_SETREUID, minus1, minus1), allow},
		{"setresuid(1000, 1000, 1000)", native(unix.SYS_SETRESUID, 1000, 1000, 1000), allow},
		{"setresgid(-1, -1, -1)", native(unix.SYS_SETRESGID, minus1, minus1, minus1), allow},
		{"setfsuid(-1)", native(unix.SYS_SETFSUID, minus1), allow},
		{"setgroups: the kernel refuses it without CAP_SETGID", native(unix.SYS_SETGROUPS, 1, 0x7f0000000000), allow},
	} {
		expect(t, f, tc.what, tc.d, tc.want)
	}
}

func confined(t *testing.T, uid, gid uint32) *Policy {
	t.Helper()
	p := Default()
	p.ConfineIDs(uid, gid)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfineIDs: a confined policy lets each call name only the run's own
// id, or -1 where the call takes it, compared on the low 32 bits.
func TestConfineIDs(t *testing.T) {
	f, err := confined(t, 1000, 1001).Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		d    Data
		want uint32
	}{
		{"setuid(own)", native(unix.SYS_SETUID, 1000), allow},
		{"setuid(own), upper half set", native(unix.SYS_SETUID, 1<<32|1000), allow},
		{"setuid(0)", native(unix.SYS_SETUID, 0), eperm},
		{"setuid(65534)", native(unix.SYS_SETUID, 65534), eperm},
		{"setuid(own gid)", native(unix.SYS_SETUID, 1001), eperm},
		{"setuid(-1)", native(unix.SYS_SETUID, minus1), eperm},
		{"setgid(own)", native(unix.SYS_SETGID, 1001), allow},
		{"setgid(own uid)", native(unix.SYS_SETGID, 1000), eperm},
		{"setfsuid(own)", native(unix.SYS_SETFSUID, 1000), allow},
		{"setfsuid(-1), the query", native(unix.SYS_SETFSUID, minus1), allow},
		{"setfsuid(-1) zero-extended", native(unix.SYS_SETFSUID, 0xffffffff), allow},
		{"setfsgid(5)", native(unix.SYS_SETFSGID, 5), eperm},
		{"setreuid(own, own)", native(unix.SYS_SETREUID, 1000, 1000), allow},
		{"setreuid(-1, own)", native(unix.SYS_SETREUID, minus1, 1000), allow},
		{"setreuid(own, 2000)", native(unix.SYS_SETREUID, 1000, 2000), eperm},
		{"setregid(-1, -1)", native(unix.SYS_SETREGID, minus1, 0xffffffff), allow},
		{"setregid(7, -1)", native(unix.SYS_SETREGID, 7, minus1), eperm},
		{"setresuid(own, own, own)", native(unix.SYS_SETRESUID, 1000, 1000, 1000), allow},
		{"setresuid(-1, own, -1)", native(unix.SYS_SETRESUID, minus1, 1000, 0xffffffff), allow},
		{"setresuid(own, own, 65534)", native(unix.SYS_SETRESUID, 1000, 1000, 65534), eperm},
		{"setresuid(65534, -1, -1)", native(unix.SYS_SETRESUID, 65534, minus1, minus1), eperm},
		{"setresgid(own, -1, own)", native(unix.SYS_SETRESGID, 1001, minus1, 1001), allow},
		{"setresgid(own, -1, 0)", native(unix.SYS_SETRESGID, 1001, minus1, 0), eperm},
		{"setgroups is the kernel's", native(unix.SYS_SETGROUPS, 0, 0), allow},
		{"getuid untouched", native(unix.SYS_GETUID), allow},
	} {
		expect(t, f, tc.what, tc.d, tc.want)
	}
}

// TestConfineIDsReplaces: confining again replaces the earlier ids, and no
// id-changing call is left allowed without a condition.
func TestConfineIDsReplaces(t *testing.T) {
	p := confined(t, 1000, 1000)
	p.ConfineIDs(2000, 2000)
	for _, r := range p.Allow {
		for _, n := range r.Names {
			_, u := uidCalls[n]
			_, g := gidCalls[n]
			if !u && !g {
				continue
			}
			if len(r.Conds) == 0 {
				t.Errorf("%s allowed unconditionally (%s)", n, r.Comment)
			}
			for _, c := range r.Conds {
				if c.Value != 2000 && c.Value != unchangedID {
					t.Errorf("%s rule compares %d: the earlier confinement is left (%s)", n, c.Value, r.Comment)
				}
			}
		}
	}
	f, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	expect(t, f, "setuid(old own)", native(unix.SYS_SETUID, 1000), eperm)
	expect(t, f, "setuid(new own)", native(unix.SYS_SETUID, 2000), allow)
}

// TestConfineIDsOCI: the engine's rendering of a confined policy answers
// the id-changing calls as psych's own filter does, so the container's init,
// which changes to its ids under the engine's filter alone, is let through,
// and the program is refused by both.
func TestConfineIDsOCI(t *testing.T) {
	p := confined(t, 65534, 65534)
	rendered := renderedFilter(t, p)
	own, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	nrs := []uintptr{unix.SYS_SETUID, unix.SYS_SETGID, unix.SYS_SETFSUID, unix.SYS_SETFSGID,
		unix.SYS_SETREUID, unix.SYS_SETREGID, unix.SYS_SETRESUID, unix.SYS_SETRESGID}
	values := []uint64{0, 1000, 65534, 65533, 1<<32 | 65534, 0xffffffff, minus1}
	for _, nr := range nrs {
		for _, a := range values {
			for _, b := range values {
				for _, c := range values {
					d := native(nr, a, b, c)
					want, _ := own.Evaluate(d)
					got, _ := rendered.Evaluate(d)
					if got != want && !(got == allow && (a&lowWord == 0 || b&lowWord == 0 || c&lowWord == 0)) {
						// Only the Deny rules (id 0) may be left to the init's filter.
						t.Errorf("%d args %x %x %x: rendered %s, own %s", nr, a, b, c, FormatReturn(got), FormatReturn(want))
					}
				}
			}
		}
	}
	expect(t, rendered, "rendered setresuid(own, own, own), as the init calls it", native(unix.SYS_SETRESUID, 65534, 65534, 65534), allow)
	expect(t, rendered, "rendered setuid(1000)", native(unix.SYS_SETUID, 1000), eperm)
}

// TestDefaultFilterPtyIoctls: what openpty, pty.fork and a terminal's
// line discipline use passes the filter; the kernel's devpts decides.
func TestDefaultFilterPtyIoctls(t *testing.T) {
	f := mustDefaultFilter(t)
	for name, req := range map[string]uint64{
		"TIOCGPTN": unix.TIOCGPTN, "TIOCSPTLCK": unix.TIOCSPTLCK, "TIOCGPTPEER": unix.TIOCGPTPEER,
		"TCGETS": unix.TCGETS, "TCSETS": unix.TCSETS, "TCSETSW": unix.TCSETSW, "TCSETSF": unix.TCSETSF,
		"TIOCSCTTY": unix.TIOCSCTTY, "TIOCNOTTY": unix.TIOCNOTTY, "TIOCGWINSZ": unix.TIOCGWINSZ,
		"TIOCSWINSZ": unix.TIOCSWINSZ, "TIOCGPGRP": unix.TIOCGPGRP, "TIOCSPGRP": unix.TIOCSPGRP,
	} {
		expect(t, f, "ioctl "+name, native(unix.SYS_IOCTL, 3, req), allow)
	}
}
