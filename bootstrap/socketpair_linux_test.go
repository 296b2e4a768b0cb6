package bootstrap_test

import "golang.org/x/sys/unix"

// streamPair is a blocking AF_UNIX stream pair, both ends close-on-exec.
func streamPair() ([2]int, error) {
	return unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
}
