//go:build linux && cgo

// Package remote runs the contract suite on the `remote` backend: the Go
// client's Sandbox (package client) over a psych serve (package server)
// whose Sandbox is the subprocess backend, on a Unix socket in a temporary
// directory. The server runs in the test process; its programs run in
// subprocesses, as ever.
package remote

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/client"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/subprocess"
	"github.com/psych-runtime/psych/server"
	"github.com/psych-runtime/psych/test/contract"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// caps are the server's: well above the defaults, so that the suite's
// requests are the sandbox's to judge, as they are on the library.
var caps = sandbox.Limits{
	CPUSeconds: 600, WallSeconds: 600, ApprovalSeconds: 3600,
	AddressSpaceBytes: 16 << 30, MemoryBytes: 16 << 30, FileSizeBytes: 4 << 30,
	ProcessCount: 4096, StackBytes: 1 << 30,
}

// hostCaps are caps with OpenFiles at the host's own hard limit, the most
// a run can be given.
func hostCaps(t *testing.T) sandbox.Limits {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	c := caps
	c.OpenFiles = int(min(rl.Max, 1<<20))
	return c
}

// newRemote starts a server over a subprocess Sandbox configured as the
// subprocess backend's own contract test configures it, and returns the
// client's Sandbox of it. Cleanup shuts the server down.
func newRemote(t *testing.T, opts contract.Options) sandbox.Sandbox {
	t.Helper()
	testutil.RequirePython(t)
	sb, err := subprocess.New(subprocess.Config{
		PythonBin:    testutil.Python(),
		AllowSameUID: os.Geteuid() != 0,
		EnvAllowlist: opts.EnvAllowlist,
	})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := psych.New(psych.Config{Sandbox: sb})
	if err != nil {
		sb.Close()
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{
		Runtime: rt, Sandbox: sb, Caps: hostCaps(t), AllowNetwork: true, MaxRuns: 64,
		Info:   api.Info{Backend: "subprocess", EnvAllowlist: opts.EnvAllowlist},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		sb.Close()
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "psych.sock")
	l, err := server.Listen("unix://"+sock, server.ListenOptions{Group: "no-such-group-psych-test"})
	if err != nil {
		sb.Close()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	c, err := client.New("unix://"+sock, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs := c.Sandbox()
	t.Cleanup(func() {
		rs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestContractRemote is the contract suite on the remote backend, with the
// subprocess backend's honest differences and no other.
func TestContractRemote(t *testing.T) {
	contract.Run(t, contract.Backend{
		New:          newRemote,
		SandboxEnv:   []string{"MALLOC_ARENA_MAX", "LC_ALL"},
		OneOutsideID: map[bool]string{true: "an unprivileged host has one uid to give its runs: its own"}[os.Geteuid() != 0],
	})
}
