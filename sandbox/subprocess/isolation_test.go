//go:build linux && cgo

package subprocess

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/netns"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/attest"
	"github.com/psych-runtime/psych/sandbox/internal/resources"
	"github.com/psych-runtime/psych/test/contract"
)

func run1(t *testing.T, s *Sandbox, req sandbox.Request) *sandbox.Result {
	t.Helper()
	res, err := s.Run(context.Background(), req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Failure != nil {
		t.Fatalf("failure %+v\nstderr: %s", *res.Failure, res.Stderr)
	}
	return res
}

// TestFilterIsWhatDenies runs the contract's denial probes with the filter
// off (a test-only control): each probe then succeeds, so the filter, not
// the namespaces or the missing capabilities, is what denies them.
func TestFilterIsWhatDenies(t *testing.T) {
	s := newTestSandbox(t, Config{})
	s.hooks.noSeccomp = true
	res := run1(t, s, sandbox.Request{Code: contract.DenialProbes("")})
	var got map[string]any
	if err := json.Unmarshal(res.Value, &got); err != nil {
		t.Fatal(err)
	}
	for k, v := range got {
		if v == "EPERM" {
			t.Errorf("%s fails with EPERM even without the filter: the probe proves nothing", k)
		}
	}
	if len(got) != 5 {
		t.Fatalf("probes %v", got)
	}
	if res.Isolation.Interpreter.Seccomp != 0 || res.Isolation.SeccompDigest != "" {
		t.Errorf("the control's attestation claims a filter: %+v", res.Isolation)
	}
}

// TestNetworkCheckIsReal: a link added to the run's namespace before the
// check makes network_denied false, so it is the check that sets it.
func TestNetworkCheckIsReal(t *testing.T) {
	s := newTestSandbox(t, Config{})
	s.hooks.beforeNetCheck = func(fd int) error { return netns.AddDummy(fd, "dummy0") }
	res := run1(t, s, sandbox.Request{Code: "import socket\n[n for _, n in socket.if_nameindex()]"})
	if res.NetworkDenied || res.Isolation.Network == nil || res.Isolation.Network.Verified {
		t.Fatalf("a namespace with an extra link: network_denied %v, check %+v", res.NetworkDenied, res.Isolation.Network)
	}
	if !strings.Contains(string(res.Value), "dummy0") || !strings.Contains(res.Isolation.Network.Reason, "dummy0") {
		t.Fatalf("the program saw %s and the check said %q; want dummy0 in both", res.Value, res.Isolation.Network.Reason)
	}
}

// TestNetworkGranted: a granted network is the host's own namespace,
// reported as not denied and not checked.
func TestNetworkGranted(t *testing.T) {
	s := newTestSandbox(t, Config{})
	// An abstract socket of the host's: reachable through the shared
	// namespace, unless Landlock scopes it away.
	abstract := fmt.Sprintf("@psych-test-%d", os.Getpid())
	ln, err := net.Listen("unix", abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code := "import socket, errno\nn = len(socket.if_nameindex())\ns = socket.socket(socket.AF_UNIX)\n" +
		"try: s.connect('\\0" + abstract[1:] + "'); r = 'connected'\nexcept OSError as e: r = errno.errorcode[e.errno]\n[n, r]"
	res := run1(t, s, sandbox.Request{Code: code, Network: true})
	host, _ := os.ReadDir("/sys/class/net")
	var got []any
	json.Unmarshal(res.Value, &got)
	if res.NetworkDenied || res.Isolation.Network != nil || len(got) != 2 || got[0] != float64(len(host)) {
		t.Fatalf("granted network: denied %v, check %+v, value %s (host has %d interfaces)", res.NetworkDenied, res.Isolation.Network, res.Value, len(host))
	}
	want := "connected"
	if s.landlock != 0 {
		want = "EPERM"
	}
	if got[1] != want {
		t.Errorf("connect to a host abstract socket: %v, want %s (landlock scopes %v)", got[1], want, res.Isolation.LandlockScoped)
	}
	for _, ns := range res.Isolation.Namespaces {
		if ns == "net" {
			t.Fatal("a granted run still has its own network namespace")
		}
	}
}

// fallbackReport is what the fallback helper (TestMain) prints.
type fallbackReport struct {
	UserNS        bool
	Isolation     *sandbox.Isolation
	NetworkDenied bool
	Value         string
	Refused       string // New without AllowFallback
	RefusedIso    bool   // errors.Is(Refused, sandbox.ErrRefused, ErrNoUserNamespace)
	RefusedNet    string
	// Reach is what a fallback run could reach, without and with the
	// network granted (fallbackReach).
	Reach, ReachNet map[string]string
	Err             string
}

// fallbackReach is a program that tries the host's home directories, a
// world-readable file in a directory of the host's /tmp, its own TMPDIR
// and the socket domains, and says what each gave.
func fallbackReach(secret string) string {
	return fmt.Sprintf("import os, socket\n"+testutil.PyTry+`def w():
    p = os.path.join(os.environ["TMPDIR"], "x")
    with open(p, "w") as f:
        f.write("x")
    with open(p) as f:
        assert f.read() == "x"
    os.listdir(".")
{"home": t(lambda: os.listdir("/home")), "secret": t(lambda: open(%q).read()), "tmpdir": t(w),
 "inet": t(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()),
 "inet6": t(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()),
 "unix": t(lambda: socket.socket(socket.AF_UNIX).close())}`, secret)
}

// fallbackHelper runs inside a user namespace whose max_user_namespaces is
// 0, as a host without user namespaces (Ubuntu's AppArmor restriction or
// user.max_user_namespaces=0) would be.
const fallbackHelperName = "subprocess-fallback"

func fallbackHelper() {
	var rep fallbackReport
	defer func() { json.NewEncoder(os.Stdout).Encode(&rep) }()
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0); err != nil {
		rep.Err = err.Error()
		return
	}
	// Refused unless asked for, though a root host, with RequireIsolation
	// (no effect) or without.
	for _, cfg := range []Config{{PythonBin: testPython()}, {PythonBin: testPython(), RequireIsolation: true}} {
		rep.RefusedIso = false
		if _, err := New(cfg); err != nil {
			rep.Refused = err.Error()
			rep.RefusedIso = errors.Is(err, sandbox.ErrRefused) && errors.Is(err, ErrNoUserNamespace)
		}
		if !rep.RefusedIso {
			return
		}
	}
	s, err := New(Config{PythonBin: testPython(), AllowFallback: true})
	if err != nil {
		rep.Err = err.Error()
		return
	}
	rep.UserNS = s.userns
	res, err := s.Run(context.Background(), sandbox.Request{Code: "import os\n[os.getuid(), os.getcwd() == os.environ['HOME']]"})
	if err != nil {
		rep.Err = err.Error()
		return
	}
	rep.Isolation, rep.NetworkDenied, rep.Value = res.Isolation, res.NetworkDenied, string(res.Value)
	dir, err := os.MkdirTemp("", "psych-secret-")
	if err != nil {
		rep.Err = err.Error()
		return
	}
	defer os.RemoveAll(dir)
	secret := filepath.Join(dir, "secret")
	if err := errors.Join(os.Chmod(dir, 0o755), os.WriteFile(secret, []byte("s"), 0o644)); err != nil {
		rep.Err = err.Error()
		return
	}
	for _, c := range []struct {
		network bool
		out     *map[string]string
	}{{false, &rep.Reach}, {true, &rep.ReachNet}} {
		res, err := s.Run(context.Background(), sandbox.Request{Code: fallbackReach(secret), Network: c.network})
		if err == nil && res.Failure != nil {
			err = fmt.Errorf("%s: %s", res.Failure.Type, res.Failure.Message)
		}
		if err == nil {
			err = json.Unmarshal(res.Value, c.out)
		}
		if err != nil {
			rep.Err = err.Error()
			return
		}
		if !c.network {
			rep.Isolation = res.Isolation
		}
	}
	for _, c := range []struct {
		cfg Config
		out *string
	}{{Config{PythonBin: testPython(), AllowFallback: true, RequireNetworkDenial: true}, &rep.RefusedNet}} {
		s, err := New(c.cfg)
		if err == nil {
			_, err = s.Run(context.Background(), sandbox.Request{Code: "1"})
		}
		if errors.Is(err, sandbox.ErrRefused) {
			*c.out = err.Error()
		}
	}
}

func TestFallbackWithoutUserNamespaces(t *testing.T) {
	requireRoot(t) // to map the ids, nobody and the default run range included, into the helper's namespace
	cmd := testutil.HelperCommand(fallbackHelperName, "")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}, {ContainerID: int(resources.DefaultIDFirst), HostID: int(resources.DefaultIDFirst), Size: int(resources.DefaultIDCount)}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}, {ContainerID: int(resources.DefaultIDFirst), HostID: int(resources.DefaultIDFirst), Size: int(resources.DefaultIDCount)}},
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var rep fallbackReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("helper said %q: %v", out, err)
	}
	// Weaker protection is never silent: without AllowFallback, New
	// refuses, naming it and what the kernel answered.
	if !rep.RefusedIso || !strings.Contains(rep.Refused, "AllowFallback") || !strings.Contains(rep.Refused, "ENOSPC") {
		t.Fatalf("New without AllowFallback on a host without user namespaces: %q, want sandbox.ErrRefused and ErrNoUserNamespace naming AllowFallback and ENOSPC", rep.Refused)
	}
	if rep.Err != "" {
		t.Fatalf("helper: %s", rep.Err)
	}
	iso := rep.Isolation
	if rep.UserNS || iso == nil || iso.Mode != "fallback" || len(iso.Namespaces) != 0 || rep.NetworkDenied || iso.Network != nil {
		t.Fatalf("without user namespaces: userns %v, network_denied %v, isolation %+v", rep.UserNS, rep.NetworkDenied, iso)
	}
	// What the fallback still has: the uid drop, no capabilities,
	// no_new_privs and the filter.
	st := iso.Interpreter
	var fallbackUID uint32
	fmt.Sscanf(rep.Value, "[%d,true]", &fallbackUID)
	if fallbackUID < resources.DefaultIDFirst || fallbackUID >= resources.DefaultIDFirst+resources.DefaultIDCount || st.Seccomp != 2 || st.NoNewPrivs != 1 || strings.Trim(st.CapEff, "0") != "" || strings.Trim(st.CapBnd, "0") != "" {
		t.Fatalf("fallback run: value %s, interpreter %+v", rep.Value, st)
	}
	// The fallback confines files with Landlock (where the kernel has it)
	// and refuses IPv4 and IPv6 sockets unless the network is granted;
	// the attestation says so, and network_denied stays false.
	want := map[string]string{"home": "PermissionError", "secret": "PermissionError", "tmpdir": "ok", "inet": "PermissionError", "inet6": "PermissionError", "unix": "ok"}
	wantNet := map[string]string{"home": "PermissionError", "secret": "PermissionError", "tmpdir": "ok", "inet": "ok", "inet6": "ok", "unix": "ok"}
	if attest.LandlockABI() == 0 {
		t.Log("this kernel has no Landlock: the fallback's files are not confined here")
		for _, m := range []map[string]string{want, wantNet} {
			m["home"], m["secret"] = "ok", "ok"
		}
	} else if !slices.Contains(iso.LandlockFS, "$HOME:rw") ||
		!slices.Contains(iso.LandlockFS, "/usr:rx") || slices.ContainsFunc(iso.LandlockFS, func(p string) bool { return strings.HasPrefix(p, "/home") || strings.HasPrefix(p, "/tmp") }) {
		t.Errorf("landlock_fs %q: want /usr:rx and the run directory :rw, nothing of /home or /tmp", iso.LandlockFS)
	}
	if !maps.Equal(rep.Reach, want) || !maps.Equal(rep.ReachNet, wantNet) {
		t.Errorf("fallback run reached %v (want %v); with the network %v (want %v)", rep.Reach, want, rep.ReachNet, wantNet)
	}
	if !iso.InetRefused || rep.NetworkDenied {
		t.Errorf("attestation: inet_refused %v, network_denied %v", iso.InetRefused, rep.NetworkDenied)
	}
	if !strings.Contains(rep.RefusedNet, "network denial is required") {
		t.Fatalf("RequireNetworkDenial did not refuse: %q", rep.RefusedNet)
	}
}

// TestFallbackRootNamespaces: a root host without user namespaces (played
// here by testNoUserns on a root host, as the kernel's refusal cannot be
// had without changing the machine's own sysctl) still makes the network,
// pid, ipc, uts, mount and cgroup namespaces and builds the view, as root,
// and the program runs under its outside ids with no capabilities: it sees
// the view's root, not the host's, its network denial is verified, and the
// attestation says fallback with the namespaces it had.
func TestFallbackRootNamespaces(t *testing.T) {
	requireRoot(t)
	testNoUserns = true
	s, err := New(Config{PythonBin: testPython(), AllowFallback: true})
	testNoUserns = false
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.userns || !s.fallback.rootNS {
		t.Fatalf("userns %v, rootNS %v: want the fallback with namespaces", s.userns, s.fallback.rootNS)
	}
	port := testutil.HostService(t)
	code := fmt.Sprintf("import os, socket\n"+testutil.PyTry+`with open(os.path.join(os.environ["TMPDIR"], "x"), "w") as f:
    f.write("x")
[sorted(os.listdir("/")), socket.gethostname(), os.getuid(), os.getpid(), os.environ["HOME"],
 t(lambda: socket.create_connection(("127.0.0.1", %d), timeout=2).close()), open("/etc/passwd").read().count(":%%d:" %% os.getuid())]`, port)
	res, err := s.Run(context.Background(), sandbox.Request{Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failure != nil {
		t.Fatalf("%s: %s\n%s", res.Failure.Type, res.Failure.Message, res.Stderr)
	}
	var v []any
	if err := json.Unmarshal(res.Value, &v); err != nil || len(v) != 7 {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	root := fmt.Sprint(v[0])
	uid := int(v[2].(float64))
	if strings.Contains(root, "root") || strings.Contains(root, "home") || strings.Contains(root, "var") || !strings.Contains(root, "usr") ||
		v[1] != sandboxHost || uid < int(resources.DefaultIDFirst) || v[3].(float64) > 3 || v[4] != sandboxHome || v[5] == "ok" || v[6].(float64) != 1 {
		t.Errorf("the program saw / %s, hostname %v, uid %v, pid %v, HOME %v, a host listener %v, itself in /etc/passwd %v times", root, v[1], v[2], v[3], v[4], v[5], v[6])
	}
	iso := res.Isolation
	if iso.Mode != "fallback" || !res.NetworkDenied || iso.InetRefused || len(iso.LandlockFS) != 0 ||
		!slices.Equal(iso.Namespaces, []string{"mnt", "net", "pid", "ipc", "uts", "cgroup"}) || iso.RootMount != "own:tmpfs" {
		t.Errorf("network_denied %v, attestation %+v", res.NetworkDenied, iso)
	}
	st := iso.Interpreter
	if strings.Trim(st.CapEff, "0") != "" || strings.Trim(st.CapBnd, "0") != "" || st.NoNewPrivs != 1 || st.Seccomp != 2 || slices.Contains(st.UID, 0) {
		t.Errorf("interpreter %+v", st)
	}
	if s.hostUID == 0 && iso.Init.UID[0] == 0 {
		t.Errorf("the init still root after the setup: %+v", iso.Init)
	}
}
