package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// entry is one parsed allowlist entry: a name entry (name set) or an
// address entry (prefix valid).
type entry struct {
	name   string       // lowercase, no trailing dot
	wild   bool         // *.name: subdomains of name, not name itself
	prefix netip.Prefix // IPv4 or IPv6, never IPv4-mapped, no zone
	port   uint16       // 0: any port
}

type allowlist []entry

func parseAllowlist(raw []string) (allowlist, error) {
	l := make(allowlist, 0, len(raw))
	for _, s := range raw {
		e, err := parseEntry(s)
		if err != nil {
			return nil, fmt.Errorf("allowlist entry %.100q: %v: %w", s, err, ErrInvalidAllowlist)
		}
		l = append(l, e)
	}
	return l, nil
}

func parseEntry(s string) (entry, error) {
	host, port, bracketed, err := splitEntry(s)
	if err != nil {
		return entry{}, err
	}
	if host == "" {
		return entry{}, errors.New("no host")
	}
	if strings.Contains(host, "/") {
		p, err := netip.ParsePrefix(host)
		if err != nil {
			return entry{}, errors.New("not a CIDR prefix")
		}
		if bracketed && !p.Addr().Is6() {
			return entry{}, errors.New("brackets hold only IPv6")
		}
		if p != p.Masked() {
			return entry{}, fmt.Errorf("host bits set (the prefix is %s)", p.Masked())
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return entry{prefix: p, port: port}, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return entry{}, errors.New("an address with a zone cannot be listed (list it without the zone)")
		}
		if bracketed && !a.Is6() {
			return entry{}, errors.New("brackets hold only IPv6")
		}
		a = a.Unmap()
		return entry{prefix: netip.PrefixFrom(a, a.BitLen()), port: port}, nil
	}
	if bracketed || strings.Contains(host, ":") {
		return entry{}, errors.New("not an IPv6 address")
	}
	name, wild := lowerASCII(host), false
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		name, wild = rest, true
	}
	name = strings.TrimSuffix(name, ".")
	if err := checkName(name); err != nil {
		return entry{}, err
	}
	if wild && !strings.Contains(name, ".") {
		return entry{}, errors.New("a wildcard needs a domain of two labels or more")
	}
	return entry{name: name, wild: wild, port: port}, nil
}

// splitEntry splits an entry into host and port. An IPv6 address or prefix
// takes a port only in brackets; unbracketed, it has none.
func splitEntry(s string) (host string, port uint16, bracketed bool, err error) {
	if rest, ok := strings.CutPrefix(s, "["); ok {
		host, rest, ok := strings.Cut(rest, "]")
		switch {
		case !ok:
			return "", 0, true, errors.New("missing ]")
		case rest == "":
			return host, 0, true, nil
		case rest[0] != ':':
			return "", 0, true, errors.New("text after ] that is not :port")
		}
		port, err := parsePort(rest[1:])
		return host, port, true, err
	}
	if strings.Count(s, ":") != 1 {
		return s, 0, false, nil
	}
	host, p, _ := strings.Cut(s, ":")
	port, err = parsePort(p)
	return host, port, false, err
}

// parsePort accepts a decimal port from 1 to 65535.
func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("port %.20q is not a number from 1 to 65535", s)
	}
	return uint16(n), nil
}

// checkName accepts a host name in ASCII (an IDN in its xn-- form): labels
// of 1 to 63 letters, digits, - and _, not starting or ending with -. A name
// whose last label is a number is refused, since URL parsers read it as an
// IPv4 address in another notation (127.1, 0x7f000001).
func checkName(name string) error {
	if len(name) > 253 {
		return errors.New("name longer than 253 characters")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return errors.New("empty label")
		}
		if len(l) > 63 {
			return errors.New("label longer than 63 characters")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("character %q not allowed in a host name (an IDN goes in its xn-- form)", c)
			}
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return errors.New("label starts or ends with -")
		}
	}
	if numeric(labels[len(labels)-1]) {
		return errors.New("reads as an IPv4 address but is not one")
	}
	return nil
}

func numeric(l string) bool {
	if h, ok := strings.CutPrefix(l, "0x"); ok {
		return strings.Trim(h, "0123456789abcdef") == ""
	}
	return strings.Trim(l, "0123456789") == ""
}

// lowerASCII lowercases A-Z only, so no non-ASCII letter folds into an
// ASCII one (U+212A KELVIN SIGN to k, as strings.ToLower does).
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// target is the host and port a request names: an address literal (addr
// valid) or a name (lowercase, without its trailing dot). valid is false for
// a host that is neither; no entry admits it.
type target struct {
	host  string // as the request wrote it, for messages and resolution
	name  string
	addr  netip.Addr
	port  uint16
	valid bool
}

func parseTarget(host string, port uint16) target {
	t := target{host: host, port: port}
	if a, err := netip.ParseAddr(host); err == nil {
		t.addr, t.valid = a.Unmap(), true
		return t
	}
	t.name = strings.TrimSuffix(lowerASCII(host), ".")
	t.valid = checkName(t.name) == nil
	return t
}

// admitsHost reports whether an entry matches t by name, or, for an address
// literal, covers it.
func (l allowlist) admitsHost(t target) bool {
	if !t.valid {
		return false
	}
	if t.addr.IsValid() {
		return l.covers(t.addr, t.port)
	}
	for _, e := range l {
		if e.name == "" || e.port != 0 && e.port != t.port {
			continue
		}
		if e.wild && strings.HasSuffix(t.name, "."+e.name) || !e.wild && t.name == e.name {
			return true
		}
	}
	return false
}

// covers reports whether an address entry covers a at port. A zone is
// ignored.
func (l allowlist) covers(a netip.Addr, port uint16) bool {
	a = a.WithZone("").Unmap()
	for _, e := range l {
		if e.prefix.IsValid() && (e.port == 0 || e.port == port) && e.prefix.Contains(a) {
			return true
		}
	}
	return false
}

// admitAddr says why t may not connect to a, or returns "" when it may: an
// address entry covers a at t's port, or t is a name (admitted by
// admitsHost) and a is public.
func (l allowlist) admitAddr(t target, a netip.Addr) string {
	if l.covers(a, t.port) {
		return ""
	}
	if t.addr.IsValid() {
		return fmt.Sprintf("address %s is not covered by an address entry", a)
	}
	c := classify(a)
	if c == "" {
		return ""
	}
	return fmt.Sprintf("%s resolves to %s, %s, which a name entry does not admit", t.host, a.Unmap(), c)
}
