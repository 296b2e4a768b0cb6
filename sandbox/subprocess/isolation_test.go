//go:build linux && cgo

package subprocess

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/netns"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/host"
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
	RefusedIso    string
	RefusedNet    string
	Err           string
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
	s, err := New(Config{PythonBin: testPython()})
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
	for _, c := range []struct {
		cfg Config
		out *string
	}{{Config{PythonBin: testPython(), RequireIsolation: true}, &rep.RefusedIso}, {Config{PythonBin: testPython(), RequireNetworkDenial: true}, &rep.RefusedNet}} {
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
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}, {ContainerID: int(host.DefaultIDFirst), HostID: int(host.DefaultIDFirst), Size: int(host.DefaultIDCount)}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}, {ContainerID: int(host.DefaultIDFirst), HostID: int(host.DefaultIDFirst), Size: int(host.DefaultIDCount)}},
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var rep fallbackReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("helper said %q: %v", out, err)
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
	if fallbackUID < host.DefaultIDFirst || fallbackUID >= host.DefaultIDFirst+host.DefaultIDCount || st.Seccomp != 2 || st.NoNewPrivs != 1 || strings.Trim(st.CapEff, "0") != "" {
		t.Fatalf("fallback run: value %s, interpreter %+v", rep.Value, st)
	}
	if !strings.Contains(rep.RefusedIso, "isolation is required") || !strings.Contains(rep.RefusedNet, "network denial is required") {
		t.Fatalf("Require options did not refuse: %q, %q", rep.RefusedIso, rep.RefusedNet)
	}
}
