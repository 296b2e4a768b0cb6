package server

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerCred reads SO_PEERCRED: the uid and gid of the process that
// connected, as the kernel recorded them at connect.
func peerCred(c *net.UnixConn) (uid, gid uint32, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if serr != nil {
		return 0, 0, serr
	}
	return cred.Uid, cred.Gid, nil
}
