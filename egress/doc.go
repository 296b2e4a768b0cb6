// Package egress is the seam through which a tool's handler reaches the
// network: a Client, the one method of *http.Client, whose default refuses
// everything. The sandboxed program never gets one; it fetches through a
// binding whose tool uses this seam (DESIGN §1).
//
// Two Clients are offered. DenyAll refuses every request without resolving
// or dialing. An *Egress, made by New from a Config, sends a request only
// when both hold:
//
//   - The host matches an allowlist entry. A name matches a name entry
//     exactly or, for "*.example.com", as a subdomain (never the domain
//     itself), case-insensitively, a trailing dot ignored. An address
//     literal matches only an address entry (an IP or CIDR prefix) that
//     covers it. An entry with a port matches only that port; the default
//     port is 80 for http and 443 for https. Other schemes are refused.
//   - Every address the host resolves to is admitted. An address entry
//     admits what it covers, at its port. A name entry admits only public
//     unicast addresses: never loopback, private (RFC 1918, fc00::/7),
//     link-local, site-local, unspecified, this-network (0.0.0.0/8),
//     shared (CGNAT 100.64.0.0/10), multicast, broadcast, documentation,
//     benchmarking, Teredo, discard-only or otherwise reserved addresses,
//     nor an IPv6 form that embeds one (IPv4-mapped, NAT64 64:ff9b::/96,
//     6to4 2002::/16). So "localhost:8080" on the list does not admit
//     localhost, which resolves to 127.0.0.1; "127.0.0.1:8080" does. To
//     reach an internal name, list the name and the prefix it resolves in.
//
// The host is checked before anything is sent, on each redirect target
// (at most MaxRedirects redirects), and again when the Transport dials.
// The dial resolves the name once, refuses unless every address is
// admitted (a name that resolves to one public and one private address is
// refused), and connects only to those addresses, in the Resolver's order;
// a net.Dialer Control hook checks each address as the socket connects to
// it. No second resolution happens between check and connect, so DNS
// rebinding cannot slip an address past the check. Idle connections are
// reused only for the host and port they were dialed for.
//
// What Egress refuses: a proxy from the environment (the Transport's Proxy
// is nil), a redirect off the allowlist, a scheme other than http and https,
// and a name written in non-ASCII (write an IDN in its xn-- form). A name is
// resolved as the URL wrote it, so a resolver's search domains may expand it;
// the addresses it yields are checked all the same. An address with an IPv6
// zone is judged without its zone. Refusals wrap ErrDenied and name the host
// or address and the reason, never the URL's path, query or userinfo.
//
// What it does not promise: anything about what an admitted server sends
// back, or about hosts reached through an admitted one (a listed proxy or
// relay reaches what it reaches).
package egress
