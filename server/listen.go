package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Listener is one API listener and how its peers are told apart: a Unix
// socket's by their credentials (SO_PEERCRED), a TCP or TLS one's by the
// bearer token (Config.Token; Serve refuses such a listener without one).
type Listener struct {
	net.Listener
	// Kind is "unix", "tcp" or "tls".
	Kind string
	// Path is a Unix socket's path.
	Path string
	lock *os.File
	sem  chan struct{}
	once sync.Once
}

// ListenOptions configure Listen.
type ListenOptions struct {
	// TLSCert and TLSKey are PEM files, required by a tls:// address.
	TLSCert, TLSKey string
	// Group owns a Unix socket, which is then 0660; where the group does
	// not exist the socket is 0600 (the server's own uid and root only,
	// besides Config.AllowUIDs/AllowGIDs whose access the mode must then
	// allow by other means). Empty is "psych".
	Group string
	// MaxConns bounds the connections open at once; past it Accept waits
	// (the kernel's backlog holds the rest). Zero is 256.
	MaxConns int
}

// claimsDir is root's 0700 directory of outside-id claims; no socket lives
// in it.
const claimsDir = "/run/psych"

// ErrSocketInUse: another server is listening on the socket.
var ErrSocketInUse = errors.New("socket in use by a live server")

// DefaultSocket is where a server listens without --listen: /run/psych.sock
// for root, $XDG_RUNTIME_DIR/psych.sock otherwise (/tmp/psych-UID.sock
// without it). Never inside /run/psych, root's directory of outside-id
// claims.
func DefaultSocket() string {
	if os.Geteuid() == 0 {
		return "/run/psych.sock"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "psych.sock")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("psych-%d.sock", os.Geteuid()))
}

// ParseAddress splits unix:///path, tcp://host:port or tls://host:port
// into its kind and address.
func ParseAddress(addr string) (kind, where string, err error) {
	u, err := url.Parse(addr)
	if err != nil {
		return "", "", fmt.Errorf("address %q: %w", addr, err)
	}
	switch u.Scheme {
	case "unix":
		if u.Host != "" || !filepath.IsAbs(u.Path) || u.Path != filepath.Clean(u.Path) {
			return "", "", fmt.Errorf("address %q: want unix:///absolute/clean/path", addr)
		}
		return "unix", u.Path, nil
	case "tcp", "tls":
		if u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return "", "", fmt.Errorf("address %q: want %s://HOST:PORT", addr, u.Scheme)
		}
		if _, _, err := net.SplitHostPort(u.Host); err != nil {
			return "", "", fmt.Errorf("address %q: %w", addr, err)
		}
		return u.Scheme, u.Host, nil
	}
	return "", "", fmt.Errorf("address %q: want unix://, tcp:// or tls://", addr)
}

// Listen opens addr (see ParseAddress). A Unix socket is made under a lock
// (PATH.lock, held while the listener lives): a socket a killed server
// left is replaced, a live server's is not (ErrSocketInUse). The socket is
// bound in a private directory, given its group and mode, and only then
// renamed into place, so it is never reachable with looser permissions.
func Listen(addr string, opt ListenOptions) (*Listener, error) {
	kind, where, err := ParseAddress(addr)
	if err != nil {
		return nil, err
	}
	max := opt.MaxConns
	if max <= 0 {
		max = 256
	}
	l := &Listener{Kind: kind, sem: make(chan struct{}, max)}
	switch kind {
	case "unix":
		l.Path = where
		if err := l.listenUnix(opt.Group); err != nil {
			return nil, err
		}
	case "tcp", "tls":
		ln, err := net.Listen("tcp", where)
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		if kind == "tls" {
			if opt.TLSCert == "" || opt.TLSKey == "" {
				ln.Close()
				return nil, fmt.Errorf("listen %s: a tls:// listener needs a certificate and a key", addr)
			}
			cert, err := tls.LoadX509KeyPair(opt.TLSCert, opt.TLSKey)
			if err != nil {
				ln.Close()
				return nil, fmt.Errorf("listen %s: %w", addr, err)
			}
			ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		}
		l.Listener = ln
	}
	return l, nil
}

func (l *Listener) listenUnix(group string) (retErr error) {
	dir := filepath.Dir(l.Path)
	if dir == claimsDir || strings.HasPrefix(dir, claimsDir+"/") {
		return fmt.Errorf("listen unix %s: not inside %s, root's directory of outside-id claims", l.Path, claimsDir)
	}
	lock, err := os.OpenFile(l.Path+".lock", os.O_RDWR|os.O_CREATE|oNoFollow, 0o600)
	if err != nil {
		return fmt.Errorf("listen unix %s: open its lock: %w", l.Path, err)
	}
	defer func() {
		if retErr != nil {
			lock.Close()
		}
	}()
	if err := flock(lock); err != nil {
		return fmt.Errorf("listen unix %s: %w: %v", l.Path, ErrSocketInUse, err)
	}
	// Under the lock: a socket that answers belongs to a live server that
	// took no lock; one that does not was left by a killed server.
	if fi, err := os.Lstat(l.Path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("listen unix %s: the path exists and is not a socket", l.Path)
		}
		if c, err := net.Dial("unix", l.Path); err == nil {
			c.Close()
			return fmt.Errorf("listen unix %s: %w", l.Path, ErrSocketInUse)
		}
		if err := os.Remove(l.Path); err != nil {
			return fmt.Errorf("listen unix %s: remove the stale socket: %w", l.Path, err)
		}
	}
	tmp, err := os.MkdirTemp(dir, ".psych-sock-")
	if err != nil {
		return fmt.Errorf("listen unix %s: %w", l.Path, err)
	}
	defer os.RemoveAll(tmp)
	bound := filepath.Join(tmp, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: bound, Net: "unix"})
	if err != nil {
		return fmt.Errorf("listen unix %s: %w", l.Path, err)
	}
	ln.SetUnlinkOnClose(false) // Close removes l.Path itself
	defer func() {
		if retErr != nil {
			ln.Close()
		}
	}()
	mode := os.FileMode(0o600)
	if gid, ok := lookupGroup(group); ok {
		if err := os.Lchown(bound, -1, gid); err != nil {
			return fmt.Errorf("listen unix %s: give it group %q: %w", l.Path, group, err)
		}
		mode = 0o660
	}
	if err := os.Chmod(bound, mode); err != nil {
		return fmt.Errorf("listen unix %s: %w", l.Path, err)
	}
	if err := os.Rename(bound, l.Path); err != nil {
		return fmt.Errorf("listen unix %s: %w", l.Path, err)
	}
	l.Listener, l.lock = ln, lock
	return nil
}

// lookupGroup returns the gid of group ("psych" when empty), if it exists.
func lookupGroup(group string) (int, bool) {
	if group == "" {
		group = "psych"
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return 0, false
	}
	gid, err := strconv.Atoi(g.Gid)
	return gid, err == nil
}

// Accept waits for a connection slot (MaxConns), then for a connection.
func (l *Listener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &slotConn{Conn: c, release: func() { <-l.sem }}, nil
}

// Close stops listening, removes a Unix socket and releases its lock; calling it
// again is a no-op.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		err = l.Listener.Close()
		if l.Kind == "unix" {
			os.Remove(l.Path)
			l.lock.Close() // the lock file stays: removing it would let two servers lock two files

		}
	})
	return err
}

// slotConn gives its listener's slot back once, when closed.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn returns the connection beneath (for its credentials).
func (c *slotConn) NetConn() net.Conn { return c.Conn }
