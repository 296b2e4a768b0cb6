package resources

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

func withLockPath(t *testing.T) {
	t.Helper()
	old := IDLockPath
	IDLockPath = filepath.Join(t.TempDir(), "psych", "ids.lock")
	t.Cleanup(func() { IDLockPath = old })
}

// TestClaimDistinct: concurrent claims get distinct slots, a full range
// waits and then fails with ErrBusy, and a release frees the slot.
func TestClaimDistinct(t *testing.T) {
	withLockPath(t)
	r, span := IDs{UID: 200000, GID: 200000, Count: 6}, uint32(2)
	if _, _, err := r.Claim(context.Background(), 7); !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Fatalf("a run of 7 ids from a range of 6: %v, want ErrInvalidConfig", err)
	}
	seen := map[uint32]bool{}
	var releases []func()
	for i := 0; i < 3; i++ {
		base, release, err := r.Claim(context.Background(), span)
		if err != nil {
			t.Fatal(err)
		}
		if seen[base] || base < r.UID || base+span > r.UID+r.Count || (base-r.UID)%span != 0 {
			t.Fatalf("claim %d: base %d (seen %v)", i, base, seen)
		}
		seen[base] = true
		releases = append(releases, release)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, _, err := r.Claim(ctx, span); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a full range under a 200 ms context: %v", err)
	}
	done := make(chan uint32)
	go func() {
		base, release, err := r.Claim(context.Background(), span)
		if err != nil {
			t.Error(err)
		}
		release()
		done <- base
	}()
	time.Sleep(50 * time.Millisecond)
	releases[1]()
	select {
	case base := <-done:
		if !seen[base] {
			t.Fatalf("the waiting claim got %d, not a released slot", base)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a released slot did not reach the waiting claim")
	}
	releases[0]()
	releases[2]()
}

// TestClaimBusy: with every slot held, Claim gives up after IDWait with
// ErrBusy.
func TestClaimBusy(t *testing.T) {
	if testing.Short() {
		t.Skip("waits IDWait")
	}
	withLockPath(t)
	r, span := IDs{UID: 300000, GID: 300000, Count: 1}, uint32(1)
	_, release, err := r.Claim(context.Background(), span)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	start := time.Now()
	_, _, err = r.Claim(context.Background(), span)
	if !errors.Is(err, sandbox.ErrBusy) || time.Since(start) < IDWait {
		t.Fatalf("a held range: %v after %s, want ErrBusy after %s", err, time.Since(start), IDWait)
	}
}

// TestClaimAcrossProcesses: a slot another process holds is not given, and
// is free again once that process is SIGKILLed.
func TestClaimAcrossProcesses(t *testing.T) {
	r, span := IDs{UID: 400000, GID: 400000, Count: 1}, uint32(1)
	if p := os.Getenv("PSYCH_TEST_HOLD_ID"); p != "" {
		IDLockPath = p
		if _, _, err := r.Claim(context.Background(), span); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("held")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	withLockPath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestClaimAcrossProcesses$")
	cmd.Env = append(os.Environ(), "PSYCH_TEST_HOLD_ID="+IDLockPath)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "held\n" {
		t.Fatalf("the holder said %q", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, _, err := r.Claim(ctx, span); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a slot another process holds: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	base, release, err := r.Claim(context.Background(), span)
	if err != nil || base != r.UID {
		t.Fatalf("after the holder's death: %d, %v", base, err)
	}
	release()
}

func TestIDRangeCheck(t *testing.T) {
	if err := DefaultIDs().Check(); err != nil {
		t.Fatalf("the default range here: %v", err)
	}
	if err := (IDs{UID: 0, GID: 0, Count: 65535}).Check(); !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Fatalf("a range from 0: %v", err)
	}
	// root (0) is in /etc/passwd, and so is nobody (65534) on Debian.
	if err := (IDs{UID: 65530, GID: 65530, Count: 10}).Check(); !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Fatalf("a range over nobody: %v", err)
	}
	// The gids are checked apart from the uids: free uids, gids over
	// Debian's nogroup (65534).
	if err := (IDs{UID: DefaultIDFirst, GID: 65530, Count: 10}).Check(); !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "/etc/group") {
		t.Fatalf("gids over nogroup: %v", err)
	}
	dir := t.TempDir()
	sub := filepath.Join(dir, "subuid")
	os.WriteFile(sub, []byte("# comment\nalice:100000:65536\n"), 0o644)
	if err := overlap(sub, -1, 165535, 170000); err == nil {
		t.Fatal("alice's last subordinate id was not seen")
	}
	if err := overlap(sub, -1, 165536, 170000); err != nil {
		t.Fatalf("an id after alice's range: %v", err)
	}
}

func TestCovered(t *testing.T) {
	for _, c := range []struct {
		m      string
		lo, hi uint64
		want   bool
	}{
		{"0 0 4294967295", uint64(DefaultIDFirst), uint64(DefaultIDFirst) + uint64(DefaultIDCount), true},
		{"0 0 65536", uint64(DefaultIDFirst), uint64(DefaultIDFirst) + 1, false},
		{"0 0 65536\n100000000 100000000 100", 100000000, 100000100, true},
		{"0 0 65536\n100000000 100000000 100", 100000000, 100000101, false},
		{"100000000 5 50\n100000050 900 50", 100000000, 100000100, true},
		{"", 1, 2, false},
	} {
		if got := covered(c.m, c.lo, c.hi); got != c.want {
			t.Errorf("covered(%q, %d, %d) = %v", c.m, c.lo, c.hi, got)
		}
	}
	if err := DefaultIDs().Mapped(); err != nil {
		t.Fatalf("the default range in the initial user namespace: %v", err)
	}
}
