//go:build !unix

package resources

import "os"

// fileOwner is unknown where files have no uid.
func fileOwner(os.FileInfo) (int, bool) { return -1, false }
