//go:build unix

package sandbox

import "syscall"

// hostOpenFilesMax is this process's own hard RLIMIT_NOFILE: the most open
// files a run it starts can be given. Raising a hard limit takes
// CAP_SYS_RESOURCE in the initial user namespace, which the run's init no
// longer has when it sets the run's limits; a container engine's hard limit
// may be lower still, and then the engine refuses to start the run.
func hostOpenFilesMax() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 1024
	}
	return uint64(r.Max)
}
