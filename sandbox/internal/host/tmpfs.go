package host

// TmpfsDirs are the run's writable tmpfs mounts, as the program sees them,
// whose cap is the backend's TmpBytes (sandbox.LimitTmpBytes).
var TmpfsDirs = []string{"/tmp", "/dev/shm"}

// TmpfsWatch holds a run's own tmpfs mounts open from before its program
// starts, so that the host can read how full they were once the run's
// processes, and with them its mount namespace, are gone. A nil watch
// watches nothing.
type TmpfsWatch struct{ fds []int }

// Full reports whether a watched tmpfs is at its cap: at most 1% of its
// blocks free. A page that faults past the cap through a shared mapping
// leaves the tmpfs in this state and the process with a SIGBUS.
func (w *TmpfsWatch) Full() bool {
	if w == nil {
		return false
	}
	for _, fd := range w.fds {
		if blocks, free, ok := tmpfsBlocks(fd); ok && blocks > 0 && free*100 <= blocks {
			return true
		}
	}
	return false
}

// Close releases the mounts. It may be called more than once.
func (w *TmpfsWatch) Close() {
	if w == nil {
		return
	}
	for _, fd := range w.fds {
		closeFD(fd)
	}
	w.fds = nil
}
