package egress

import "net/netip"

// Address classes a name entry does not admit, as the error message words
// them.
const (
	classUnspecified   = "an unspecified address"
	classThisNetwork   = "a this-network address"
	classLoopback      = "a loopback address"
	classPrivate       = "a private address"
	classShared        = "a shared (CGNAT) address"
	classLinkLocal     = "a link-local address"
	classSiteLocal     = "a site-local address"
	classMulticast     = "a multicast address"
	classBroadcast     = "a broadcast address"
	classDocumentation = "a documentation address"
	classBenchmarking  = "a benchmarking address"
	classTeredo        = "a Teredo address"
	classDiscard       = "a discard-only address"
	classReserved      = "a reserved address"
	classInvalid       = "an invalid address"
)

type class struct {
	prefix netip.Prefix
	name   string
}

// classes4 is checked in order, so a narrower prefix comes before a wider
// one that holds it.
var classes4 = []class{
	{netip.MustParsePrefix("0.0.0.0/32"), classUnspecified},
	{netip.MustParsePrefix("0.0.0.0/8"), classThisNetwork},
	{netip.MustParsePrefix("10.0.0.0/8"), classPrivate},
	{netip.MustParsePrefix("100.64.0.0/10"), classShared},
	{netip.MustParsePrefix("127.0.0.0/8"), classLoopback},
	{netip.MustParsePrefix("169.254.0.0/16"), classLinkLocal},
	{netip.MustParsePrefix("172.16.0.0/12"), classPrivate},
	{netip.MustParsePrefix("192.0.0.0/24"), classReserved},
	{netip.MustParsePrefix("192.0.2.0/24"), classDocumentation},
	{netip.MustParsePrefix("192.168.0.0/16"), classPrivate},
	{netip.MustParsePrefix("198.18.0.0/15"), classBenchmarking},
	{netip.MustParsePrefix("198.51.100.0/24"), classDocumentation},
	{netip.MustParsePrefix("203.0.113.0/24"), classDocumentation},
	{netip.MustParsePrefix("224.0.0.0/4"), classMulticast},
	{netip.MustParsePrefix("255.255.255.255/32"), classBroadcast},
	{netip.MustParsePrefix("240.0.0.0/4"), classReserved},
}

// classes6 is checked in order, after the forms that embed an IPv4 address.
// What none of them names is public only inside 2000::/3, the global unicast
// space.
var classes6 = []class{
	{netip.MustParsePrefix("::/128"), classUnspecified},
	{netip.MustParsePrefix("::1/128"), classLoopback},
	{netip.MustParsePrefix("64:ff9b:1::/48"), classPrivate},
	{netip.MustParsePrefix("100::/64"), classDiscard},
	{netip.MustParsePrefix("2001::/32"), classTeredo},
	{netip.MustParsePrefix("2001:2::/48"), classBenchmarking},
	{netip.MustParsePrefix("2001:10::/28"), classReserved},
	{netip.MustParsePrefix("2001:20::/28"), classReserved},
	{netip.MustParsePrefix("2001:db8::/32"), classDocumentation},
	{netip.MustParsePrefix("3fff::/20"), classDocumentation},
	{netip.MustParsePrefix("fc00::/7"), classPrivate},
	{netip.MustParsePrefix("fe80::/10"), classLinkLocal},
	{netip.MustParsePrefix("fec0::/10"), classSiteLocal},
	{netip.MustParsePrefix("ff00::/8"), classMulticast},
}

var (
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
)

// classify names the class of a, or returns "" when a is a public unicast
// address, the only kind a name entry admits. A zone is ignored, and an
// IPv6 form that embeds an IPv4 address (IPv4-mapped, NAT64 64:ff9b::/96,
// 6to4 2002::/16) is judged by the IPv4 address it reaches.
func classify(a netip.Addr) string {
	if !a.IsValid() {
		return classInvalid
	}
	a = a.WithZone("").Unmap()
	if a.Is4() {
		for _, c := range classes4 {
			if c.prefix.Contains(a) {
				return c.name
			}
		}
		return ""
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return classify(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(a):
		return classify(netip.AddrFrom4([4]byte(b[2:6])))
	}
	for _, c := range classes6 {
		if c.prefix.Contains(a) {
			return c.name
		}
	}
	if !globalUnicast6.Contains(a) {
		return classReserved
	}
	return ""
}
