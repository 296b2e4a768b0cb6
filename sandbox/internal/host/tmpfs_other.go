//go:build !linux

package host

// WatchTmpfs watches nothing: no backend runs here.
func WatchTmpfs(int) *TmpfsWatch { return nil }

func tmpfsBlocks(int) (blocks, free uint64, ok bool) { return 0, 0, false }

func closeFD(int) {}
