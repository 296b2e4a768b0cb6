// Package netns verifies, through a netlink socket opened inside it, that a
// network namespace is empty: that a program run in it can reach nothing but
// itself.
//
// The sandbox init unshares a fresh network namespace, opens a NETLINK_ROUTE
// socket there and hands the fd to the host over SCM_RIGHTS. The host passes
// that fd to Verify. Everything goes through the fd: no thread calls setns,
// and a non-root host that owns the child's user namespace can run the check.
// Bringing lo up needs CAP_NET_ADMIN over the namespace both for the caller
// and for whoever opened the socket (the kernel checks the opener's
// credentials too), so the init must open it before dropping capabilities.
// The dumps and lookups need no privilege.
//
// Verify first brings lo up if it is down, then checks, in that order:
//
//   - Links: exactly one link, and it is the loopback device (name "lo",
//     ARPHRD_LOOPBACK, IFF_LOOPBACK).
//   - Addresses: every address is on lo and is either IPv4 inside
//     127.0.0.0/8 (prefix length 8 or longer) or IPv6 ::1/128.
//   - Routes: IPv4 and IPv6 routes are dumped across all tables. Every route
//     must be one that lo itself creates: table local, protocol kernel,
//     output interface lo, no gateway, via, multipath, encapsulation or
//     nexthop object, and either IPv4 of type local or broadcast with a
//     destination inside 127.0.0.0/8, or IPv6 of type local with destination
//     ::1/128. On a fresh namespace with lo up (kernel 6.18) these are
//     exactly: local 127.0.0.0/8, local 127.0.0.1, broadcast 127.255.255.255
//     and local ::1, all dev lo table local proto kernel. The kernel adds no
//     ff00::/8 multicast route on a loopback device, so none is accepted.
//   - Lookups: RTM_GETROUTE towards 192.0.2.1, 1.1.1.1, 2001:db8::1 and
//     2606:4700:4700::1111 must fail with ENETUNREACH or EHOSTUNREACH (for
//     IPv6 also EAFNOSUPPORT or EOPNOTSUPP, a kernel without IPv6 routing).
//     A lookup that returns a route, or fails any other way, fails the check.
//
// Anything else fails the check: Check.Denied is then false and Check.Reason
// names what was found. Verify returns an error only when the check itself
// could not run (not a netlink socket, I/O error, malformed reply, a dump that
// never settles, or no reply within two seconds); Denied is false then too.
//
// What Verify promises: at the moment of the check, the namespace behind the
// fd had no interface but lo, no address or route beyond loopback's, and no
// route to an outside address. What it refuses to promise: anything about a
// later moment (whoever holds CAP_NET_ADMIN in the namespace can still add
// links, which is why the sandbox drops capabilities before the program
// runs), anything about namespaces other than the fd's, and anything about
// channels that are not network interfaces (inherited fds, unix sockets on
// shared mounts). Netfilter rules, policy routing rules and neighbour entries
// are not inspected: without a link or route they reach nothing.
//
// AddDummy exists for tests that prove the check is real: with one extra link
// in the namespace, Verify must report Denied false. Kernels built without
// CONFIG_DUMMY (the 6.18 VM kernel is one) get an "ifb" link instead, which
// is just as standalone.
package netns
