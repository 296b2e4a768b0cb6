//go:build linux && cgo

package subprocess

import (
	"os"
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
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
	if s := newTestSandbox(t, Config{}); !s.userns {
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
			return newTestSandbox(t, Config{EnvAllowlist: opts.EnvAllowlist})
		},
		SandboxEnv:   []string{"MALLOC_ARENA_MAX", "LC_ALL"},
		OneOutsideID: map[bool]string{true: "an unprivileged host has one uid to give its runs: its own"}[os.Geteuid() != 0],
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
			s := newTestSandbox(t, Config{EnvAllowlist: opts.EnvAllowlist, Pool: &sandbox.PoolConfig{Size: 2, Caps: poolCaps}})
			t.Cleanup(func() { s.Close() })
			waitWarm(t, s)
			return s
		},
		SandboxEnv: []string{"MALLOC_ARENA_MAX", "LC_ALL"},
	})
}
