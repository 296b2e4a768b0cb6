//go:build linux

package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/internal/doctor"
	"github.com/psych-runtime/psych/internal/testutil"
)

// doctorJSON runs cmd, a `psych doctor --json`, and decodes its report.
func doctorJSON(t *testing.T, cmd *exec.Cmd) (doctor.Report, int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	code := 0
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	var rep doctor.Report
	if err := json.Unmarshal(o.Bytes(), &rep); err != nil {
		t.Fatalf("doctor --json (exit %d) printed no report: %v\nstdout: %s\nstderr: %s", code, err, o.String(), e.String())
	}
	return rep, code
}

func findCheck(t *testing.T, rep doctor.Report, name string) doctor.Check {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %q check in %+v", name, rep.Checks)
	return doctor.Check{}
}

func requireRoot(t *testing.T, why string) {
	t.Helper()
	testutil.RequireRoot(t, why)
}

// TestDoctorHere: on this host (CI: root) the subprocess backend gives full
// isolation, so the doctor exits 0, with user namespaces OK, the cgroup
// layout as the cgroups package detects it (hybrid here, with the v1
// controllers), and the attestation of a run with all seven namespaces.
func TestDoctorHere(t *testing.T) {
	out, errOut, code := cli(t, "", "doctor", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	// The shape: exactly {"checks": [{name, status, found, fix}], "attestation"}.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	if keys := slices.Sorted(maps.Keys(raw)); !slices.Equal(keys, []string{"attestation", "checks"}) {
		t.Fatalf("top-level keys %v", keys)
	}
	var checks []map[string]any
	json.Unmarshal(raw["checks"], &checks)
	for _, c := range checks {
		if len(c) != 4 || c["name"] == nil || c["status"] == nil || c["found"] == nil || c["fix"] == nil {
			t.Errorf("check %v: want exactly name, status, found, fix", c)
		}
	}
	var rep doctor.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Checks {
		if !slices.Contains([]string{doctor.OK, doctor.Warn}, c.Status) {
			t.Errorf("%s: %s %s — %s", c.Name, c.Status, c.Found, c.Fix)
		}
	}
	for _, name := range []string{"kernel", "userns", "ids", "netns", "mntns", "pidns", "seccomp", "run"} {
		if c := findCheck(t, rep, name); c.Status != doctor.OK {
			t.Errorf("%s: %s %s", name, c.Status, c.Found)
		}
	}
	layout, err := cgroups.DetectLayout()
	if err != nil {
		t.Fatal(err)
	}
	cg := findCheck(t, rep, "cgroups")
	if !strings.HasPrefix(cg.Found, string(layout)+" ") {
		t.Errorf("cgroups: want the layout %q first: %s", layout, cg.Found)
	}
	if layout == cgroups.LayoutHybrid || layout == cgroups.LayoutLegacy {
		for _, want := range []string{"v1 ", "memory", "pids"} {
			if !strings.Contains(cg.Found, want) {
				t.Errorf("cgroups on a %s host: no %q in %s", layout, want, cg.Found)
			}
		}
	}
	if os.Geteuid() == 0 && cg.Status != doctor.OK {
		t.Errorf("cgroups as root: %s %s", cg.Status, cg.Found)
	}
	iso := rep.Attestation
	if iso == nil {
		t.Fatal("no attestation")
	}
	if iso.Mode != "namespaces" || !slices.Equal(iso.Namespaces, []string{"user", "mnt", "net", "pid", "ipc", "uts", "cgroup"}) ||
		iso.Interpreter.Seccomp != 2 || iso.Interpreter.NoNewPrivs != 1 || iso.Network == nil || !iso.Network.Verified {
		t.Errorf("attestation %+v", iso)
	}
	// python3 on PATH through a shim (pyenv's, here): its cost is measured
	// and the fix names the real interpreter.
	if shim, err := exec.LookPath("python3"); err == nil {
		head := make([]byte, 2)
		if f, err := os.Open(shim); err == nil {
			f.Read(head)
			f.Close()
		}
		if string(head) == "#!" {
			b, err := exec.Command(shim, "-I", "-c", "import sys; print(sys.executable)").Output()
			if err != nil {
				t.Fatal(err)
			}
			real := strings.TrimSpace(string(b))
			py := findCheck(t, rep, "python")
			if py.Status != doctor.Warn || !strings.Contains(py.Found, "shim") || !strings.Contains(py.Found, " ms") ||
				!strings.HasPrefix(py.Fix, "pass --python "+real+" ") {
				t.Errorf("python3 on PATH is the shim %s for %s: %s %s — %s", shim, real, py.Status, py.Found, py.Fix)
			}
		}
	}
	// The text: one line per check, in the JSON's order, then the attestation.
	text, errOut, code := cli(t, "", "doctor")
	if code != 0 {
		t.Fatalf("text: exit %d: %s", code, errOut)
	}
	lines := strings.Split(text, "\n")
	for i, c := range rep.Checks {
		if f := strings.Fields(lines[i]); len(f) < 3 || !slices.Contains([]string{doctor.OK, doctor.Warn, doctor.Fail}, f[0]) || f[1] != c.Name {
			t.Errorf("line %d: %q, want STATUS %s found", i, lines[i], c.Name)
		}
	}
	if !strings.Contains(text, "attestation of the isolated execution (subprocess backend):") {
		t.Errorf("text lacks the attestation:\n%s", text)
	}
}

// TestDoctorRequireCgroupUnprivileged: as uid 1000, without a delegated
// cgroup, a missing cgroup is a WARN, and a FAIL (exit 1) with
// --require-cgroup.
func TestDoctorRequireCgroupUnprivileged(t *testing.T) {
	requireRoot(t, "to run the doctor as uid 1000")
	dir, bin := publicBins(t)
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	doctorAs := func(args ...string) (doctor.Report, int) {
		cmd := exec.Command(bin, append([]string{"doctor", "--json", "--python", testPython()}, args...)...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
		return doctorJSON(t, cmd)
	}

	rep, code := doctorAs("--require-cgroup")
	cg := findCheck(t, rep, "cgroups")
	if code != 1 || cg.Status != doctor.Fail || !strings.Contains(cg.Fix, "Delegate=yes") {
		t.Fatalf("--require-cgroup as uid 1000: exit %d, cgroups %s %s — %s", code, cg.Status, cg.Found, cg.Fix)
	}
	if c := findCheck(t, rep, "userns"); c.Status != doctor.OK {
		t.Errorf("userns as uid 1000: %s %s", c.Status, c.Found)
	}
	if c := findCheck(t, rep, "run"); c.Status != doctor.Fail || rep.Attestation != nil {
		t.Errorf("run as uid 1000 with --require-cgroup: %s %s", c.Status, c.Found)
	}

	rep, code = doctorAs()
	cg = findCheck(t, rep, "cgroups")
	if code != 0 || cg.Status != doctor.Warn {
		t.Fatalf("as uid 1000: exit %d, cgroups %s %s", code, cg.Status, cg.Found)
	}
	if iso := rep.Attestation; iso == nil || iso.Cgroup != cgroups.ModeNone || len(iso.Namespaces) != 7 {
		t.Errorf("as uid 1000 without a cgroup: attestation %+v", iso)
	}
}

// TestDoctorNoUserNamespaces runs the doctor in a user namespace of its own
// whose user.max_user_namespaces is 0 (a limit the kernel checks up the
// namespace chain, so the host's own stays untouched): the userns check
// FAILs with the sysctl's fix, and the doctor exits 1.
func TestDoctorNoUserNamespaces(t *testing.T) {
	requireRoot(t, "to map the ids 0-65535 into the doctor's user namespace")
	cmd := exec.Command("/bin/sh", "-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"`,
		"sh", psychBin, "doctor", "--json", "--python", testPython())
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}},
		GidMappingsEnableSetgroups: true,
	}
	rep, code := doctorJSON(t, cmd)
	u := findCheck(t, rep, "userns")
	if code != 1 || u.Status != doctor.Fail || !strings.Contains(u.Found, "user.max_user_namespaces=0") ||
		!strings.Contains(u.Found, "ENOSPC") || !strings.Contains(u.Fix, "sysctl -w user.max_user_namespaces=") {
		t.Fatalf("max_user_namespaces=0: exit %d, userns %s %s — %s", code, u.Status, u.Found, u.Fix)
	}
	for _, name := range []string{"netns", "mntns", "pidns", "run"} {
		if c := findCheck(t, rep, name); c.Status != doctor.Fail {
			t.Errorf("%s without user namespaces: %s %s", name, c.Status, c.Found)
		}
	}
	if rep.Attestation != nil {
		t.Errorf("an attestation without user namespaces: %+v", rep.Attestation)
	}
}
