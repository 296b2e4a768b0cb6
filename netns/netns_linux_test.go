package netns

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/testutil"
)

// childHelper is the re-executed test binary: it runs in a fresh user and
// network namespace, sets the namespace up as its argument says, and sends
// a NETLINK_ROUTE socket opened there back over fd 3.
const childHelper = "netns-child"

func init() { testutil.Register(childHelper, runChild) }

func TestMain(m *testing.M) { testutil.Main(m) }

// runChild is the namespace holder. It reports a setup failure as a message
// without rights, then waits for EOF on fd 3 so the namespace outlives the
// test's use of the socket.
func runChild(mode string) int {
	const sync = 3
	nlfd, err := setupChild(mode)
	if err != nil {
		_ = unix.Sendmsg(sync, []byte(err.Error()), nil, nil, 0)
		return 1
	}
	if err := unix.Sendmsg(sync, []byte{0}, unix.UnixRights(nlfd), nil, 0); err != nil {
		return 1
	}
	_ = unix.Close(nlfd)
	var b [1]byte
	for {
		n, err := unix.Read(sync, b[:])
		if n <= 0 && err != unix.EINTR {
			return 0
		}
	}
}

func setupChild(mode string) (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	if mode == "fresh" {
		return fd, nil
	}
	c, err := newConn(fd, time.Now().Add(5*time.Second))
	if err != nil {
		return -1, err
	}
	links, _, err := c.links()
	if err != nil {
		return -1, err
	}
	lo, ok := findLoopback(links)
	if !ok {
		return -1, errors.New("no lo")
	}
	if err := c.setUp(lo.index); err != nil {
		return -1, fmt.Errorf("set lo up: %w", err)
	}
	switch mode {
	case "addr":
		err = addAddr(c, lo.index, netip.MustParsePrefix("10.1.2.3/8"))
	case "route4": // default dev lo
		err = addRoute(c, unix.RTN_UNICAST, unix.RT_TABLE_MAIN, unix.RTPROT_BOOT, unix.RT_SCOPE_LINK,
			netip.MustParsePrefix("0.0.0.0/0"), lo.index)
	case "route6":
		err = addRoute(c, unix.RTN_UNICAST, unix.RT_TABLE_MAIN, unix.RTPROT_BOOT, unix.RT_SCOPE_UNIVERSE,
			netip.MustParsePrefix("2001:db8::/32"), lo.index)
	case "blackhole":
		err = addRoute(c, unix.RTN_BLACKHOLE, unix.RT_TABLE_MAIN, unix.RTPROT_BOOT, unix.RT_SCOPE_UNIVERSE,
			netip.MustParsePrefix("203.0.113.0/24"), 0)
	case "lo-local": // looks like lo's own routes, but outside 127.0.0.0/8
		err = addRoute(c, unix.RTN_LOCAL, unix.RT_TABLE_LOCAL, unix.RTPROT_KERNEL, unix.RT_SCOPE_HOST,
			netip.MustParsePrefix("10.9.0.0/16"), lo.index)
	case "lo-up":
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		return -1, fmt.Errorf("%s: %w", mode, err)
	}
	return fd, nil
}

func addAddr(c *conn, index int, p netip.Prefix) error {
	req := make([]byte, unix.SizeofIfAddrmsg)
	req[0] = unix.AF_INET
	if p.Addr().Is6() {
		req[0] = unix.AF_INET6
	}
	req[1] = uint8(p.Bits())
	nl.PutUint32(req[4:8], uint32(index))
	req = appendAttr(req, unix.IFA_LOCAL, p.Addr().AsSlice())
	req = appendAttr(req, unix.IFA_ADDRESS, p.Addr().AsSlice())
	_, err := c.do(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL, req, 0, false)
	return err
}

func addRoute(c *conn, typ, table, proto, scope uint8, dst netip.Prefix, oif int) error {
	req := make([]byte, unix.SizeofRtMsg)
	req[0] = unix.AF_INET
	if dst.Addr().Is6() {
		req[0] = unix.AF_INET6
	}
	req[1] = uint8(dst.Bits())
	req[4], req[5], req[6], req[7] = table, proto, scope, typ
	if dst.Bits() > 0 {
		req = appendAttr(req, unix.RTA_DST, dst.Addr().AsSlice())
	}
	if oif > 0 {
		req = appendAttr(req, unix.RTA_OIF, nl.AppendUint32(nil, uint32(oif)))
	}
	_, err := c.do(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, req, 0, false)
	return err
}

// nsSocket starts a child in a fresh user and network namespace (uid and
// gid 0 mapped to the caller's, so this needs no privilege where
// unprivileged user namespaces are allowed) and returns the NETLINK_ROUTE
// socket it opened there. The test process's own namespaces are untouched.
func nsSocket(tb testing.TB, mode string) int {
	tb.Helper()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	parent, childEnd := os.NewFile(uintptr(pair[0]), "sync"), os.NewFile(uintptr(pair[1]), "sync-child")
	var stderr bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), testutil.HelperEnviron(childHelper, mode)...)
	cmd.ExtraFiles = []*os.File{childEnd} // fd 3
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		parent.Close()
		childEnd.Close()
		tb.Fatalf("start namespace child: %v", err)
	}
	childEnd.Close()
	// childErr ends the child and returns its exit and stderr; the buffer
	// is written by exec's copier until Wait returns, so it is read after.
	var waited bool
	var waitErr error
	childErr := func() string {
		if !waited {
			parent.Close() // EOF: the child exits
			waitErr, waited = cmd.Wait(), true
		}
		return fmt.Sprintf("namespace child: %v\n%s", waitErr, stderr.String())
	}
	tb.Cleanup(func() {
		if msg := childErr(); waitErr != nil {
			tb.Error(msg)
		}
	})

	tv := unix.NsecToTimeval((10 * time.Second).Nanoseconds())
	if err := unix.SetsockoptTimeval(pair[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		tb.Fatal(err)
	}
	buf, oob := make([]byte, 512), make([]byte, unix.CmsgSpace(4))
	// A socket with SO_RCVTIMEO is not restarted after a signal (signal(7)),
	// and the Go runtime signals its threads to preempt them.
	var n, oobn int
	for {
		n, oobn, _, _, err = unix.Recvmsg(pair[0], buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		tb.Fatalf("receive netlink fd: %v\n%s", err, childErr())
	}
	cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(cmsgs) != 1 {
		tb.Fatalf("namespace child (%s): %q %v\n%s", mode, buf[:n], err, childErr())
	}
	fds, err := unix.ParseUnixRights(&cmsgs[0])
	if err != nil || len(fds) != 1 {
		tb.Fatalf("parse rights: %v %v", fds, err)
	}
	tb.Cleanup(func() { unix.Close(fds[0]) })
	return fds[0]
}

func hostSocket(tb testing.TB, proto int) int {
	tb.Helper()
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Close(fd) })
	return fd
}

func logCheck(t *testing.T, chk Check) {
	t.Helper()
	b, _ := json.MarshalIndent(chk, "", "  ")
	t.Logf("%s", b)
}

func TestVerifyFreshNamespace(t *testing.T) {
	fd := nsSocket(t, "fresh")

	// Before: lo exists and is down.
	c, err := newConn(fd, time.Now().Add(Timeout))
	if err != nil {
		t.Fatal(err)
	}
	links, _, err := c.links()
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != 1 || !links[0].isLoopback() || links[0].flags&unix.IFF_UP != 0 {
		t.Fatalf("fresh namespace links = %+v, want lo down", links)
	}

	start := time.Now()
	chk, err := Verify(fd)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	logCheck(t, chk)
	t.Logf("Verify with lo bring-up took %v", elapsed)
	if !chk.Denied || chk.Reason != "" {
		t.Fatalf("fresh namespace not denied: %q", chk.Reason)
	}
	if len(chk.Links) != 1 || chk.Links[0].Name != "lo" || !chk.Links[0].Up {
		t.Errorf("links = %+v, want lo up only", chk.Links)
	}
	for _, want := range []string{"127.0.0.1/8 dev lo", "::1/128 dev lo"} {
		if !contains(chk.Addrs, want) {
			t.Errorf("addrs %q lack %q", chk.Addrs, want)
		}
	}
	for _, want := range []string{"local 127.0.0.1 dev lo table local proto kernel", "local ::1 dev lo table local proto kernel"} {
		if !hasPrefix(chk.Routes, want) {
			t.Errorf("routes %q lack %q", chk.Routes, want)
		}
	}
	if len(chk.Lookups) != len(outside) {
		t.Errorf("lookups = %+v, want %d", chk.Lookups, len(outside))
	}
	for _, l := range chk.Lookups {
		if l.Reachable || l.Result != unix.ENETUNREACH.Error() {
			t.Errorf("lookup %+v, want network unreachable", l)
		}
	}

	// After: lo is up, seen independently of Verify's own report.
	if links, _, err = c.links(); err != nil {
		t.Fatal(err)
	}
	if lo, ok := findLoopback(links); !ok || lo.flags&unix.IFF_UP == 0 {
		t.Errorf("lo not up after Verify: %+v", links)
	}

	// Again, now without a bring-up.
	again, err := Verify(fd)
	if err != nil || !again.Denied {
		t.Errorf("second Verify = %+v, %v", again, err)
	}
}

func TestVerifyDummyLink(t *testing.T) {
	fd := nsSocket(t, "fresh")
	if err := AddDummy(fd, "probe0"); err != nil {
		t.Fatal(err)
	}
	chk, err := Verify(fd)
	if err != nil {
		t.Fatal(err)
	}
	logCheck(t, chk)
	if chk.Denied || !strings.Contains(chk.Reason, "probe0") {
		t.Fatalf("with a dummy link: denied=%v reason=%q", chk.Denied, chk.Reason)
	}
	if len(chk.Links) != 2 {
		t.Errorf("links = %+v, want lo and probe0", chk.Links)
	}
	if err := AddDummy(fd, "probe0"); !errors.Is(err, unix.EEXIST) {
		t.Errorf("AddDummy twice: %v, want EEXIST", err)
	}
	for _, name := range []string{"", "a/b", "with space", "0123456789abcdef", ".."} {
		if err := AddDummy(fd, name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("AddDummy(%q) = %v, want ErrInvalidName", name, err)
		}
	}
}

func TestVerifyNotEmpty(t *testing.T) {
	for _, tc := range []struct{ mode, want string }{
		{"addr", "addresses beyond loopback: 10.1.2.3/8 dev lo"},
		{"route4", "routes beyond loopback: default dev lo table main proto boot"},
		{"route4", "outside addresses not unreachable: 192.0.2.1: "},
		{"route6", "2001:db8::/32 dev lo table main proto boot"},
		{"blackhole", "blackhole 203.0.113.0/24 table main proto boot"},
		{"lo-local", "local 10.9.0.0/16 dev lo table local proto kernel"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			fd := nsSocket(t, tc.mode)
			chk, err := Verify(fd)
			if err != nil {
				t.Fatal(err)
			}
			if chk.Denied || !strings.Contains(chk.Reason, tc.want) {
				logCheck(t, chk)
				t.Fatalf("denied=%v reason=%q, want %q", chk.Denied, chk.Reason, tc.want)
			}
		})
	}
}

func TestVerifyHostNamespace(t *testing.T) {
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	var others []string
	for _, e := range ents {
		if e.Name() != "lo" {
			others = append(others, e.Name())
		}
	}
	if len(others) == 0 {
		t.Skip("needs a host with an interface besides lo")
	}
	chk, err := Verify(hostSocket(t, unix.NETLINK_ROUTE))
	if err != nil {
		t.Fatal(err)
	}
	logCheck(t, chk)
	if chk.Denied {
		t.Fatalf("host namespace with %v reported denied", others)
	}
	for _, name := range others {
		if !strings.Contains(chk.Reason, name) {
			t.Errorf("reason %q does not name %s", chk.Reason, name)
		}
	}
}

func TestVerifyBadFD(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	udp, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(udp)
	// A closed fd far above the ones in use, so that nothing reuses it.
	closed, err := unix.FcntlInt(uintptr(hostSocket(t, unix.NETLINK_ROUTE)), unix.F_DUPFD_CLOEXEC, 900)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(closed)

	for _, tc := range []struct {
		name string
		fd   int
		want error
	}{
		{"pipe", p[0], ErrNotNetlink},
		{"udp", udp, ErrNotNetlink},
		{"generic netlink", hostSocket(t, unix.NETLINK_GENERIC), ErrNotNetlink},
		{"closed", closed, unix.EBADF},
		{"negative", -1, unix.EBADF},
	} {
		chk, err := Verify(tc.fd)
		if !errors.Is(err, tc.want) || chk.Denied {
			t.Errorf("%s: Verify = %+v, %v; want %v", tc.name, chk, err, tc.want)
		}
		if err := AddDummy(tc.fd, "x0"); !errors.Is(err, tc.want) {
			t.Errorf("%s: AddDummy = %v; want %v", tc.name, err, tc.want)
		}
	}
}

// Replies to requests someone else left unread on the socket must not be
// mistaken for Verify's own.
func TestVerifySkipsStaleReplies(t *testing.T) {
	fd := nsSocket(t, "fresh")
	c, err := newConn(fd, time.Now().Add(Timeout))
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []uint16{unix.RTM_GETLINK, unix.RTM_GETADDR} {
		if _, err := c.send(typ, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, make([]byte, unix.SizeofIfInfomsg)); err != nil {
			t.Fatal(err)
		}
	}
	lookup := appendAttr([]byte{unix.AF_INET, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, unix.RTA_DST, []byte{127, 0, 0, 1})
	if _, err := c.send(unix.RTM_GETROUTE, unix.NLM_F_REQUEST|unix.NLM_F_ACK, lookup); err != nil {
		t.Fatal(err)
	}
	chk, err := Verify(fd)
	if err != nil || !chk.Denied {
		t.Fatalf("Verify with stale replies queued = %+v, %v", chk, err)
	}
}

// A dump someone else started and never read makes the kernel answer
// EBUSY to Verify's own dumps until it is drained.
func TestVerifyAfterUnreadDump(t *testing.T) {
	fd := nsSocket(t, "fresh")
	const n = 100 // enough links that their dump spans many datagrams
	for i := range n {
		if err := AddDummy(fd, fmt.Sprintf("d%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := newConn(fd, time.Now().Add(Timeout))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.send(unix.RTM_GETLINK, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, make([]byte, unix.SizeofIfInfomsg)); err != nil {
		t.Fatal(err)
	}
	chk, err := Verify(fd)
	if err != nil {
		t.Fatal(err)
	}
	if chk.Denied || len(chk.Links) != maxListed || !strings.Contains(chk.Reason, "and 92 more") {
		t.Errorf("denied=%v links=%d reason=%q", chk.Denied, len(chk.Links), chk.Reason)
	}
}

// Messages unicast to the socket by another socket (here one with
// CAP_NET_ADMIN, as only such can) are not the kernel's and are skipped, even
// with the right sequence number.
func TestSkipsForgedReplies(t *testing.T) {
	fd := hostSocket(t, unix.NETLINK_ROUTE)
	c, err := newConn(fd, time.Now().Add(Timeout))
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := c.links()
	if err != nil {
		t.Fatal(err)
	}
	forger := hostSocket(t, unix.NETLINK_ROUTE)
	seq := c.seq + 1
	forged := append(nlmsg(unix.RTM_NEWLINK, unix.NLM_F_MULTI, seq, c.port, linkBody(1, "lo")),
		nlmsg(unix.NLMSG_DONE, unix.NLM_F_MULTI, seq, c.port, []byte{0, 0, 0, 0})...)
	err = unix.Sendto(forger, forged, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: c.port})
	if errors.Is(err, unix.EPERM) && os.Geteuid() != 0 {
		t.Skip("needs CAP_NET_ADMIN to unicast to another netlink socket")
	}
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := c.links()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("links after a forged reply: %+v, want %+v", got, want)
	}
}

func TestTimeout(t *testing.T) {
	fd := hostSocket(t, unix.NETLINK_ROUTE)
	c, err := newConn(fd, time.Now().Add(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// NLMSG_NOOP without NLM_F_ACK: the kernel never answers.
	start := time.Now()
	_, _, err = c.roundTrip(unix.NLMSG_NOOP, unix.NLM_F_REQUEST, nil, 0)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("roundTrip = %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("timeout took %v", d)
	}
	if _, err := c.send(unix.RTM_GETLINK, unix.NLM_F_REQUEST, nil); !errors.Is(err, ErrTimeout) {
		t.Errorf("send after deadline = %v, want ErrTimeout", err)
	}
}

func BenchmarkVerify(b *testing.B) {
	fd := nsSocket(b, "lo-up")
	for b.Loop() {
		if chk, err := Verify(fd); err != nil || !chk.Denied {
			b.Fatal(chk, err)
		}
	}
}

// BenchmarkVerifyBringUp includes bringing lo up, as on a fresh namespace.
func BenchmarkVerifyBringUp(b *testing.B) {
	fd := nsSocket(b, "fresh")
	c, err := newConn(fd, time.Now().Add(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	links, _, err := c.links()
	if err != nil {
		b.Fatal(err)
	}
	req := make([]byte, unix.SizeofIfInfomsg)
	nl.PutUint32(req[4:8], uint32(links[0].index))
	nl.PutUint32(req[12:16], unix.IFF_UP) // change IFF_UP to 0: down
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if _, err := c.do(unix.RTM_NEWLINK, 0, req, 0, true); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if chk, err := Verify(fd); err != nil || !chk.Denied {
			b.Fatal(chk, err)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func hasPrefix(list []string, p string) bool {
	for _, x := range list {
		if strings.HasPrefix(x, p) {
			return true
		}
	}
	return false
}
