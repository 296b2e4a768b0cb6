package netns

import "time"

// Timeout bounds one call of Verify or AddDummy: no reply in time is
// ErrTimeout, never a hang.
const Timeout = 2 * time.Second

// Check is what Verify saw, shaped for an attestation. Each list holds at
// most 64 entries: the rest are checked but not listed, and Reason names up
// to eight offenders per kind and counts the others.
type Check struct {
	// Links are the namespace's network interfaces.
	Links []Link `json:"links"`
	// Addrs are its addresses, as "127.0.0.1/8 dev lo".
	Addrs []string `json:"addrs"`
	// Routes are its IPv4 and IPv6 routes in all tables, as
	// "local 127.0.0.0/8 dev lo table local proto kernel src 127.0.0.1".
	Routes []string `json:"routes"`
	// Lookups are the route lookups towards outside addresses.
	Lookups []Lookup `json:"lookups"`
	// Denied is true only when every check passed.
	Denied bool `json:"denied"`
	// Reason says what failed when Denied is false.
	Reason string `json:"reason,omitempty"`
}

// Link is one network interface.
type Link struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	// Up reports IFF_UP after Verify brought lo up.
	Up bool `json:"up"`
}

// Lookup is the result of one RTM_GETROUTE towards an outside address.
type Lookup struct {
	Dst string `json:"dst"`
	// Reachable is true when the kernel returned a route (or failed in a way
	// that does not prove there is none).
	Reachable bool `json:"reachable"`
	// Result is the kernel's answer: an error such as "network is
	// unreachable", or the route it found.
	Result string `json:"result"`
}

// Verify checks, through the NETLINK_ROUTE socket fd, that the network
// namespace the socket was opened in is empty; the package documentation
// lists exactly what is checked. It brings lo up first if it is down.
//
// Verify does not close fd and does not change its socket options; it reads
// with MSG_DONTWAIT under a deadline of Timeout. Replies are matched by
// sequence number and sender (the kernel, port 0), so stale replies and
// notifications already queued on the socket, and messages forged by other
// sockets, are skipped. Nothing else may read fd while Verify runs.
//
// A namespace that is not empty is reported as Check{Denied: false, Reason:
// ...} with a nil error. An error means the check could not run; the
// returned Check is then never Denied.
func Verify(fd int) (Check, error) {
	return verify(fd, Timeout)
}

// AddDummy creates a link with no peer and no carrier, named name, in the
// namespace of the NETLINK_ROUTE socket fd. It asks for kind "dummy"; when
// the kernel has no dummy driver (EOPNOTSUPP, CONFIG_DUMMY unset) it creates
// an "ifb" link instead, which is equally standalone. It exists for tests:
// with such a link present, Verify must report Denied false. It refuses
// names the kernel would refuse (ErrInvalidName) and an existing name
// (EEXIST). It does not close fd.
func AddDummy(fd int, name string) error {
	return addDummy(fd, name, Timeout)
}
