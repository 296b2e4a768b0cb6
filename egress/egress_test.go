package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// server is a loopback httptest server that counts connections and
// requests, so a test can show nothing reached it.
type server struct {
	*httptest.Server
	conns, requests atomic.Int32
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		h(w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func hello(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") }

func (s *server) port() int { return s.Listener.Addr().(*net.TCPAddr).Port }

func (s *server) untouched(t *testing.T) {
	t.Helper()
	if c, r := s.conns.Load(), s.requests.Load(); c != 0 || r != 0 {
		t.Errorf("server got %d connections and %d requests, want none", c, r)
	}
}

// fakeResolver answers from a table and counts lookups; it never touches
// DNS.
type fakeResolver struct {
	mu      sync.Mutex
	calls   int
	answers map[string][]netip.Addr
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	a, ok := r.answers[strings.TrimSuffix(host, ".")]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return a, nil
}

func (r *fakeResolver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

func newEgress(t *testing.T, cfg Config) *Egress {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(e.CloseIdleConnections)
	return e
}

func get(t *testing.T, c Client, url string) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func wantDenied(t *testing.T, err error, contains string) {
	t.Helper()
	if !errors.Is(err, ErrDenied) {
		t.Fatalf("err = %v, want ErrDenied", err)
	}
	if !strings.Contains(err.Error(), contains) {
		t.Errorf("err = %q, want it to say %q", err, contains)
	}
}

func TestAddressEntryAdmitsLoopbackServer(t *testing.T) {
	s := newServer(t, hello)
	for _, tc := range []struct{ entry, url string }{
		{fmt.Sprintf("127.0.0.1:%d", s.port()), s.URL},
		{"127.0.0.0/8", s.URL},
		{"127.0.0.1", fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", s.port())},
		{"::ffff:127.0.0.1", s.URL},
	} {
		e := newEgress(t, Config{Allow: []string{tc.entry}})
		body, err := get(t, e, tc.url)
		if err != nil || body != "hello" {
			t.Errorf("entry %q, GET %s = %q, %v; want hello", tc.entry, tc.url, body, err)
		}
	}
	if s.requests.Load() != 4 {
		t.Errorf("server got %d requests, want 4", s.requests.Load())
	}
}

func TestAddressEntryPortIsEnforced(t *testing.T) {
	s := newServer(t, hello)
	e := newEgress(t, Config{Allow: []string{fmt.Sprintf("127.0.0.1:%d", s.port()+1)}})
	_, err := get(t, e, s.URL)
	wantDenied(t, err, "not on the allowlist")
	s.untouched(t)
}

func TestNameEntryDoesNotAdmitLoopback(t *testing.T) {
	s := newServer(t, hello)
	// The default resolver: this host's /etc/hosts maps localhost to
	// loopback.
	e := newEgress(t, Config{Allow: []string{fmt.Sprintf("localhost:%d", s.port())}})
	_, err := get(t, e, fmt.Sprintf("http://localhost:%d/", s.port()))
	wantDenied(t, err, "localhost resolves to ")
	if !strings.Contains(err.Error(), "a loopback address, which a name entry does not admit") {
		t.Errorf("err = %q, want it to name the loopback class", err)
	}
	s.untouched(t)
}

func TestUnlistedHostIsNeverResolvedOrDialed(t *testing.T) {
	s := newServer(t, hello)
	r := &fakeResolver{answers: map[string][]netip.Addr{"evil.test": addrs("127.0.0.1")}}
	e := newEgress(t, Config{Allow: []string{fmt.Sprintf("127.0.0.1:%d", s.port()), "good.test"}, Resolver: r})
	_, err := get(t, e, fmt.Sprintf("http://evil.test:%d/", s.port()))
	wantDenied(t, err, "request to evil.test:")
	wantDenied(t, err, "host is not on the allowlist")
	// The dial check stands on its own too.
	_, err = e.dial(t.Context(), "tcp", fmt.Sprintf("evil.test:%d", s.port()))
	wantDenied(t, err, "host is not on the allowlist")
	if n := r.count(); n != 0 {
		t.Errorf("resolver called %d times, want 0", n)
	}
	s.untouched(t)
}

func TestSchemeOtherThanHTTP(t *testing.T) {
	e := newEgress(t, Config{Allow: []string{"127.0.0.1"}})
	for _, u := range []string{"ftp://127.0.0.1/", "file:///etc/passwd", "gopher://127.0.0.1/"} {
		_, err := get(t, e, u)
		wantDenied(t, err, "is not http or https")
	}
}

func TestRedirectOffTheListIsRefused(t *testing.T) {
	other := newServer(t, hello)
	r := &fakeResolver{answers: map[string][]netip.Addr{"rebind.test": addrs("127.0.0.1")}}
	to := map[string]string{
		"/port":   other.URL + "/",                                            // same address, port not listed
		"/name":   fmt.Sprintf("http://evil.test:%d/", other.port()),          // name not listed
		"/rebind": fmt.Sprintf("http://rebind.test:%d/", other.port()),        // listed name, loopback address
		"/scheme": fmt.Sprintf("ftp://127.0.0.1:%d/", other.port()),           // not http
		"/mapped": fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", other.port()), // same address, other form
	}
	first := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to[r.URL.Path], http.StatusFound)
	})
	e := newEgress(t, Config{
		Allow:    []string{fmt.Sprintf("127.0.0.1:%d", first.port()), "rebind.test"},
		Resolver: r,
	})
	for path, want := range map[string]string{
		"/port":   "redirect to 127.0.0.1:",
		"/name":   "redirect to evil.test:",
		"/rebind": "rebind.test resolves to 127.0.0.1, a loopback address",
		"/scheme": "is not http or https",
		"/mapped": "redirect to [::ffff:127.0.0.1]:",
	} {
		_, err := get(t, e, first.URL+path)
		wantDenied(t, err, want)
	}
	if n := r.count(); n != 1 {
		t.Errorf("resolver called %d times, want 1 (rebind.test only)", n)
	}
	if n := first.requests.Load(); n != 5 {
		t.Errorf("first server got %d requests, want 5", n)
	}
	other.untouched(t)
}

func TestRedirectsOnTheListAreFollowedUpToTheLimit(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscanf(r.URL.Path, "/r/%d", &n)
		if n == 0 {
			io.WriteString(w, "done")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/r/%d", n-1), http.StatusFound)
	})
	e := newEgress(t, Config{Allow: []string{"127.0.0.1"}})
	body, err := get(t, e, fmt.Sprintf("%s/r/%d", s.URL, MaxRedirects))
	if err != nil || body != "done" {
		t.Fatalf("%d redirects: %q, %v; want done", MaxRedirects, body, err)
	}
	_, err = get(t, e, fmt.Sprintf("%s/r/%d", s.URL, MaxRedirects+1))
	if !errors.Is(err, ErrTooManyRedirects) {
		t.Fatalf("%d redirects: err = %v, want ErrTooManyRedirects", MaxRedirects+1, err)
	}
	if n, want := s.requests.Load(), int32(2*(MaxRedirects+1)); n != want {
		t.Errorf("server got %d requests, want %d", n, want)
	}
}

func TestDenyAll(t *testing.T) {
	s := newServer(t, hello)
	body := &closeRecorder{Reader: strings.NewReader("x")}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := DenyAll().Do(req)
	if resp != nil {
		t.Errorf("resp = %v, want nil", resp)
	}
	wantDenied(t, err, "no network is granted")
	if !body.closed {
		t.Error("request body not closed")
	}
	s.untouched(t)
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestZeroEgressAndEmptyAllowlistDeny(t *testing.T) {
	s := newServer(t, hello)
	for name, c := range map[string]Client{"zero": &Egress{}, "nil": (*Egress)(nil), "empty": newEgress(t, Config{})} {
		_, err := get(t, c, s.URL)
		if !errors.Is(err, ErrDenied) {
			t.Errorf("%s Egress: err = %v, want ErrDenied", name, err)
		}
	}
	s.untouched(t)
}

func TestNoProxyFromTheEnvironment(t *testing.T) {
	e := newEgress(t, Config{Allow: []string{"127.0.0.1"}})
	tr, ok := e.client.Transport.(*http.Transport)
	if !ok || tr.Proxy != nil {
		t.Fatalf("transport %T with Proxy set, want *http.Transport with Proxy nil", e.client.Transport)
	}
	if e.client.CheckRedirect == nil {
		t.Error("CheckRedirect is nil: redirects would go unchecked")
	}
}

func TestRebindingNameToPrivateIsRefusedAtDial(t *testing.T) {
	s := newServer(t, hello)
	for _, answer := range [][]netip.Addr{
		addrs("127.0.0.1"),
		addrs("::ffff:127.0.0.1"),
		addrs("10.1.2.3"),
		addrs("8.8.8.8", "127.0.0.1"), // one bad address refuses them all, before any dial
		{{}},
	} {
		r := &fakeResolver{answers: map[string][]netip.Addr{"api.test": answer}}
		e := newEgress(t, Config{Allow: []string{"api.test"}, Resolver: r})
		_, err := get(t, e, fmt.Sprintf("http://api.test:%d/", s.port()))
		wantDenied(t, err, "dial api.test:")
		wantDenied(t, err, "which a name entry does not admit")
		if n := r.count(); n != 1 {
			t.Errorf("answer %v: resolver called %d times, want 1", answer, n)
		}
	}
	s.untouched(t)
}

func TestNameWithAddressEntryConnectsToTheCheckedAddress(t *testing.T) {
	s := newServer(t, hello)
	// A name and the address it resolves to, both listed: admitted. The
	// resolver is the only way the name becomes an address, and it is asked
	// once per connection.
	r := &fakeResolver{answers: map[string][]netip.Addr{"svc.test": addrs("127.0.0.1")}}
	e := newEgress(t, Config{Allow: []string{"svc.test", fmt.Sprintf("127.0.0.1:%d", s.port())}, Resolver: r})
	body, err := get(t, e, fmt.Sprintf("http://svc.test:%d/", s.port()))
	if err != nil || body != "hello" {
		t.Fatalf("GET svc.test = %q, %v; want hello", body, err)
	}
	if n := r.count(); n != 1 {
		t.Errorf("resolver called %d times, want 1", n)
	}
}

func TestControlRefusesAnUncheckedConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepts atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			c.Close()
		}
	}()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	e := newEgress(t, Config{Allow: []string{"api.test", "127.0.0.2"}})
	for _, tgt := range []target{
		parseTarget("api.test", port),  // a name: loopback is not public
		parseTarget("127.0.0.2", port), // a literal: 127.0.0.1 is not it
	} {
		c, err := e.dialer(tgt).DialContext(t.Context(), "tcp", ln.Addr().String())
		if err == nil {
			c.Close()
		}
		wantDenied(t, err, "connect to 127.0.0.1:")
	}
	time.Sleep(50 * time.Millisecond)
	if n := accepts.Load(); n != 0 {
		t.Errorf("listener accepted %d connections, want 0", n)
	}
	// A checked port only.
	err = e.control(parseTarget("127.0.0.2", 80))("tcp4", "127.0.0.2:81", nil)
	wantDenied(t, err, "not the checked port")
}

func TestInvalidAllowlist(t *testing.T) {
	for _, s := range []string{
		"", " example.com", "exa mple.com", "example.com/", "http://example.com",
		"*", "*.", "*.com", "foo.*.com", "*foo.com", "**.foo.com", "*.*.foo.com",
		"foo..com", ".foo.com", "-foo.com", "foo-.com", "ex_ample.com:",
		"example.com:0", "example.com:65536", "example.com:http", "example.com:+80", "example.com:-1",
		"bücher.example", strings.Repeat("a", 64) + ".com", strings.Repeat("a.", 127) + "com",
		"127.1", "0x7f000001", "1.2.3.4.5", "example.0x1f",
		"10.0.0.1/8", "10.0.0.0/33", "10.0.0.0/", "/8", "[::1", "[::1]x", "[::1]:", "[127.0.0.1]:80",
		"[example.com]:80", "fe80::1%eth0", "[fe80::1%eth0]:80", "::1::2", "1.2.3.4:5:6",
	} {
		_, err := New(Config{Allow: []string{"ok.example", s}})
		if !errors.Is(err, ErrInvalidAllowlist) {
			t.Errorf("entry %q: err = %v, want ErrInvalidAllowlist", s, err)
		}
	}
	if _, err := New(Config{Timeout: -time.Second}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("negative timeout: err = %v, want ErrInvalidConfig", err)
	}
}

func TestValidAllowlist(t *testing.T) {
	for s, want := range map[string]entry{
		"Example.COM.":          {name: "example.com"},
		"*.Example.com:8443":    {name: "example.com", wild: true, port: 8443},
		"xn--bcher-kva.example": {name: "xn--bcher-kva.example"},
		"_srv.example.com":      {name: "_srv.example.com"},
		"127.0.0.1":             {prefix: netip.MustParsePrefix("127.0.0.1/32")},
		"127.0.0.1:8080":        {prefix: netip.MustParsePrefix("127.0.0.1/32"), port: 8080},
		"10.0.0.0/8":            {prefix: netip.MustParsePrefix("10.0.0.0/8")},
		"10.0.0.0/8:443":        {prefix: netip.MustParsePrefix("10.0.0.0/8"), port: 443},
		"::1":                   {prefix: netip.MustParsePrefix("::1/128")},
		"[::1]:8080":            {prefix: netip.MustParsePrefix("::1/128"), port: 8080},
		"fd00::/8":              {prefix: netip.MustParsePrefix("fd00::/8")},
		"[fd00::/8]:443":        {prefix: netip.MustParsePrefix("fd00::/8"), port: 443},
		"::ffff:10.0.0.0/104":   {prefix: netip.MustParsePrefix("10.0.0.0/8")},
		"[::ffff:127.0.0.1]":    {prefix: netip.MustParsePrefix("127.0.0.1/32")},
	} {
		got, err := parseEntry(s)
		if err != nil || got != want {
			t.Errorf("parseEntry(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
}

func TestNameMatching(t *testing.T) {
	l, err := parseAllowlist([]string{"*.example.com", "exact.test", "*.ported.test:8443", "10.0.0.0/8:443"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		port uint16
		want bool
	}{
		{"a.example.com", 443, true},
		{"a.b.example.com", 80, true},
		{"A.Example.COM.", 443, true},
		{"example.com", 443, false},
		{"badexample.com", 443, false},
		{"aexample.com", 443, false},
		{"example.com.evil.test", 443, false},
		{"a.example.com.evil.test", 443, false},
		{".example.com", 443, false},
		{"a..example.com", 443, false},
		{"exact.test", 1, true},
		{"EXACT.TEST.", 1, true},
		{"a.exact.test", 1, false},
		{"exact.test.evil", 1, false},
		{"\u212Aexact.test", 1, false}, // KELVIN SIGN does not fold to k
		{"a.ported.test", 8443, true},
		{"a.ported.test", 443, false},
		{"10.1.2.3", 443, true},
		{"10.1.2.3", 80, false},
		{"::ffff:10.1.2.3", 443, true},
		{"11.1.2.3", 443, false},
		{"10.1.2.3.nip.io", 443, false},
	} {
		if got := l.admitsHost(parseTarget(tc.host, tc.port)); got != tc.want {
			t.Errorf("%s:%d admitted = %v, want %v", tc.host, tc.port, got, tc.want)
		}
	}
}

func TestClassify(t *testing.T) {
	for a, want := range map[string]string{
		"8.8.8.8":                "",
		"1.1.1.1":                "",
		"93.184.215.14":          "",
		"172.32.0.1":             "",
		"100.128.0.1":            "",
		"2606:4700:4700::1111":   "",
		"2a00:1450:4001::200e":   "",
		"::ffff:8.8.8.8":         "",
		"64:ff9b::808:808":       "",
		"2002:808:808::1":        "",
		"0.0.0.0":                classUnspecified,
		"::":                     classUnspecified,
		"0.1.2.3":                classThisNetwork,
		"127.0.0.1":              classLoopback,
		"127.255.255.254":        classLoopback,
		"::1":                    classLoopback,
		"::ffff:127.0.0.1":       classLoopback,
		"64:ff9b::7f00:1":        classLoopback,
		"2002:7f00:1::":          classLoopback,
		"10.0.0.1":               classPrivate,
		"172.16.0.1":             classPrivate,
		"172.31.255.255":         classPrivate,
		"192.168.1.1":            classPrivate,
		"::ffff:192.168.1.1":     classPrivate,
		"fc00::1":                classPrivate,
		"fd12:3456::1":           classPrivate,
		"64:ff9b:1::1":           classPrivate,
		"100.64.0.1":             classShared,
		"100.127.255.255":        classShared,
		"169.254.169.254":        classLinkLocal,
		"::ffff:169.254.169.254": classLinkLocal,
		"fe80::1":                classLinkLocal,
		"fe80::1%eth0":           classLinkLocal,
		"fec0::1":                classSiteLocal,
		"224.0.0.1":              classMulticast,
		"239.255.255.250":        classMulticast,
		"ff02::1":                classMulticast,
		"255.255.255.255":        classBroadcast,
		"240.0.0.1":              classReserved,
		"192.0.0.8":              classReserved,
		"192.0.2.1":              classDocumentation,
		"198.51.100.1":           classDocumentation,
		"203.0.113.1":            classDocumentation,
		"2001:db8::1":            classDocumentation,
		"3fff::1":                classDocumentation,
		"198.18.0.1":             classBenchmarking,
		"2001:2::1":              classBenchmarking,
		"2001::1":                classTeredo,
		"100::1":                 classDiscard,
		"::127.0.0.1":            classReserved, // IPv4-compatible, deprecated
		"4000::1":                classReserved, // outside 2000::/3
	} {
		if got := classify(netip.MustParseAddr(a)); got != want {
			t.Errorf("classify(%s) = %q, want %q", a, got, want)
		}
	}
	if got := classify(netip.Addr{}); got != classInvalid {
		t.Errorf("classify(invalid) = %q, want %q", got, classInvalid)
	}
}

func TestAddressEntryAdmitsNonPublicName(t *testing.T) {
	l, err := parseAllowlist([]string{"api.corp", "*.public.test", "10.0.0.0/8:443"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host, addr string
		port       uint16
		want       bool
	}{
		{"api.corp", "10.1.2.3", 443, true},     // covered by the prefix at its port
		{"api.corp", "10.1.2.3", 80, false},     // not at another port
		{"api.corp", "192.168.0.1", 443, false}, // not another private address
		{"api.corp", "8.8.8.8", 80, true},       // public, by the name entry
		{"a.public.test", "::ffff:10.0.0.1", 443, true},
		{"a.public.test", "127.0.0.1", 443, false},
		{"10.1.2.3", "10.1.2.3", 443, true},
	} {
		got := l.admitAddr(parseTarget(tc.host, tc.port), netip.MustParseAddr(tc.addr)) == ""
		if got != tc.want {
			t.Errorf("%s:%d at %s admitted = %v, want %v", tc.host, tc.port, tc.addr, got, tc.want)
		}
	}
}
