package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
)

func TestParseAddress(t *testing.T) {
	for _, tc := range []struct{ in, kind, where string }{
		{"unix:///run/psych.sock", "unix", "/run/psych.sock"},
		{"tcp://127.0.0.1:8080", "tcp", "127.0.0.1:8080"},
		{"tls://[::1]:8443", "tls", "[::1]:8443"},
		{"unix://rel/x.sock", "", ""},
		{"unix:///a/../b.sock", "", ""},
		{"tcp://127.0.0.1", "", ""},
		{"tcp://u:p@127.0.0.1:1", "", ""},
		{"http://127.0.0.1:1", "", ""},
		{"/run/psych.sock", "", ""},
	} {
		kind, where, err := ParseAddress(tc.in)
		if kind != tc.kind || where != tc.where || (err == nil) != (tc.kind != "") {
			t.Errorf("ParseAddress(%q) = %q, %q, %v; want %q, %q", tc.in, kind, where, err, tc.kind, tc.where)
		}
	}
}

// TestListenUnix: the socket is 0600 without a psych group, a live one is
// not taken over, a stale one (its server killed: no lock, nobody
// answering) is replaced, and Close removes it.
func TestListenUnix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "psych.sock")
	l, err := Listen("unix://"+path, ListenOptions{Group: "no-such-group-psych-test"})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v, %v; want a 0600 socket", fi.Mode(), err)
	}
	if _, err := Listen("unix://"+path, ListenOptions{}); !errors.Is(err, ErrSocketInUse) {
		t.Fatalf("a second Listen on a live socket: %v, want ErrSocketInUse", err)
	}
	l.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("the socket is left after Close: %v", err)
	}
	// A killed server's socket: bound, nobody listening, no lock held.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	l, err = Listen("unix://"+path, ListenOptions{})
	if err != nil {
		t.Fatalf("a stale socket was not replaced: %v", err)
	}
	defer l.Close()
	go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	c := unixClient(path)
	resp, err := c.Get("http://psych/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// A live socket of a server that holds no lock (an older one).
	other := filepath.Join(t.TempDir(), "other.sock")
	ln, err := net.Listen("unix", other)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := Listen("unix://"+other, ListenOptions{}); !errors.Is(err, ErrSocketInUse) {
		t.Fatalf("Listen over a live socket without a lock: %v, want ErrSocketInUse", err)
	}
	if _, err := Listen("unix:///run/psych/api.sock", ListenOptions{}); err == nil || !strings.Contains(err.Error(), "claims") {
		t.Fatalf("a socket inside /run/psych: %v, want a refusal", err)
	}
}

// TestListenUnixGroup: with the group existing, the socket is 0660 and the
// group's.
func TestListenUnixGroup(t *testing.T) {
	testutil.RequireRoot(t, "chown a socket to another group")
	gid, ok := lookupGroup("nogroup")
	if !ok {
		testutil.Unavailable(t, "no group nogroup on this host (Debian has it)")
	}
	path := filepath.Join(t.TempDir(), "psych.sock")
	l, err := Listen("unix://"+path, ListenOptions{Group: "nogroup"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o660 || int(st.Gid) != gid {
		t.Fatalf("socket mode %v gid %d; want 0660 and gid %d", fi.Mode().Perm(), st.Gid, gid)
	}
}

func unixClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
}

func init() {
	// "get" requests http://psych/ over the Unix socket arg as whatever
	// uid the test started it with, and prints the status.
	testutil.Register("server-get", func(arg string) int {
		resp, err := unixClient(arg).Get("http://psych/v1/info")
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
		return 0
	})
}

// TestAuthUnix: on a Unix socket root and the server's own uid pass, a
// uid not allowed gets 403 and reaches nothing, an allowed uid or gid
// passes, and the peer is the connection's uid.
func TestAuthUnix(t *testing.T) {
	testutil.RequireRoot(t, "connect as another uid")
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755) // testing's own, 0700
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, "psych.sock")
	l, err := Listen("unix://"+path, ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	os.Chmod(path, 0o666) // the mode is not what is tested here: the peer check is
	// The test binary lives in go's 0700 build directory: a copy the
	// other uid can execute.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "server.test")
	if b, err := os.ReadFile(self); err != nil || os.WriteFile(bin, b, 0o755) != nil {
		t.Fatalf("copy the test binary: %v", err)
	}
	reached := make(chan string, 8)
	for _, tc := range []struct {
		cfg  Config
		uid  uint32
		want int
	}{
		{Config{}, 0, 200},
		{Config{}, 1000, 403},
		{Config{AllowUIDs: []uint32{1000}}, 1000, 200},
		{Config{AllowGIDs: []uint32{1001}}, 1000, 200},
		{Config{AllowUIDs: []uint32{1002}}, 1000, 403},
	} {
		a := newAuthConfig(&tc.cfg)
		srv := &http.Server{Handler: a.authenticate(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached <- peerOf(r.Context()).Key
		})), ConnContext: connContext(l)}
		done := make(chan struct{})
		go func() { defer close(done); srv.Serve(l) }()
		cmd := testutil.HelperCommand("server-get", path)
		cmd.Path, cmd.Args[0] = bin, bin
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tc.uid, Gid: 1001}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("uid %d: %v: %s", tc.uid, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != strconv.Itoa(tc.want) {
			t.Errorf("uid %d with %+v: status %s, want %d", tc.uid, tc.cfg, got, tc.want)
		}
		select {
		case key := <-reached:
			if tc.want != 200 || key != fmt.Sprintf("uid:%d", tc.uid) {
				t.Errorf("uid %d: the handler ran for peer %q (want status %d)", tc.uid, key, tc.want)
			}
		default:
			if tc.want == 200 {
				t.Errorf("uid %d: allowed but the handler never ran", tc.uid)
			}
		}
		srv.Shutdown(context.Background())
		<-done
		// Shutdown closed the listener: reopen it.
		l.Close()
		if l, err = Listen("unix://"+path, ListenOptions{}); err != nil {
			t.Fatal(err)
		}
		os.Chmod(path, 0o666)
	}
	l.Close()
}

// TestAuthToken: TCP needs the token; none or a wrong one is 401 and
// reaches nothing; a listener without a token configured is refused.
func TestAuthToken(t *testing.T) {
	l, err := Listen("tcp://127.0.0.1:0", ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := newAuthConfig(&Config{}).checkListener(l); err == nil {
		t.Fatal("a TCP listener without a token was accepted")
	}
	a := newAuthConfig(&Config{Token: "s3cret-token-0123456789"})
	if err := a.checkListener(l); err != nil {
		t.Fatal(err)
	}
	var reached []string
	srv := &http.Server{Handler: a.authenticate(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = append(reached, peerOf(r.Context()).Key)
	}))}
	go srv.Serve(l)
	defer srv.Close()
	for _, tc := range []struct {
		header string
		want   int
	}{
		{"", 401},
		{"Bearer wrong-token-0123456789", 401},
		{"Basic s3cret-token-0123456789", 401},
		{"Bearer s3cret-token-0123456789", 200},
	} {
		req, _ := http.NewRequest("GET", "http://"+l.Addr().String()+"/v1/info", nil)
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Authorization %q: %d, want %d", tc.header, resp.StatusCode, tc.want)
		}
	}
	if len(reached) != 1 || !strings.HasPrefix(reached[0], "token:") {
		t.Errorf("the handler ran for %v; want once, for the token's peer", reached)
	}
}
