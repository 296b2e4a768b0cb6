//go:build linux

package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/psych-runtime/psych/internal/doctor"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
)

// noUserns runs psych with args (program on stdin) in a user namespace of
// the test's own that maps ids 0-65535 as the host's, with
// user.max_user_namespaces=0 set inside (a limit the kernel checks up the
// namespace chain, so the host's own stays untouched): a host where no
// user namespace can be had. As uid, through setpriv, unless uid is 0.
func noUserns(t *testing.T, bin, home string, uid int, program string, args ...string) (stdout, stderr string, code int) {
	return noUsernsMapped(t, bin, home, uid, 65536, program, args...)
}

// noUsernsMapped is noUserns with the ids 0 to mapped-1 mapped.
func noUsernsMapped(t *testing.T, bin, home string, uid, mapped int, program string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	drop := ""
	if uid != 0 {
		drop = fmt.Sprintf("setpriv --reuid=%d --regid=%d --clear-groups ", uid, uid)
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec ` + drop + `"$@"`, "sh", bin}, args...)...)
	cmd.Dir = home
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home}
	cmd.Stdin = strings.NewReader(program)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: mapped}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: mapped}},
		GidMappingsEnableSetgroups: true,
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestRunWithoutUserNamespaces plays a host without user namespaces (stock
// Ubuntu 24.04's AppArmor restriction, user.max_user_namespaces=0) for a
// non-root user of the CLI and for root: psych run refuses (exit 3, naming
// --allow-fallback) rather than run with weaker protection unasked; with
// --allow-fallback the program cannot list the host's home directories,
// read a world-readable file under the host's /tmp or open an IPv4 or IPv6
// socket (but with --network), and says so in its attestation; psych
// doctor reports what the fallback gives.
func TestRunWithoutUserNamespaces(t *testing.T) {
	testutil.RequireRoot(t, "to map ids 0-65535 into a user namespace of the test's own")
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatal("setpriv (util-linux) drops to the unprivileged id: ", err)
	}
	const user = 1000
	dir, bin := publicBins(t)
	home := filepath.Join(dir, "home")
	secret := filepath.Join(dir, "secret")
	if err := errors.Join(os.Mkdir(home, 0o700), os.Chown(home, user, user), os.WriteFile(secret, []byte("s"), 0o644)); err != nil {
		t.Fatal(err)
	}
	// A host service the program must not reach without --network.
	port := testutil.HostService(t)
	program := fmt.Sprintf("import os, socket\n"+testutil.PyTry+`def own():
    with open(os.path.join(os.environ["TMPDIR"], "x"), "w") as f:
        f.write("x")
    os.listdir(".")
{"home": t(lambda: os.listdir("/home")), "secret": t(lambda: open(%q).read()), "own": t(own),
 "connect": t(lambda: socket.create_connection(("127.0.0.1", %d), timeout=5).close()),
 "inet6": t(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close())}`, secret, port)

	for _, uid := range []int{user, 0} {
		// Refused unless asked for, with --require-isolation (no effect)
		// or without: never a host fault, whatever the kernel answered.
		for _, extra := range [][]string{nil, {"--require-isolation"}} {
			args := append([]string{"run", "--json", "--python", testPython()}, append(extra, "-")...)
			out, errOut, code := noUserns(t, bin, home, uid, program, args...)
			if code != 3 || !strings.Contains(errOut, "--allow-fallback") || out != "" {
				t.Fatalf("uid %d, psych run %v without user namespaces: exit %d (want 3 naming --allow-fallback)\nstdout: %s\nstderr: %s", uid, extra, code, out, errOut)
			}
		}
		for _, network := range []bool{false, true} {
			args := []string{"run", "--json", "--allow-fallback", "--python", testPython()}
			if network {
				args = append(args, "--network")
			}
			out, errOut, code := noUserns(t, bin, home, uid, program, append(args, "-")...)
			var res sandbox.Result
			if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Failure != nil || res.Isolation == nil {
				t.Fatalf("uid %d, --allow-fallback (network %v): exit %d\nstdout: %s\nstderr: %s", uid, network, code, out, errOut)
			}
			var reach map[string]string
			json.Unmarshal(res.Value, &reach)
			want := map[string]string{"home": "PermissionError", "secret": "PermissionError", "own": "ok", "connect": "PermissionError", "inet6": "PermissionError"}
			if network {
				want["connect"], want["inet6"] = "ok", "ok"
			}
			for k, v := range want {
				if reach[k] != v {
					t.Errorf("uid %d, --allow-fallback (network %v): %s gave %q, want %q (all: %v)", uid, network, k, reach[k], v, reach)
				}
			}
			iso := res.Isolation
			if iso.Mode != "fallback" || res.NetworkDenied || iso.InetRefused == network || len(iso.LandlockFS) == 0 ||
				slices.ContainsFunc(iso.LandlockFS, func(p string) bool { return strings.HasPrefix(p, "/home") }) {
				t.Errorf("uid %d, --allow-fallback (network %v): network_denied %v, attestation mode %q, inet_refused %v, landlock_fs %q",
					uid, network, res.NetworkDenied, iso.Mode, iso.InetRefused, iso.LandlockFS)
			}
			if uid == user && !slices.Equal(iso.Interpreter.UID, []int{user, user, user, user}) {
				t.Errorf("uid %d: the program ran as %v", uid, iso.Interpreter.UID)
			}
		}
	}

	// A root host whose user namespace maps none of the run's ids (uid 0
	// alone): a configuration error that says so, never a host fault,
	// whatever the probe's child was answered.
	for _, extra := range [][]string{nil, {"--allow-fallback"}} {
		args := append([]string{"run", "--json", "--python", testPython()}, append(extra, "-")...)
		out, errOut, code := noUsernsMapped(t, bin, dir, 0, 1, program, args...)
		if code != 2 || strings.Contains(errOut, "host fault") || !strings.Contains(errOut, "run as 65534:65534") {
			t.Errorf("root with uid 0 alone mapped, psych run %v: exit %d (want 2, the run ids named)\nstdout: %s\nstderr: %s", extra, code, out, errOut)
		}
	}

	// psych doctor says what the fallback gives here.
	out, errOut, code := noUserns(t, bin, home, user, "", "doctor", "--json", "--python", testPython())
	var rep doctor.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 {
		t.Fatalf("doctor: exit %d: %v\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	fb := findCheck(t, rep, "fallback")
	for _, want := range []string{"--allow-fallback", "mode fallback", "confined by Landlock", "listing /home: PermissionError", "an IPv4 socket: PermissionError"} {
		if fb.Status != doctor.Warn || !strings.Contains(fb.Found, want) {
			t.Errorf("doctor's fallback check: %s %s — want WARN with %q", fb.Status, fb.Found, want)
		}
	}
}
