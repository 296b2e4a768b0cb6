package testutil

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A public directory is fresh, of the mode asked for, under its parent,
// and gone with what it holds once the test ends.
func TestPublicDir(t *testing.T) {
	parent := t.TempDir()
	var dir string
	t.Run("in", func(t *testing.T) {
		dir = PublicDir(t, parent, "psych-public-", 0o711)
		if other := PublicDir(t, parent, "psych-public-", 0o755); other == dir {
			t.Fatalf("two calls gave %s", dir)
		}
		var mode os.FileMode
		fi, err := os.Stat(dir)
		if err == nil {
			mode = fi.Mode()
		}
		if err != nil || mode != os.ModeDir|0o711 || filepath.Dir(dir) != parent || !strings.HasPrefix(filepath.Base(dir), "psych-public-") {
			t.Fatalf("%s: mode %v, %v; want a 0711 directory psych-public-* in %s", dir, mode, err, parent)
		}
		if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s after its test: %v, want it gone", dir, err)
	}
}

// The host service answers every connection, by closing it, and is shut
// once the test ends.
func TestHostService(t *testing.T) {
	var port int
	t.Run("in", func(t *testing.T) {
		port = HostService(t)
		for i := 0; i < 3; i++ {
			c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(Scaled(10 * time.Second)))
			if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Errorf("connection %d: read %d, %v; want the service's close (EOF)", i, n, err)
			}
			c.Close()
		}
	})
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("port %d not free after its test: %v", port, err)
	}
	ln.Close()
}

// PyTry gives "ok" for a call that returns and the OSError's class name
// for one that raises it; any other exception is the program's.
func TestPyTry(t *testing.T) {
	py := RequirePython(t)
	out, err := exec.Command(py, "-c", PyTry+`print(t(lambda: None), t(lambda: open("/nonexistent/x")))`).CombinedOutput()
	if err != nil || string(out) != "ok FileNotFoundError\n" {
		t.Fatalf("t of a call that returns and of one that raises FileNotFoundError: %q, %v", out, err)
	}
	out, err = exec.Command(py, "-c", PyTry+`t(lambda: 1/0)`).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "ZeroDivisionError") {
		t.Fatalf("t of a call that raises ZeroDivisionError: %q, %v; want it raised", out, err)
	}
}
