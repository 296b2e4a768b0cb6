//go:build linux

package attest

import (
	"os"
	"testing"
)

// BenchmarkRootMount reads the root mount from a subprocess run's own
// mount table (testdata/mountinfo-subprocess, 24 lines), as AttestProcesses
// does once per run.
func BenchmarkRootMount(b *testing.B) {
	data, err := os.ReadFile("testdata/mountinfo-subprocess")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if parseRootMount(data) == "" {
			b.Fatal("no root mount")
		}
	}
}
