package testutil

import (
	"net"
	"os"
	"testing"
)

// PublicDir is a fresh directory under parent (the system's temporary
// directory where parent is ""), named prefix and a random suffix, with
// mode (0o755 or 0o711: every user may enter it, where t.TempDir's parent
// is 0700), removed with all it holds when the test ends.
func PublicDir(t testing.TB, parent, prefix string, mode os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// HostService is the port of a TCP service on the host's 127.0.0.1 that
// accepts each connection and closes it, until the test ends: a host
// service for a program to try to reach. It does nothing else with what
// it accepts.
func HostService(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// PyTry is Python that defines t(f): it calls f and gives "ok", or the
// class name of the OSError f raised (any other exception propagates). A
// program that tries what a run may or may not reach starts with it.
const PyTry = `def t(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return type(e).__name__
`
