package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// NewMarker is prefix and 16 random hex digits: a token to put in a
// process's argv or environment and find it again from the host.
func NewMarker(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// ProcessesWith lists the /proc/PID/cmdline paths of the host's processes
// whose command line contains m.
func ProcessesWith(m string) []string {
	var out []string
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), m) {
			out = append(out, p)
		}
	}
	return out
}

// KillProcessesWith sends SIGKILL to every host process whose command
// line contains all of subs (never to this process).
func KillProcessesWith(subs ...string) {
	if len(subs) == 0 {
		return
	}
	for _, p := range ProcessesWith(subs[0]) {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		all := true
		for _, s := range subs[1:] {
			all = all && strings.Contains(string(b), s)
		}
		var pid int
		if _, err := fmt.Sscanf(p, "/proc/%d/cmdline", &pid); err == nil && all && pid != os.Getpid() {
			if proc, err := os.FindProcess(pid); err == nil {
				proc.Kill() // SIGKILL
			}
		}
	}
}
