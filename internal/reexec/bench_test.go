//go:build linux && cgo

package reexec

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/testutil"
)

// BenchmarkStart measures the init layer by layer, each as a ratio to a
// bare interpreter start measured in the same run.
func BenchmarkStart(b *testing.B) {
	python := testutil.Python()
	args := []string{python, "-I", "-S", "-c", "pass"}
	b.Run("bare-python", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := exec.Command(python, args[1:]...).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	uid, gid := runIDs()
	base := func() *Plan {
		return &Plan{OuterUID: uid, OuterGID: gid, InnerUID: uid, InnerGID: gid, Exe: python, Args: args}
	}
	layers := []struct {
		name string
		ns   uintptr
	}{
		{"init", 0},
		{"userns", unix.CLONE_NEWUSER},
		{"userns+pid", unix.CLONE_NEWUSER | unix.CLONE_NEWPID},
		{"userns+pid+mnt+ipc+uts+cgroup", unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP},
		{"all+net", unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWNET},
	}
	for _, l := range layers {
		b.Run(l.name, func(b *testing.B) {
			null, _ := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			defer null.Close()
			for i := 0; i < b.N; i++ {
				p := base()
				p.Namespaces = l.ns
				o := &Options{Plan: p, Stdout: null, Stderr: null, Wire: null, CgroupFD: -1}
				if l.ns != 0 {
					p.InnerUID, p.InnerGID = 1000, 1000
				}
				proc, err := Start(o)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := proc.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
