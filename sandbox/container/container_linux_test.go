//go:build linux && cgo

package container

import (
	"errors"
	"os"
	"testing"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/test/contract"
)

// testImage is the image the tests run: PSYCH_TEST_IMAGE, or psych's own
// (make image).
func testImage() string {
	if v := os.Getenv("PSYCH_TEST_IMAGE"); v != "" {
		return v
	}
	return "localhost/psych-python:3.11"
}

// newTestSandbox opens engine with the test image, or skips where this host
// cannot have it: not root, or the engine unreachable or without the image.
// In CI (CI set, as root) a missing engine or image fails instead: a skip
// there would hide a broken backend.
func newTestSandbox(t *testing.T, engine Engine, cfg Config) *Sandbox {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the container backend needs a root host (CI is root)")
	}
	cfg.Engine = engine
	if cfg.Image == "" {
		cfg.Image = testImage()
	}
	s, err := New(cfg)
	if err != nil {
		if (errors.Is(err, ErrEngineUnreachable) || errors.Is(err, ErrImageNotFound)) && os.Getenv("CI") == "" {
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

func TestContractContainerd(t *testing.T) { contract.Run(t, backend(Containerd)) }
func TestContractPodman(t *testing.T)     { contract.Run(t, backend(Podman)) }
func TestContractDocker(t *testing.T)     { contract.Run(t, backend(Docker)) }
