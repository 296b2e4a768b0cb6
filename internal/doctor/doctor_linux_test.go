//go:build linux

package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/sandbox"
)

// nobody is a run user for the tests.
const nobody = 65534

func TestDoctorParseRelease(t *testing.T) {
	for _, tc := range []struct {
		in           string
		major, minor int
		ok           bool
	}{
		{"6.18.44-fc-v669", 6, 18, true},
		{"5.12.0", 5, 12, true},
		{"6.1-rc3+", 6, 1, true},
		{"4", 0, 0, false},
		{"x.y", 0, 0, false},
	} {
		major, minor, ok := parseRelease(tc.in)
		if major != tc.major || minor != tc.minor || ok != tc.ok {
			t.Errorf("parseRelease(%q) = %d, %d, %v", tc.in, major, minor, ok)
		}
	}
	if atLeast(5, 11, 5, 12) || !atLeast(5, 12, 5, 12) || !atLeast(6, 0, 5, 12) {
		t.Error("atLeast")
	}
}

func TestDoctorIsShim(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "python3")
	os.WriteFile(script, []byte("#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n"), 0o755)
	if why, ok := isShim(script); !ok || why != "a script" {
		t.Errorf("a script: %q, %v", why, ok)
	}
	shims := filepath.Join(dir, "shims")
	os.Mkdir(shims, 0o755)
	elf := filepath.Join(shims, "python3")
	os.WriteFile(elf, []byte("\x7fELF"), 0o755)
	if why, ok := isShim(elf); !ok || why != "in a shims directory" {
		t.Errorf("in shims/: %q, %v", why, ok)
	}
	link := filepath.Join(dir, "python")
	os.Symlink(elf, link)
	if _, ok := isShim(link); !ok {
		t.Error("a symlink into shims/: not a shim")
	}
	plain := filepath.Join(dir, "real")
	os.WriteFile(plain, []byte("\x7fELF"), 0o755)
	if why, ok := isShim(plain); ok {
		t.Errorf("a binary outside shims/: a shim (%s)", why)
	}
}

func TestDoctorUsernsFix(t *testing.T) {
	fix := usernsFix(map[string]string{sysAppArmor: "1", sysMaxUserns: "0"}, nil)
	first, profile, _ := strings.Cut(fix, "\n")
	if !strings.Contains(first, "/etc/apparmor.d/psych") || !strings.Contains(first, "apparmor_parser -r") {
		t.Errorf("AppArmor's fix does not say where the profile goes: %s", first)
	}
	if strings.Index(first, "per-binary profile") > strings.Index(first, sysAppArmor+"=0") {
		t.Errorf("AppArmor's fix offers turning the restriction off first: %s", first)
	}
	for _, s := range []string{"abi <abi/4.0>,", "profile psych " + selfPath() + " flags=(unconfined) {", "  userns,"} {
		if !strings.Contains(profile, s) {
			t.Errorf("profile lacks %q:\n%s", s, profile)
		}
	}
	if fix := usernsFix(map[string]string{sysMaxUserns: "0"}, syscall.ENOSPC); !strings.Contains(fix, "sysctl -w user.max_user_namespaces=") {
		t.Errorf("max_user_namespaces=0: %s", fix)
	}
	if fix := usernsFix(map[string]string{sysUsernsClone: "0"}, syscall.EPERM); !strings.Contains(fix, "sysctl -w kernel.unprivileged_userns_clone=1") {
		t.Errorf("unprivileged_userns_clone=0: %s", fix)
	}
	if fix := usernsFix(map[string]string{}, syscall.EPERM); !strings.Contains(fix, "seccomp") {
		t.Errorf("EPERM with the sysctls permissive: %s", fix)
	}
}

func TestDoctorAttestationGaps(t *testing.T) {
	full := func() *sandbox.Result {
		st := sandbox.ProcessStatus{UID: []int{65534, 65534, 65534, 65534}, Seccomp: 2, SeccompFilters: 1, NoNewPrivs: 1, CapEff: "0000000000000000"}
		return &sandbox.Result{NetworkDenied: true, Isolation: &sandbox.Isolation{
			Mode: "namespaces", Namespaces: append([]string(nil), allNamespaces...),
			Init: st, Interpreter: st, Network: &sandbox.NetworkCheck{Verified: true, Links: []string{"lo"}},
		}}
	}
	if gaps := attestationGaps(full()); len(gaps) != 0 {
		t.Fatalf("a full attestation has gaps: %v", gaps)
	}
	for name, tc := range map[string]struct {
		spoil func(*sandbox.Result)
		want  string
	}{
		"fallback":    {func(r *sandbox.Result) { r.Isolation.Mode = "fallback" }, "mode namespaces"},
		"no netns":    {func(r *sandbox.Result) { r.Isolation.Namespaces = r.Isolation.Namespaces[:2] }, "a net namespace"},
		"no seccomp":  {func(r *sandbox.Result) { r.Isolation.Interpreter.Seccomp = 0 }, "a seccomp filter in the interpreter"},
		"nnp":         {func(r *sandbox.Result) { r.Isolation.Init.NoNewPrivs = 0 }, "no_new_privs in the init"},
		"a cap":       {func(r *sandbox.Result) { r.Isolation.Interpreter.CapEff = "0000000000200000" }, "an empty capability set"},
		"uid 0":       {func(r *sandbox.Result) { r.Isolation.Init.UID = []int{0, 0, 0, 0} }, "a non-zero uid in the init"},
		"unverified":  {func(r *sandbox.Result) { r.Isolation.Network.Verified = false }, "a verified network denial"},
		"not denied":  {func(r *sandbox.Result) { r.NetworkDenied = false }, "a verified network denial"},
		"failure":     {func(r *sandbox.Result) { r.Failure = &sandbox.Failure{Type: "InitError", Message: "x"} }, "a clean exit"},
		"nothing":     {func(r *sandbox.Result) { r.Isolation = nil }, "an attestation"},
		"no cap data": {func(r *sandbox.Result) { r.Isolation.Init.CapEff = "" }, "an empty capability set"},
	} {
		r := full()
		tc.spoil(r)
		if gaps := strings.Join(attestationGaps(r), "; "); !strings.Contains(gaps, tc.want) {
			t.Errorf("%s: gaps %q, want %q", name, gaps, tc.want)
		}
	}
}

// TestDoctorControllers: where this host has the unified hierarchy, the
// doctor finds where it is mounted (a directory with cgroup.controllers).
func TestDoctorControllers(t *testing.T) {
	layout, err := cgroups.DetectLayout()
	if err != nil || layout != cgroups.LayoutUnified && layout != cgroups.LayoutHybrid {
		t.Skipf("no unified cgroup hierarchy here (%v, %v)", layout, err)
	}
	_, unified := controllers()
	if _, err := os.Stat(filepath.Join(unified, "cgroup.controllers")); unified == "" || err != nil {
		t.Errorf("controllers() found the unified hierarchy at %q: %v", unified, err)
	}
}
