package netns

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// maxListed bounds each list in a Check and each list of offenders in its
// Reason; a namespace that needs more is not empty anyway.
const maxListed = 64

// outside are the destinations whose route lookups must fail.
var outside = []netip.Addr{
	netip.MustParseAddr("192.0.2.1"), // TEST-NET-1
	netip.MustParseAddr("1.1.1.1"),
	netip.MustParseAddr("2001:db8::1"), // documentation prefix
	netip.MustParseAddr("2606:4700:4700::1111"),
}

var (
	loopback4 = netip.MustParsePrefix("127.0.0.0/8")
	loopback6 = netip.IPv6Loopback()
)

// linkInfo is one parsed RTM_NEWLINK.
type linkInfo struct {
	index int
	name  string
	typ   uint16 // ARPHRD_*
	flags uint32 // IFF_*
}

func (l linkInfo) isLoopback() bool {
	return l.name == "lo" && l.typ == unix.ARPHRD_LOOPBACK && l.flags&unix.IFF_LOOPBACK != 0
}

// addrInfo is one parsed RTM_NEWADDR.
type addrInfo struct {
	family uint8
	index  int
	prefix netip.Prefix // IFA_ADDRESS
	local  netip.Addr   // IFA_LOCAL, if present
}

// routeInfo is one parsed RTM_NEWROUTE.
type routeInfo struct {
	family   uint8
	dst      netip.Prefix
	table    uint32
	protocol uint8
	typ      uint8
	oif      int        // 0 when absent
	gateway  bool       // RTA_GATEWAY or RTA_VIA
	via      netip.Addr // RTA_GATEWAY of the route's family, if any
	multi    bool       // RTA_MULTIPATH
	encap    bool       // RTA_ENCAP
	nhid     bool       // RTA_NH_ID
	src      netip.Addr
}

// report collects what failed.
type report struct{ reasons []string }

func (r *report) fail(what string, items []string) {
	if len(items) == 0 {
		return
	}
	if len(items) > 8 {
		items = append(items[:8:8], fmt.Sprintf("and %d more", len(items)-8))
	}
	r.reasons = append(r.reasons, what+": "+strings.Join(items, ", "))
}

// verifier is one namespace's check in progress: each phase adds to the
// Check and to the report of what failed.
type verifier struct {
	c     *conn
	chk   Check
	r     report
	names map[int]string // link index to name, for the lists
	lo    int            // the loopback link's index, 0 when there is none
}

func verify(fd int, timeout time.Duration) (Check, error) {
	c, err := newConn(fd, time.Now().Add(timeout))
	if err != nil {
		return Check{}, fmt.Errorf("verify network namespace: %w", err)
	}
	v := &verifier{c: c}
	for _, phase := range []func() error{v.links, v.addrs, v.routes, v.lookups} {
		if err := phase(); err != nil {
			return Check{}, fmt.Errorf("verify network namespace: %w", err)
		}
	}
	v.chk.Denied = len(v.r.reasons) == 0
	v.chk.Reason = strings.Join(v.r.reasons, "; ")
	return v.chk, nil
}

// links checks the links, bringing lo up first if needed: lo only.
func (v *verifier) links() error {
	links, more, err := v.c.links()
	if err != nil {
		return fmt.Errorf("dump links: %w", err)
	}
	if lo, ok := findLoopback(links); ok && lo.flags&unix.IFF_UP == 0 {
		if err := v.c.setUp(lo.index); err != nil {
			return fmt.Errorf("set lo up: %w", err)
		}
		if links, more, err = v.c.links(); err != nil {
			return fmt.Errorf("dump links: %w", err)
		}
	}
	v.names = make(map[int]string, len(links))
	var extra []string
	for _, l := range links {
		v.names[l.index] = l.name
		if l.isLoopback() && v.lo == 0 {
			v.lo = l.index
		} else {
			extra = append(extra, fmt.Sprintf("%s (index %d)", l.name, l.index))
		}
		if len(v.chk.Links) < maxListed {
			v.chk.Links = append(v.chk.Links, Link{Index: l.index, Name: l.name, Up: l.flags&unix.IFF_UP != 0})
		}
	}
	if v.lo == 0 {
		v.r.reasons = append(v.r.reasons, "no loopback link")
	}
	if more {
		extra = append(extra, fmt.Sprintf("over %d links", maxDumpMsgs))
	}
	v.r.fail("links other than lo", extra)
	return nil
}

// addrs checks the addresses: loopback ones on lo only.
func (v *verifier) addrs() error {
	addrs, more, err := v.c.addrs()
	if err != nil {
		return fmt.Errorf("dump addresses: %w", err)
	}
	var bad []string
	for _, a := range addrs {
		s := a.String(v.names)
		if len(v.chk.Addrs) < maxListed {
			v.chk.Addrs = append(v.chk.Addrs, s)
		}
		if !a.loopbackOnly(v.lo) {
			bad = append(bad, s)
		}
	}
	if more {
		bad = append(bad, fmt.Sprintf("over %d addresses", maxDumpMsgs))
	}
	v.r.fail("addresses beyond loopback", bad)
	return nil
}

// routes checks the routes of all tables, both families: loopback only.
func (v *verifier) routes() error {
	var bad []string
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		routes, more, err := v.c.routes(family)
		if err != nil {
			return fmt.Errorf("dump %s routes: %w", familyName(family), err)
		}
		for _, rt := range routes {
			s := rt.String(v.names)
			if len(v.chk.Routes) < maxListed {
				v.chk.Routes = append(v.chk.Routes, s)
			}
			if !rt.loopbackOnly(v.lo) {
				bad = append(bad, s)
			}
		}
		if more {
			bad = append(bad, fmt.Sprintf("over %d %s routes", maxDumpMsgs, familyName(family)))
		}
	}
	v.r.fail("routes beyond loopback", bad)
	return nil
}

// lookups looks up a route towards each outside address: none may be
// reachable.
func (v *verifier) lookups() error {
	var reached []string
	for _, dst := range outside {
		l, err := v.c.lookup(dst, v.names)
		if err != nil {
			return fmt.Errorf("look up route to %s: %w", dst, err)
		}
		v.chk.Lookups = append(v.chk.Lookups, l)
		if l.Reachable {
			reached = append(reached, l.Dst+": "+l.Result)
		}
	}
	v.r.fail("outside addresses not unreachable", reached)
	return nil
}

func findLoopback(links []linkInfo) (linkInfo, bool) {
	for _, l := range links {
		if l.isLoopback() {
			return l, true
		}
	}
	return linkInfo{}, false
}

// loopbackOnly is the address rule: on lo, and IPv4 inside 127.0.0.0/8 or
// IPv6 ::1/128.
func (a addrInfo) loopbackOnly(lo int) bool {
	if lo == 0 || a.index != lo {
		return false
	}
	switch a.family {
	case unix.AF_INET:
		return a.prefix.Bits() >= loopback4.Bits() && loopback4.Contains(a.prefix.Addr()) &&
			(!a.local.IsValid() || loopback4.Contains(a.local))
	case unix.AF_INET6:
		return a.prefix.Bits() == 128 && a.prefix.Addr() == loopback6 &&
			(!a.local.IsValid() || a.local == loopback6)
	}
	return false
}

// loopbackOnly is the route rule: a route that lo itself creates. Table
// local, protocol kernel, output interface lo, no next hop of any other
// kind, and IPv4 local/broadcast inside 127.0.0.0/8 or IPv6 local ::1/128.
func (rt routeInfo) loopbackOnly(lo int) bool {
	if lo == 0 || rt.oif != lo || rt.table != unix.RT_TABLE_LOCAL || rt.protocol != unix.RTPROT_KERNEL ||
		rt.gateway || rt.multi || rt.encap || rt.nhid || !rt.dst.IsValid() {
		return false
	}
	switch rt.family {
	case unix.AF_INET:
		return (rt.typ == unix.RTN_LOCAL || rt.typ == unix.RTN_BROADCAST) &&
			rt.dst.Bits() >= loopback4.Bits() && loopback4.Contains(rt.dst.Addr())
	case unix.AF_INET6:
		return rt.typ == unix.RTN_LOCAL && rt.dst.Bits() == 128 && rt.dst.Addr() == loopback6
	}
	return false
}

// links dumps every link.
func (c *conn) links() ([]linkInfo, bool, error) {
	req := make([]byte, unix.SizeofIfInfomsg) // ifi_family AF_UNSPEC
	msgs, more, err := c.dump(unix.RTM_GETLINK, req, unix.RTM_NEWLINK)
	if err != nil {
		return nil, false, err
	}
	links := make([]linkInfo, 0, len(msgs))
	for _, m := range msgs {
		l, err := parseLink(m.body)
		if err != nil {
			return nil, false, err
		}
		links = append(links, l)
	}
	return links, more, nil
}

// setUp sets IFF_UP on the link with that index.
func (c *conn) setUp(index int) error {
	req := make([]byte, unix.SizeofIfInfomsg)
	nl.PutUint32(req[4:8], uint32(index))
	nl.PutUint32(req[8:12], unix.IFF_UP)  // ifi_flags
	nl.PutUint32(req[12:16], unix.IFF_UP) // ifi_change
	_, err := c.do(unix.RTM_NEWLINK, 0, req, 0, true)
	return err
}

// addrs dumps every address of every family.
func (c *conn) addrs() ([]addrInfo, bool, error) {
	req := make([]byte, unix.SizeofIfAddrmsg)
	msgs, more, err := c.dump(unix.RTM_GETADDR, req, unix.RTM_NEWADDR)
	if err != nil {
		return nil, false, err
	}
	addrs := make([]addrInfo, 0, len(msgs))
	for _, m := range msgs {
		a, err := parseAddr(m.body)
		if err != nil {
			return nil, false, err
		}
		addrs = append(addrs, a)
	}
	return addrs, more, nil
}

// routes dumps the routes of one family in all tables. A kernel without
// that family answers with a dump of every family; each route keeps its own.
func (c *conn) routes(family uint8) ([]routeInfo, bool, error) {
	req := make([]byte, unix.SizeofRtMsg)
	req[0] = family // rtm_table 0: all tables
	msgs, more, err := c.dump(unix.RTM_GETROUTE, req, unix.RTM_NEWROUTE)
	if err != nil {
		return nil, false, err
	}
	routes := make([]routeInfo, 0, len(msgs))
	for _, m := range msgs {
		rt, err := parseRoute(m.body)
		if err != nil {
			return nil, false, err
		}
		if rt.family != family {
			continue
		}
		routes = append(routes, rt)
	}
	return routes, more, nil
}

// lookup asks the kernel for its route to dst. Only ENETUNREACH and
// EHOSTUNREACH (for IPv6 also EAFNOSUPPORT and EOPNOTSUPP: no IPv6 routing
// at all) count as unreachable; a route, or any other refusal, does not.
func (c *conn) lookup(dst netip.Addr, names map[int]string) (Lookup, error) {
	family := uint8(unix.AF_INET)
	if dst.Is6() {
		family = unix.AF_INET6
	}
	req := make([]byte, unix.SizeofRtMsg)
	req[0] = family
	req[1] = uint8(dst.BitLen()) // rtm_dst_len
	req = appendAttr(req, unix.RTA_DST, dst.AsSlice())
	l := Lookup{Dst: dst.String()}
	msgs, err := c.do(unix.RTM_GETROUTE, 0, req, unix.RTM_NEWROUTE, true)
	var rerr *replyError
	switch {
	case errors.As(err, &rerr):
		l.Result = rerr.Error()
		switch rerr.errno {
		case unix.ENETUNREACH, unix.EHOSTUNREACH:
		case unix.EAFNOSUPPORT, unix.EOPNOTSUPP:
			l.Reachable = family != unix.AF_INET6
		default:
			l.Reachable = true
		}
		return l, nil
	case err != nil:
		return Lookup{}, err
	case len(msgs) == 0:
		return Lookup{}, fmt.Errorf("%w: route lookup acknowledged without a route", ErrMalformed)
	}
	rt, err := parseRoute(msgs[0].body)
	if err != nil {
		return Lookup{}, err
	}
	l.Reachable = true
	l.Result = rt.String(names)
	return l, nil
}

func parseLink(b []byte) (linkInfo, error) {
	if len(b) < unix.SizeofIfInfomsg {
		return linkInfo{}, fmt.Errorf("%w: %d-byte link message", ErrMalformed, len(b))
	}
	l := linkInfo{
		typ:   nl.Uint16(b[2:4]),
		index: int(int32(nl.Uint32(b[4:8]))),
		flags: nl.Uint32(b[8:12]),
	}
	attrs, err := parseAttrs(b[unix.SizeofIfInfomsg:])
	if err != nil {
		return linkInfo{}, err
	}
	for _, a := range attrs {
		if a.typ == unix.IFLA_IFNAME {
			l.name = cString(a.data)
		}
	}
	return l, nil
}

func parseAddr(b []byte) (addrInfo, error) {
	if len(b) < unix.SizeofIfAddrmsg {
		return addrInfo{}, fmt.Errorf("%w: %d-byte address message", ErrMalformed, len(b))
	}
	a := addrInfo{family: b[0], index: int(nl.Uint32(b[4:8]))}
	bits := int(b[1])
	attrs, err := parseAttrs(b[unix.SizeofIfAddrmsg:])
	if err != nil {
		return addrInfo{}, err
	}
	var addr netip.Addr
	for _, at := range attrs {
		switch at.typ {
		case unix.IFA_ADDRESS:
			if addr, err = parseIP(a.family, at.data); err != nil {
				return addrInfo{}, err
			}
		case unix.IFA_LOCAL:
			if a.local, err = parseIP(a.family, at.data); err != nil {
				return addrInfo{}, err
			}
		}
	}
	if !addr.IsValid() {
		addr = a.local
	}
	if addr.IsValid() {
		if bits > addr.BitLen() {
			return addrInfo{}, fmt.Errorf("%w: address %s/%d", ErrMalformed, addr, bits)
		}
		a.prefix = netip.PrefixFrom(addr, bits) // keeps the host bits
	}
	return a, nil
}

func parseRoute(b []byte) (routeInfo, error) {
	if len(b) < unix.SizeofRtMsg {
		return routeInfo{}, fmt.Errorf("%w: %d-byte route message", ErrMalformed, len(b))
	}
	rt := routeInfo{
		family:   b[0],
		table:    uint32(b[4]),
		protocol: b[5],
		typ:      b[7],
	}
	bits := int(b[1])
	attrs, err := parseAttrs(b[unix.SizeofRtMsg:])
	if err != nil {
		return routeInfo{}, err
	}
	var dst netip.Addr
	for _, a := range attrs {
		switch a.typ {
		case unix.RTA_DST:
			if dst, err = parseIP(rt.family, a.data); err != nil {
				return routeInfo{}, err
			}
		case unix.RTA_PREFSRC:
			if rt.src, err = parseIP(rt.family, a.data); err != nil {
				return routeInfo{}, err
			}
		case unix.RTA_OIF:
			if len(a.data) != 4 {
				return routeInfo{}, fmt.Errorf("%w: %d-byte RTA_OIF", ErrMalformed, len(a.data))
			}
			rt.oif = int(int32(nl.Uint32(a.data)))
		case unix.RTA_TABLE:
			if len(a.data) != 4 {
				return routeInfo{}, fmt.Errorf("%w: %d-byte RTA_TABLE", ErrMalformed, len(a.data))
			}
			rt.table = nl.Uint32(a.data)
		case unix.RTA_GATEWAY:
			rt.gateway = true
			if rt.via, err = parseIP(rt.family, a.data); err != nil {
				return routeInfo{}, err
			}
		case unix.RTA_VIA:
			rt.gateway = true
		case unix.RTA_MULTIPATH:
			rt.multi = true
		case unix.RTA_ENCAP:
			rt.encap = true
		case rtaNHID:
			rt.nhid = true
		}
	}
	if !dst.IsValid() && bits == 0 {
		switch rt.family {
		case unix.AF_INET:
			dst = netip.IPv4Unspecified()
		case unix.AF_INET6:
			dst = netip.IPv6Unspecified()
		}
	}
	if dst.IsValid() {
		if bits > dst.BitLen() {
			return routeInfo{}, fmt.Errorf("%w: route prefix length %d", ErrMalformed, bits)
		}
		rt.dst = netip.PrefixFrom(dst, bits)
	}
	return rt, nil
}

// parseIP reads an address of the message's family; other families (say
// AF_MPLS labels) yield the zero Addr, which no rule accepts.
func parseIP(family uint8, b []byte) (netip.Addr, error) {
	want := 0
	switch family {
	case unix.AF_INET:
		want = 4
	case unix.AF_INET6:
		want = 16
	default:
		return netip.Addr{}, nil
	}
	if len(b) != want {
		return netip.Addr{}, fmt.Errorf("%w: %d-byte address for family %d", ErrMalformed, len(b), family)
	}
	a, _ := netip.AddrFromSlice(b)
	return a, nil
}

func cString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func (a addrInfo) String(names map[int]string) string {
	s := "?"
	if a.prefix.IsValid() {
		s = a.prefix.String()
	}
	if a.local.IsValid() && a.local != a.prefix.Addr() {
		s = a.local.String() + " peer " + s
	}
	if a.family != unix.AF_INET && a.family != unix.AF_INET6 {
		s = "family " + strconv.Itoa(int(a.family))
	}
	return s + " dev " + devName(a.index, names)
}

func (rt routeInfo) String(names map[int]string) string {
	var sb strings.Builder
	if rt.typ != unix.RTN_UNICAST {
		sb.WriteString(routeTypeName(rt.typ) + " ")
	}
	switch {
	case !rt.dst.IsValid():
		sb.WriteString("?")
	case rt.dst.Bits() == 0:
		sb.WriteString("default")
	case rt.dst.Bits() == rt.dst.Addr().BitLen():
		sb.WriteString(rt.dst.Addr().String())
	default:
		sb.WriteString(rt.dst.String())
	}
	if rt.via.IsValid() {
		sb.WriteString(" via " + rt.via.String())
	} else if rt.gateway {
		sb.WriteString(" via gateway")
	}
	if rt.multi {
		sb.WriteString(" multipath")
	}
	if rt.nhid {
		sb.WriteString(" nhid")
	}
	if rt.encap {
		sb.WriteString(" encap")
	}
	if rt.oif != 0 {
		sb.WriteString(" dev " + devName(rt.oif, names))
	}
	sb.WriteString(" table " + tableName(rt.table))
	sb.WriteString(" proto " + protoName(rt.protocol))
	if rt.src.IsValid() {
		sb.WriteString(" src " + rt.src.String())
	}
	return sb.String()
}

func devName(index int, names map[int]string) string {
	if n, ok := names[index]; ok && n != "" {
		return n
	}
	return "if" + strconv.Itoa(index)
}

func familyName(f uint8) string {
	switch f {
	case unix.AF_INET:
		return "ipv4"
	case unix.AF_INET6:
		return "ipv6"
	}
	return "family " + strconv.Itoa(int(f))
}

func routeTypeName(t uint8) string {
	names := [...]string{
		unix.RTN_UNSPEC: "unspec", unix.RTN_UNICAST: "unicast", unix.RTN_LOCAL: "local",
		unix.RTN_BROADCAST: "broadcast", unix.RTN_ANYCAST: "anycast", unix.RTN_MULTICAST: "multicast",
		unix.RTN_BLACKHOLE: "blackhole", unix.RTN_UNREACHABLE: "unreachable", unix.RTN_PROHIBIT: "prohibit",
		unix.RTN_THROW: "throw", unix.RTN_NAT: "nat", unix.RTN_XRESOLVE: "xresolve",
	}
	if int(t) < len(names) {
		return names[t]
	}
	return "type" + strconv.Itoa(int(t))
}

func tableName(t uint32) string {
	switch t {
	case unix.RT_TABLE_LOCAL:
		return "local"
	case unix.RT_TABLE_MAIN:
		return "main"
	case unix.RT_TABLE_DEFAULT:
		return "default"
	}
	return strconv.FormatUint(uint64(t), 10)
}

func protoName(p uint8) string {
	switch p {
	case unix.RTPROT_UNSPEC:
		return "unspec"
	case unix.RTPROT_REDIRECT:
		return "redirect"
	case unix.RTPROT_KERNEL:
		return "kernel"
	case unix.RTPROT_BOOT:
		return "boot"
	case unix.RTPROT_STATIC:
		return "static"
	}
	return strconv.Itoa(int(p))
}

func addDummy(fd int, name string, timeout time.Duration) error {
	if err := validName(name); err != nil {
		return fmt.Errorf("add dummy link: %w", err)
	}
	c, err := newConn(fd, time.Now().Add(timeout))
	if err != nil {
		return fmt.Errorf("add dummy link %s: %w", name, err)
	}
	for _, kind := range []string{"dummy", "ifb"} {
		req := make([]byte, unix.SizeofIfInfomsg)
		req = appendAttr(req, unix.IFLA_IFNAME, append([]byte(name), 0))
		info := appendAttr(nil, unix.IFLA_INFO_KIND, []byte(kind))
		req = appendAttr(req, unix.IFLA_LINKINFO|unix.NLA_F_NESTED, info)
		_, err = c.do(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL, req, 0, false)
		if !errors.Is(err, unix.EOPNOTSUPP) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("add dummy link %s: %w", name, err)
	}
	return nil
}

// validName mirrors the kernel's dev_valid_name.
func validName(name string) error {
	if name == "" || len(name) >= unix.IFNAMSIZ || name == "." || name == ".." {
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	for _, r := range name {
		if r == '/' || r == ':' || r == 0 || r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f' {
			return fmt.Errorf("%w: %q", ErrInvalidName, name)
		}
	}
	return nil
}
