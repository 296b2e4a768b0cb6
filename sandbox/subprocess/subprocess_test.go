//go:build linux && cgo

package subprocess

import (
	"os"
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/attest"
	"github.com/psych-runtime/psych/test/contract"
)

// testPython is the interpreter the tests run (testutil.Python): by
// default Debian's, which any run user can execute.
func testPython() string { return testutil.Python() }

func newTestSandbox(t *testing.T, cfg Config) *Sandbox {
	t.Helper()
	if cfg.PythonBin == "" {
		cfg.PythonBin = testPython()
	}
	if os.Geteuid() != 0 {
		cfg.AllowSameUID = true
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func TestContract(t *testing.T) {
	var none string
	if s := newTestSandbox(t, Config{AllowFallback: true}); !s.userns {
		// Only where the kernel or a security module forbids user
		// namespaces; CI's machine has them, and the fallback has tests
		// of its own (TestFallbackWithoutUserNamespaces).
		none = "no user namespace with capabilities can be had here"
		if testutil.InCI() {
			t.Fatal("CI's machine has user namespaces, but the probe found none: " + none)
		}
	}
	contract.Run(t, contract.Backend{
		NoIsolation: none,
		New: func(t *testing.T, opts contract.Options) sandbox.Sandbox {
			return newTestSandbox(t, Config{EnvAllowlist: opts.EnvAllowlist, AllowFallback: none != ""})
		},
		SandboxEnv:   []string{"MALLOC_ARENA_MAX", "LC_ALL"},
		OneOutsideID: map[bool]string{true: "an unprivileged host has one uid to give its runs: its own"}[os.Geteuid() != 0],
		Without:      noWorkspace(),
	})
}

// TestContractRootFallback is the contract suite on a root host without
// user namespaces (testNoUserns) that still makes the other namespaces and
// the view: the program under its outside ids, no user namespace.
func TestContractRootFallback(t *testing.T) {
	requireRoot(t)
	if testutil.HostLaneOnly(t, "the fallback's whole contract suite would pass the lane's per-binary timeout under emulation") {
		return
	}
	testNoUserns = true
	t.Cleanup(func() { testNoUserns = false })
	contract.Run(t, contract.Backend{
		New: func(t *testing.T, opts contract.Options) sandbox.Sandbox {
			s := newTestSandbox(t, Config{EnvAllowlist: opts.EnvAllowlist, AllowFallback: true})
			if !s.fallback.rootNS {
				t.Fatal("no namespaces without a user namespace on this root host")
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		SandboxEnv: []string{"MALLOC_ARENA_MAX", "LC_ALL"},
		Namespaces: []string{"mnt", "net", "pid", "ipc", "uts", "cgroup"},
		HostUIDs:   true,
	})
}

// TestContractLandlockFallback is the contract suite on a host without
// user namespaces where no other namespace can be made either (testNoUserns
// and testNoRootNS on a root host): files confined by Landlock, IPv4 and
// IPv6 sockets refused. The isolation cases are skipped (NoIsolation); the
// others must hold as they do isolated.
func TestContractLandlockFallback(t *testing.T) {
	requireRoot(t)
	if testutil.HostLaneOnly(t, "the fallback's whole contract suite would pass the lane's per-binary timeout under emulation") {
		return
	}
	testNoUserns, testNoRootNS = true, true
	t.Cleanup(func() { testNoUserns, testNoRootNS = false, false })
	contract.Run(t, contract.Backend{
		NoIsolation: "the fallback without namespaces (Landlock and seccomp only), as asked for",
		New: func(t *testing.T, opts contract.Options) sandbox.Sandbox {
			s := newTestSandbox(t, Config{EnvAllowlist: opts.EnvAllowlist, AllowFallback: true})
			if s.fallback.rootNS || s.fallback.handled == 0 && attest.LandlockABI() > 0 {
				t.Fatalf("rootNS %v, Landlock %#x: want the fallback confined by Landlock alone", s.fallback.rootNS, s.fallback.handled)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		SandboxEnv: []string{"MALLOC_ARENA_MAX", "LC_ALL"},
		Namespaces: []string{},
		HostUIDs:   true,
		Without: map[string]string{
			"SetsidGrandchild":  "it finds its grandchild through /proc, which Landlock keeps out of reach",
			"BootstrapSource":   "it reads /proc/self/cmdline, which Landlock keeps out of reach",
			"Multiprocessing":   "its semaphores are files of /dev/shm, the host's, which Landlock keeps out of reach",
			"PseudoTerminals":   "/dev/pts is the host's, which Landlock keeps out of reach",
			"NoStateAcrossRuns": "it writes the host's /tmp, which Landlock keeps out of reach (a run's own is its TMPDIR)",
			"FreshTmp":          "the run's directory (its TMPDIR) holds the compiled bootstrap, read-only",
			"NetworkDatabases":  "it listens on 127.0.0.1, and without a network namespace of its own the filter refuses IPv4 and IPv6 sockets",
			"RootEntries":       "no view makes an /etc/passwd that names the run's outside uid: the host's is read",
			"FilesInOut":        "no view gives the run a /work of its own: a request with files is refused (sandbox.ErrRefused)",
			"FilesOutCaps":      "no view gives the run a /work of its own, so no files come out",
			"FilesHostile":      "no view gives the run a /work of its own, so no files come out",
			"FilesManyEmpty":    "no view gives the run a /work of its own, so no files come out",
			"FiguresTwo":        noFigures,
			"FiguresShowTwice":  noFigures,
			"FiguresClosed":     noFigures,
			"FiguresOverCap":    noFigures,
			"FiguresForged":     noFigures,
			"FiguresFontCache":  noFigures,
		},
	})
}

// poolCaps are wide caps for the pooled contract suite: every case's
// request is served warm but those that ask for more (they run cold and
// say so).
var poolCaps = sandbox.Limits{CPUSeconds: 60, AddressSpaceBytes: 2 << 30, MemoryBytes: 2 << 30, FileSizeBytes: 1 << 30, ProcessCount: 256, WallSeconds: 120}

// TestContractPooled is the contract suite with a warm pool: a pool changes
// when a sandbox starts, never what it is.
func TestContractPooled(t *testing.T) {
	requireRootPool(t)
	contract.Run(t, contract.Backend{
		Warm: true,
		New: func(t *testing.T, opts contract.Options) sandbox.Sandbox {
			s := newTestSandbox(t, Config{EnvAllowlist: opts.EnvAllowlist, Pool: &sandbox.PoolConfig{Size: 2, Caps: poolCaps, Preload: opts.Preload}})
			t.Cleanup(func() { s.Close() })
			waitWarm(t, s)
			return s
		},
		SandboxEnv: []string{"MALLOC_ARENA_MAX", "LC_ALL"},
	})
}

// noWorkspace names the files cases an unprivileged host cannot pass: it
// cannot mount the tmpfs a run's /work is (a request with files is
// refused, and no files come out).
func noWorkspace() map[string]string {
	if os.Geteuid() == 0 {
		return nil
	}
	why := "an unprivileged host cannot mount a run's /work (Config.Files)"
	return map[string]string{"FilesInOut": why, "FilesOutCaps": why, "FilesHostile": why, "FilesManyEmpty": why, "FreshTmp": why,
		"FiguresTwo": noFigures, "FiguresShowTwice": noFigures, "FiguresClosed": noFigures, "FiguresOverCap": noFigures, "FiguresForged": noFigures, "FiguresFontCache": noFigures}
}

// noFigures is why a run without a workspace the host holds has no
// artifacts: the host collects figures from that tmpfs, and without it
// the bootstrap leaves matplotlib alone.
const noFigures = "the host holds no workspace of the run's, so it collects no figures (the bootstrap leaves matplotlib alone)"
