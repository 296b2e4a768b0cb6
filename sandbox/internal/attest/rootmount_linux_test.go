package attest

import (
	"os"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
)

// TestRootMountID: statx's mount id of "/" is the id mountinfo gives this
// process's root, and RootMount calls this process's own root the host's.
func TestRootMountID(t *testing.T) {
	id, ok := rootMountID()
	if !ok {
		if testutil.InCI() {
			t.Fatal("CI's kernel (6.18) gives statx's mount id, but none came back")
		}
		t.Skip("statx gives no mount id here (Linux 5.8+)")
	}
	fromTable, fstype, _ := strings.Cut(readRootMount("/proc/self/mountinfo"), ":")
	if id != fromTable {
		t.Fatalf("statx mount id %s, mountinfo's root %s", id, fromTable)
	}
	if got, want := RootMount(os.Getpid()), "host:"+fstype; got != want {
		t.Fatalf("RootMount(self) = %q, want %q", got, want)
	}
}
