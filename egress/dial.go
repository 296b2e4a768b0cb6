package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// dial is the Transport's only way out. It checks the host against the
// allowlist again, resolves it once, refuses unless every address is
// admitted, then connects to those very addresses. The dialer's Control
// hook checks the address the socket is about to connect to, so nothing
// unchecked is ever connected.
func (e *Egress) dial(ctx context.Context, network, address string) (net.Conn, error) {
	host, p, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("dial %.260s: %v: %w", address, err, ErrDenied)
	}
	port, err := parsePort(p)
	if err != nil {
		return nil, fmt.Errorf("dial %.260s: %v: %w", address, err, ErrDenied)
	}
	t := parseTarget(host, port)
	if !e.allow.admitsHost(t) {
		return nil, fmt.Errorf("dial %.260s: host is not on the allowlist: %w", address, ErrDenied)
	}
	addrs, err := e.resolve(ctx, network, t)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", address, err)
	}
	for _, a := range addrs {
		if why := e.allow.admitAddr(t, a); why != "" {
			return nil, fmt.Errorf("dial %s: %s: %w", address, why, ErrDenied)
		}
	}
	d := e.dialer(t)
	var first error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(a, port).String())
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// resolve returns the addresses to connect to: the literal itself, or what
// the Resolver returns for the name, IPv4-mapped forms unmapped.
func (e *Egress) resolve(ctx context.Context, network string, t target) ([]netip.Addr, error) {
	if t.addr.IsValid() {
		return []netip.Addr{t.addr}, nil
	}
	ipnet := "ip"
	switch network {
	case "tcp4":
		ipnet = "ip4"
	case "tcp6":
		ipnet = "ip6"
	}
	addrs, err := e.resolver.LookupNetIP(ctx, ipnet, t.host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", t.host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: %w", t.host, &net.DNSError{Err: "no address", Name: t.host, IsNotFound: true})
	}
	out := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		out[i] = a.Unmap()
	}
	return out, nil
}

// dialer connects for t, through its Control hook.
func (e *Egress) dialer(t target) *net.Dialer {
	return &net.Dialer{Timeout: dialTimeout, Control: e.control(t)}
}

// control returns the dialer's Control hook for t: it refuses a connect to
// any address t may not reach, whatever asked for it.
func (e *Egress) control(t target) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("connect to %.260s: not an address and port: %w", address, ErrDenied)
		}
		if ap.Port() != t.port {
			return fmt.Errorf("connect to %s: port %d is not the checked port %d: %w", address, ap.Port(), t.port, ErrDenied)
		}
		if why := e.allow.admitAddr(t, ap.Addr()); why != "" {
			return fmt.Errorf("connect to %s: %s: %w", address, why, ErrDenied)
		}
		return nil
	}
}
