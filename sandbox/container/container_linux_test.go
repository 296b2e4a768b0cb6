//go:build linux && cgo

package container

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/netns"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/test/contract"
)

// testImage is the image the tests run (testutil.Image): by default
// psych's own (make image).
func testImage() string { return testutil.Image() }

// newTestSandbox opens engine with the test image, or skips where this host
// cannot have it: not root, or the engine unreachable or without the image.
// In CI (CI set, as root) a missing engine or image fails instead: a skip
// there would hide a broken backend.
func newTestSandbox(t *testing.T, engine Engine, cfg Config) *Sandbox {
	t.Helper()
	testutil.RequireRoot(t, "the container backend needs a root host")
	if engine != "" {
		cfg.Engine = engine
	}
	if cfg.Image == "" {
		cfg.Image = testImage()
	}
	s, err := New(cfg)
	if err != nil {
		if (errors.Is(err, ErrEngineUnreachable) || errors.Is(err, ErrImageNotFound)) && !testutil.InCI() {
			t.Skipf("%s: %v (make image, with the engine running, prepares it; CI does)", engine, err)
		}
		t.Fatalf("New(%s): %v", engine, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// backend describes engine to the contract suite, with the differences
// contract.Backend declares.
func backend(engine Engine) contract.Backend {
	namespaces := contract.AllNamespaces
	if engine != Containerd {
		namespaces = namespaces[1:] // no user namespace
	}
	return contract.Backend{
		// Only containerd gives each run a user namespace of its own here.
		HostUIDs:   engine != Containerd,
		Namespaces: namespaces,
		New: func(t *testing.T, opts contract.Options) sandbox.Sandbox {
			return newTestSandbox(t, engine, Config{EnvAllowlist: opts.EnvAllowlist})
		},
		SandboxEnv: []string{"MALLOC_ARENA_MAX", "LC_ALL"},
		ImageRoot:  true,
	}
}

// The engines' contract suites run in parallel with one another (t.Parallel,
// as many at once as -parallel allows: GOMAXPROCS by default), after the
// package's serial tests, which keep the engines to themselves: several
// check what this process left at an engine (every Sandbox here has the
// same owner), and TestOldBaseRemoved removes containerd's base snapshot.
// The suites do not contend: every run has outside ids of its own, so no
// per-uid quota crosses them, and each case checks only its own runs.

func TestContractContainerd(t *testing.T) {
	t.Parallel()
	contract.Run(t, backend(Containerd))
}

// poolCaps are wide caps for the pooled contract suite: every case is
// served warm but those that ask for more (they run cold and say so).
var poolCaps = sandbox.Limits{CPUSeconds: 60, AddressSpaceBytes: 2 << 30, MemoryBytes: 2 << 30, FileSizeBytes: 1 << 30, ProcessCount: 256}

// TestContractContainerdPooled is the contract suite on containerd with a
// warm pool: a pool changes when a sandbox starts, never what it is.
func TestContractContainerdPooled(t *testing.T) {
	t.Parallel()
	b := backend(Containerd)
	b.Warm = true
	b.New = func(t *testing.T, opts contract.Options) sandbox.Sandbox {
		s := newTestSandbox(t, Containerd, Config{EnvAllowlist: opts.EnvAllowlist, Pool: &sandbox.PoolConfig{Size: 2, Caps: poolCaps, Preload: opts.Preload}})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := s.WaitWarm(ctx); err != nil {
			t.Fatalf("WaitWarm: %v", err)
		}
		return s
	}
	contract.Run(t, b)
}

func TestContractPodman(t *testing.T) {
	t.Parallel()
	contract.Run(t, backend(Podman))
}

func TestContractDocker(t *testing.T) {
	t.Parallel()
	contract.Run(t, backend(Docker))
}

// engineOrSkip skips a test where engine cannot be had on this host (never
// in CI, see newTestSandbox), and returns it opened.
func engineOrSkip(t *testing.T, engine Engine) *Sandbox {
	t.Helper()
	return newTestSandbox(t, engine, Config{})
}

// forEachEngine runs fn for every engine, as subtests in parallel with one
// another (not with other tests): each looks only at its own engine.
func forEachEngine(t *testing.T, fn func(t *testing.T, engine Engine)) {
	for _, e := range engines {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			fn(t, e)
		})
	}
}

// ownedContainers lists the containers the engine holds for owner.
func ownedContainers(t *testing.T, s *Sandbox, owner string) []string {
	t.Helper()
	var out []string
	_, err := s.eng.reap(context.Background(), func(o string) bool {
		if o == owner {
			out = append(out, o)
		}
		return false // list only
	})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	return out
}

func TestImageNotFound(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine Engine) {
		probe := engineOrSkip(t, engine)
		_, err := New(Config{Engine: engine, Image: "localhost/psych-no-such-image:0"})
		if !errors.Is(err, ErrImageNotFound) || !errors.Is(err, sandbox.ErrInvalidConfig) {
			t.Fatalf("New with a missing image: %v, want ErrImageNotFound (an ErrInvalidConfig)", err)
		}
		if !strings.Contains(err.Error(), "make image") {
			t.Errorf("the error does not say how to get the image: %v", err)
		}
		probe.settle()
		if left := ownedContainers(t, probe, probe.owner.String()); len(left) > 0 {
			t.Errorf("New with a missing image made containers: %v", left)
		}
	})
}

func TestEngineSelection(t *testing.T) {
	s := engineOrSkip(t, Containerd)
	auto := newTestSandbox(t, "", Config{})
	if auto.Engine() != Containerd {
		t.Errorf("no engine named: took %s, want containerd, the first reachable", auto.Engine())
	}
	_, err := New(Config{Engine: Containerd, ContainerdAddress: "/nonexistent/containerd.sock", Image: testImage()})
	if !errors.Is(err, ErrEngineUnreachable) || !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Errorf("an unreachable containerd: %v, want ErrEngineUnreachable", err)
	}
	_, err = New(Config{Engine: "rkt"})
	if !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Errorf("an unknown engine: %v, want ErrInvalidConfig", err)
	}
	if got := s.Image(); got.Ref != testImage() || !strings.HasPrefix(got.Digest, "sha256:") {
		t.Errorf("Image() = %+v", got)
	}
}

// TestNetworkCheckCatchesALink: the check of the container's own namespace
// is real: a link added before it fails it, and the run is refused.
func TestNetworkCheckCatchesALink(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine Engine) {
		s := engineOrSkip(t, engine)
		s.hooks.beforeNetCheck = func(fd int) error { return netns.AddDummy(fd, "dummy0") }
		res, err := s.Run(context.Background(), sandbox.Request{Code: "1"})
		if !errors.Is(err, sandbox.ErrRefused) || res != nil || !strings.Contains(err.Error(), "dummy0") {
			t.Fatalf("a namespace with a second link: %v, %+v; want ErrRefused naming dummy0", err, res)
		}
		s.hooks.beforeNetCheck = nil
		res, err = s.Run(context.Background(), sandbox.Request{Code: "1"})
		if err != nil || !res.NetworkDenied || !res.Isolation.Network.Verified {
			t.Fatalf("without the hook: %v, %+v", err, res)
		}
	})
}

// TestExtraOptionsNeverLower: options that would add privilege are refused
// at New (the CLI engines' flags) or overruled by psych's hardening
// (containerd's spec options), and every run is checked against the floor.
func TestExtraOptionsNeverLower(t *testing.T) {
	for _, engine := range []Engine{Podman, Docker} {
		for _, bad := range []string{"--privileged", "--cap-add=SYS_ADMIN", "-v", "--volume=/:/host", "--network=host", "--security-opt=seccomp=unconfined", "--pid=host"} {
			if _, err := New(Config{Engine: engine, Image: testImage(), ExtraRunArgs: []string{bad}}); !errors.Is(err, sandbox.ErrInvalidConfig) {
				t.Errorf("%s with ExtraRunArgs %s: %v, want ErrInvalidConfig", engine, bad, err)
			}
		}
	}
	engineOrSkip(t, Containerd)
	s := newTestSandbox(t, Containerd, Config{SpecOpts: []oci.SpecOpts{
		oci.WithPrivileged,
		oci.WithHostNamespace(specs.NetworkNamespace),
		oci.WithHostNamespace(specs.PIDNamespace),
		oci.WithAddedCapabilities([]string{"CAP_SYS_ADMIN", "CAP_NET_ADMIN"}),
		oci.WithMounts([]specs.Mount{{Destination: "/host", Type: "bind", Source: "/", Options: []string{"rbind", "rw"}}}),
	}})
	res, err := s.Run(context.Background(), sandbox.Request{Code: "import os\n[os.path.exists('/host'), open('/proc/self/status').read().count('CapEff:\\t0000000000000000')]"})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Value) != "[false,1]" || !res.NetworkDenied || res.Isolation.Interpreter.CapEff != "0000000000000000" || !slices.Contains(res.Isolation.Namespaces, "pid") {
		t.Fatalf("spec options lowered the sandbox: value %s, network denied %v, isolation %+v", res.Value, res.NetworkDenied, res.Isolation)
	}
}

// TestNetworkGranted: a request that grants the network runs in the host's
// network namespace, with no check and network_denied false; with
// RequireNetworkDenial it is refused.
func TestNetworkGranted(t *testing.T) {
	s := engineOrSkip(t, Containerd)
	res, err := s.Run(context.Background(), sandbox.Request{Code: "import socket\nlen(socket.if_nameindex())", Network: true})
	if err != nil || res.Failure != nil || res.NetworkDenied || res.Isolation.Network != nil || slices.Contains(res.Isolation.Namespaces, "net") {
		t.Fatalf("granted network: %v %+v", err, res)
	}
	strict := newTestSandbox(t, Containerd, Config{RequireNetworkDenial: true})
	if res, err := strict.Run(context.Background(), sandbox.Request{Code: "1", Network: true}); !errors.Is(err, sandbox.ErrRefused) || res != nil {
		t.Fatalf("granted network under RequireNetworkDenial: %v, %+v; want ErrRefused", err, res)
	}
}

func TestConfigRefuses(t *testing.T) {
	for name, cfg := range map[string]Config{
		"uid 0":        {RunAs: &IDs{UID: 0, GID: 100}},
		"uid 1":        {RunAs: &IDs{UID: 1, GID: 100}},
		"reserved env": {EnvAllowlist: []string{"PATH"}},
		"relative py":  {ContainerPythonBin: "python3"},
		"small frame":  {MaxFrameBytes: 100},
		"bad limits":   {DefaultLimits: sandbox.Limits{WallSeconds: -1}},
	} {
		if _, err := New(cfg); !errors.Is(err, sandbox.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	// RunAs is one pair here: a range is refused, with an image that is
	// there (the cases above would be refused for a missing one as well).
	s, err := New(Config{Engine: Containerd, Image: testImage(), RunAs: &IDs{UID: 5000, GID: 5000, Count: 2}})
	if !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "one pair") {
		if s != nil {
			s.Close()
		}
		t.Errorf("RunAs with Count 2: %v, want ErrInvalidConfig saying it is one pair", err)
	}
}
