package bootstrap_test

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/psych-runtime/psych/bootstrap"
)

// preloaded is the frame a preloading bootstrap sends before its start
// frame.
type preloaded struct {
	Type    string   `json:"type"`
	Env     []string `json:"env"`
	All     bool     `json:"all"`
	Modules []string `json:"modules"`
	Error   *string  `json:"error"`
}

func readPreloaded(t *testing.T, r io.Reader) preloaded {
	t.Helper()
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		t.Fatalf("read the preloaded frame: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(head[:]))
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatalf("read the preloaded frame: %v", err)
	}
	var p preloaded
	if err := json.Unmarshal(body, &p); err != nil || p.Type != "preloaded" {
		t.Fatalf("not a preloaded frame: %s (%v)", body, err)
	}
	return p
}

// TestPreload: the bootstrap imports the modules before its start frame,
// with what they print sent nowhere (this prints the Zen of Python), and
// reports what they read from os.environ (pydoc reads PYTHONDOCS) and the
// packages they loaded; the program then finds them in sys.modules and
// its own output alone on stdout.
func TestPreload(t *testing.T) {
	hostEnd, childEnd := socketpair(t)
	hostEnd.SetDeadline(time.Now().Add(60 * time.Second))
	c := startChild(t, append(launchArgs(t), bootstrap.PreloadArgs([]string{"this", "pydoc"})...), childEnd)
	p := readPreloaded(t, hostEnd)
	if p.Error != nil || !slices.Contains(p.Env, "PYTHONDOCS") || p.All || !slices.Contains(p.Modules, "this") || !slices.Contains(p.Modules, "pydoc") {
		t.Errorf("preloaded frame %+v: want PYTHONDOCS read, this and pydoc loaded, no error", p)
	}
	o := converse(t, hostEnd, program{code: "import sys\nprint('mine')\n['this' in sys.modules, 'pydoc' in sys.modules]"})
	c.wait(t, o)
	if o.result == nil || o.result.Failure != nil {
		t.Fatalf("result %+v, stderr %q", o.result, o.stderr)
	}
	jsonEqual(t, o.result.Value, "[true, true]")
	if o.stdout != "mine\n" || o.stderr != "" {
		t.Errorf("stdout %q, stderr %q; want the program's line alone", o.stdout, o.stderr)
	}
}

// TestPreloadFails: a module that cannot be imported is reported in the
// frame, with the import's error, and the bootstrap ends with
// ExitBootstrap before any start frame.
func TestPreloadFails(t *testing.T) {
	hostEnd, childEnd := socketpair(t)
	hostEnd.SetDeadline(time.Now().Add(60 * time.Second))
	c := startChild(t, append(launchArgs(t), bootstrap.PreloadArgs([]string{"json", "psych_no_such_module"})...), childEnd)
	p := readPreloaded(t, hostEnd)
	if p.Error == nil || !strings.Contains(*p.Error, "No module named 'psych_no_such_module'") {
		t.Errorf("preloaded frame %+v: want the import's error", p)
	}
	o := &outcome{}
	c.wait(t, o)
	if o.exitCode != bootstrap.ExitBootstrap {
		t.Errorf("exit %d, want %d", o.exitCode, bootstrap.ExitBootstrap)
	}
}
