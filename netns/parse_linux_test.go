package netns

import (
	"errors"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// nlmsg frames one message as the kernel would.
func nlmsg(typ, flags uint16, seq, pid uint32, body []byte) []byte {
	b := nl.AppendUint32(nil, uint32(unix.NLMSG_HDRLEN+len(body)))
	b = nl.AppendUint16(b, typ)
	b = nl.AppendUint16(b, flags)
	b = nl.AppendUint32(b, seq)
	b = nl.AppendUint32(b, pid)
	b = append(b, body...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func routeBody(family, bits, table, proto, typ uint8, attrs ...attr) []byte {
	b := []byte{family, bits, 0, 0, table, proto, unix.RT_SCOPE_HOST, typ, 0, 0, 0, 0}
	for _, a := range attrs {
		b = appendAttr(b, a.typ, a.data)
	}
	return b
}

func linkBody(index int, name string) []byte {
	b := make([]byte, unix.SizeofIfInfomsg)
	nl.PutUint16(b[2:4], unix.ARPHRD_LOOPBACK)
	nl.PutUint32(b[4:8], uint32(index))
	nl.PutUint32(b[8:12], unix.IFF_LOOPBACK|unix.IFF_UP)
	return appendAttr(b, unix.IFLA_IFNAME, append([]byte(name), 0))
}

func addrBody(family, bits uint8, index int, addr []byte) []byte {
	b := []byte{family, bits, 0, unix.RT_SCOPE_HOST, 0, 0, 0, 0}
	nl.PutUint32(b[4:8], uint32(index))
	b = appendAttr(b, unix.IFA_ADDRESS, addr)
	return appendAttr(b, unix.IFA_LOCAL, addr)
}

func oif(i int) attr    { return attr{unix.RTA_OIF, nl.AppendUint32(nil, uint32(i))} }
func dst(s string) attr { return attr{unix.RTA_DST, netip.MustParseAddr(s).AsSlice()} }

// samples are well-formed messages of every kind the parsers see.
func samples() [][]byte {
	return [][]byte{
		nlmsg(unix.RTM_NEWLINK, unix.NLM_F_MULTI, 1, 1, linkBody(1, "lo")),
		nlmsg(unix.RTM_NEWADDR, unix.NLM_F_MULTI, 1, 1, addrBody(unix.AF_INET, 8, 1, []byte{127, 0, 0, 1})),
		nlmsg(unix.RTM_NEWROUTE, unix.NLM_F_MULTI, 1, 1, routeBody(unix.AF_INET6, 128, unix.RT_TABLE_LOCAL,
			unix.RTPROT_KERNEL, unix.RTN_LOCAL, dst("::1"), oif(1), attr{unix.RTA_TABLE, nl.AppendUint32(nil, 255)})),
		nlmsg(unix.NLMSG_DONE, unix.NLM_F_MULTI, 1, 1, []byte{0, 0, 0, 0}),
		nlmsg(unix.NLMSG_ERROR, 0, 1, 1, append(nl.AppendUint32(nil, uint32(0xffffff9b)), make([]byte, 16)...)),
	}
}

// parseAll runs every parser over a datagram, as the check does.
func parseAll(b []byte) error {
	msgs, err := parseMessages(b)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		var err error
		switch m.typ {
		case unix.RTM_NEWLINK:
			_, err = parseLink(m.body)
		case unix.RTM_NEWADDR:
			var a addrInfo
			if a, err = parseAddr(m.body); err == nil {
				_ = a.String(nil)
				_ = a.loopbackOnly(1)
			}
		case unix.RTM_NEWROUTE:
			var rt routeInfo
			if rt, err = parseRoute(m.body); err == nil {
				_ = rt.String(nil)
				_ = rt.loopbackOnly(1)
			}
		case unix.NLMSG_ERROR, unix.NLMSG_DONE:
			_, err = parseErrno(m)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func TestParseSamples(t *testing.T) {
	var all []byte
	for _, s := range samples() {
		if err := parseAll(s); err != nil {
			t.Errorf("sample %x: %v", s, err)
		}
		all = append(all, s...)
	}
	msgs, err := parseMessages(all)
	if err != nil || len(msgs) != len(samples()) {
		t.Fatalf("multipart datagram: %d messages, %v", len(msgs), err)
	}
	l, _ := parseLink(msgs[0].body)
	if !l.isLoopback() || l.index != 1 {
		t.Errorf("link = %+v", l)
	}
	errno, err := parseErrno(msgs[4])
	if err != nil || errno != unix.ENETUNREACH {
		t.Errorf("errno = %v, %v", errno, err)
	}
}

// Every truncation of a valid message, and every corrupted length field,
// must be an ErrMalformed error or parse cleanly: never a panic.
func TestParseTruncatedAndCorrupt(t *testing.T) {
	for _, s := range samples() {
		for n := range len(s) {
			if err := parseAll(s[:n]); err != nil && !errors.Is(err, ErrMalformed) {
				t.Errorf("%x[:%d]: %v, want ErrMalformed", s, n, err)
			}
		}
		if err := parseAll(s[:unix.NLMSG_HDRLEN-1]); !errors.Is(err, ErrMalformed) {
			t.Errorf("short header: %v", err)
		}
		for i := range s {
			for _, v := range []byte{0, 1, 3, 4, 0x7f, 0xff} {
				c := append([]byte(nil), s...)
				c[i] = v
				if err := parseAll(c); err != nil && !errors.Is(err, ErrMalformed) {
					t.Errorf("%x: %v", c, err)
				}
			}
		}
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"length beyond datagram", nlmsg(unix.RTM_NEWLINK, 0, 1, 1, linkBody(1, "lo"))[:20]},
		{"attribute beyond message", nlmsg(unix.RTM_NEWLINK, 0, 1, 1, append(linkBody(1, "lo")[:16], 0xff, 0x00, 3, 0))},
		{"attribute length 2", nlmsg(unix.RTM_NEWLINK, 0, 1, 1, append(linkBody(1, "lo")[:16], 2, 0, 3, 0))},
		{"short ifinfomsg", nlmsg(unix.RTM_NEWLINK, 0, 1, 1, make([]byte, 15))},
		{"short ifaddrmsg", nlmsg(unix.RTM_NEWADDR, 0, 1, 1, make([]byte, 7))},
		{"short rtmsg", nlmsg(unix.RTM_NEWROUTE, 0, 1, 1, make([]byte, 11))},
		{"3-byte RTA_DST", nlmsg(unix.RTM_NEWROUTE, 0, 1, 1, routeBody(unix.AF_INET, 8, 255, 2, 2, attr{unix.RTA_DST, []byte{127, 0, 0}}))},
		{"2-byte RTA_OIF", nlmsg(unix.RTM_NEWROUTE, 0, 1, 1, routeBody(unix.AF_INET, 8, 255, 2, 2, attr{unix.RTA_OIF, []byte{1, 0}}))},
		{"prefix 33", nlmsg(unix.RTM_NEWROUTE, 0, 1, 1, routeBody(unix.AF_INET, 33, 255, 2, 2, dst("127.0.0.1")))},
		{"address prefix 129", nlmsg(unix.RTM_NEWADDR, 0, 1, 1, addrBody(unix.AF_INET6, 129, 1, netip.IPv6Loopback().AsSlice()))},
		{"short nlmsgerr", nlmsg(unix.NLMSG_ERROR, 0, 1, 1, []byte{0xff, 0xff, 0xff, 0xff})},
		{"positive errno", nlmsg(unix.NLMSG_ERROR, 0, 1, 1, append(nl.AppendUint32(nil, 5), make([]byte, 16)...))},
		{"stray bytes", append(nlmsg(unix.NLMSG_DONE, 0, 1, 1, []byte{0, 0, 0, 0}), 1, 2, 3)},
	} {
		if err := parseAll(tc.b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", tc.name, err)
		}
	}
}

// The route rule accepts exactly what lo creates; each single change to one
// of lo's own routes is refused.
func TestRouteRule(t *testing.T) {
	const lo = 1
	base4 := routeInfo{family: unix.AF_INET, dst: netip.MustParsePrefix("127.0.0.0/8"), table: unix.RT_TABLE_LOCAL,
		protocol: unix.RTPROT_KERNEL, typ: unix.RTN_LOCAL, oif: lo}
	base6 := routeInfo{family: unix.AF_INET6, dst: netip.MustParsePrefix("::1/128"), table: unix.RT_TABLE_LOCAL,
		protocol: unix.RTPROT_KERNEL, typ: unix.RTN_LOCAL, oif: lo}
	ok := []routeInfo{base4, base6}
	for _, d := range []string{"127.0.0.1/32", "127.255.255.255/32", "127.0.0.0/32"} {
		r := base4
		r.dst = netip.MustParsePrefix(d)
		ok = append(ok, r)
		r.typ = unix.RTN_BROADCAST
		ok = append(ok, r)
	}
	for _, r := range ok {
		if !r.loopbackOnly(lo) {
			t.Errorf("refused lo's own route %s", r.String(nil))
		}
	}
	mutations := map[string]func(*routeInfo){
		"table main":      func(r *routeInfo) { r.table = unix.RT_TABLE_MAIN },
		"table 1000":      func(r *routeInfo) { r.table = 1000 },
		"proto boot":      func(r *routeInfo) { r.protocol = unix.RTPROT_BOOT },
		"unicast":         func(r *routeInfo) { r.typ = unix.RTN_UNICAST },
		"blackhole":       func(r *routeInfo) { r.typ = unix.RTN_BLACKHOLE },
		"multicast":       func(r *routeInfo) { r.typ = unix.RTN_MULTICAST },
		"other oif":       func(r *routeInfo) { r.oif = 2 },
		"no oif":          func(r *routeInfo) { r.oif = 0 },
		"gateway":         func(r *routeInfo) { r.gateway = true },
		"multipath":       func(r *routeInfo) { r.multi = true },
		"encap":           func(r *routeInfo) { r.encap = true },
		"nexthop object":  func(r *routeInfo) { r.nhid = true },
		"no dst":          func(r *routeInfo) { r.dst = netip.Prefix{} },
		"family mpls":     func(r *routeInfo) { r.family = unix.AF_MPLS },
		"default":         func(r *routeInfo) { r.dst = netip.PrefixFrom(r.dst.Addr(), 0) },
		"outside address": func(r *routeInfo) { r.dst = netip.MustParsePrefix("10.0.0.0/8") },
		"wider than /8":   func(r *routeInfo) { r.dst = netip.MustParsePrefix("127.0.0.0/7") },
		"ipv6 fe80::/64":  func(r *routeInfo) { r.dst = netip.MustParsePrefix("fe80::/64") },
		"ipv6 ::/0":       func(r *routeInfo) { r.dst = netip.MustParsePrefix("::/0") },
		"ipv6 ::1/127":    func(r *routeInfo) { r.dst = netip.MustParsePrefix("::1/127") },
		"ipv6 ff00::/8":   func(r *routeInfo) { r.dst, r.typ = netip.MustParsePrefix("ff00::/8"), unix.RTN_MULTICAST },
	}
	for name, mutate := range mutations {
		for _, base := range []routeInfo{base4, base6} {
			r := base
			mutate(&r)
			if r.loopbackOnly(lo) {
				t.Errorf("%s: accepted %s", name, r.String(nil))
			}
		}
	}
	if base4.loopbackOnly(0) {
		t.Error("accepted a route when there is no lo")
	}
}

func TestAddrRule(t *testing.T) {
	const lo = 1
	for _, tc := range []struct {
		a    addrInfo
		want bool
	}{
		{addrInfo{family: unix.AF_INET, index: lo, prefix: netip.MustParsePrefix("127.0.0.1/8")}, true},
		{addrInfo{family: unix.AF_INET, index: lo, prefix: netip.MustParsePrefix("127.0.0.2/32")}, true},
		{addrInfo{family: unix.AF_INET6, index: lo, prefix: netip.MustParsePrefix("::1/128")}, true},
		{addrInfo{family: unix.AF_INET, index: 2, prefix: netip.MustParsePrefix("127.0.0.1/8")}, false},
		{addrInfo{family: unix.AF_INET, index: lo, prefix: netip.MustParsePrefix("127.0.0.1/7")}, false},
		{addrInfo{family: unix.AF_INET, index: lo, prefix: netip.MustParsePrefix("10.1.2.3/8")}, false},
		{addrInfo{family: unix.AF_INET, index: lo, prefix: netip.MustParsePrefix("127.0.0.1/8"), local: netip.MustParseAddr("10.0.0.1")}, false},
		{addrInfo{family: unix.AF_INET6, index: lo, prefix: netip.MustParsePrefix("fe80::1/64")}, false},
		{addrInfo{family: unix.AF_INET6, index: lo, prefix: netip.MustParsePrefix("::1/64")}, false},
		{addrInfo{family: unix.AF_PACKET, index: lo}, false},
		{addrInfo{family: unix.AF_INET, index: lo}, false},
	} {
		if got := tc.a.loopbackOnly(lo); got != tc.want {
			t.Errorf("%s: loopbackOnly = %v, want %v", tc.a.String(nil), got, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range samples() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := parseAll(b); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("%v is not ErrMalformed", err)
		}
	})
}
