//go:build !unix

package sandbox

// hostOpenFilesMax is the most open files a run can be given. No backend
// runs here; 1 << 20 is Linux's default fs.nr_open.
func hostOpenFilesMax() uint64 { return 1 << 20 }
