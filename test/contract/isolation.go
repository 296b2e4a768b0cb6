package contract

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
)

// The isolation cases: each a hostile program with an asserted outcome,
// checked from inside the sandbox. Every backend runs them unchanged.

func (s *suite) isolationCases() []struct {
	name string
	fn   func(*testing.T)
} {
	return []struct {
		name string
		fn   func(*testing.T)
	}{
		{"ProcEnvironNoSecret", s.procEnviron},
		{"ProcOnlyOwn", s.procOnlyOwn},
		{"InitUnreachable", s.initUnreachable},
		{"HostPathsAbsent", s.hostPathsAbsent},
		{"ReadOnlyOutsideTmp", s.readOnlyOutsideTmp},
		{"TmpCaps", s.tmpCaps},
		{"KillEverything", s.killEverything},
		{"DenialProbes", s.denialProbes},
		{"NetworkEmpty", s.networkEmpty},
		{"ConcurrentRunsApart", s.concurrentRunsApart},
		{"WatchAcrossRuns", s.watchAcrossRuns},
		{"IDs", s.ids},
		{"Attestation", s.attestation},
	}
}

// value runs code, wants success and decodes its value into v.
func (s *suite) value(t *testing.T, code string, v any) *sandbox.Result {
	t.Helper()
	res := s.run(t, code, sandbox.Limits{}, nil)
	wantSuccess(t, res)
	if err := json.Unmarshal(res.Value, v); err != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	return res
}

func (s *suite) procEnviron(t *testing.T) {
	setenv(t, "PSYCH_CONTRACT_SECRET", "hunter2-environ")
	code := "import os\nleaks = []\nfor p in os.listdir('/proc'):\n" +
		"    if not p.isdigit(): continue\n" +
		"    try: data = open(f'/proc/{p}/environ', 'rb').read()\n" +
		"    except OSError: continue\n" +
		"    if b'hunter2-environ' in data: leaks.append(p)\nleaks"
	var leaks []string
	s.value(t, code, &leaks)
	if len(leaks) > 0 {
		t.Fatalf("a host secret shows in /proc/*/environ of %v", leaks)
	}
}

func (s *suite) procOnlyOwn(t *testing.T) {
	code := "import os\nmine = {os.getpid(), os.getppid()}\n" +
		"others = []\nfor p in os.listdir('/proc'):\n" +
		"    if p.isdigit() and int(p) not in mine:\n" +
		"        try: others.append(open(f'/proc/{p}/comm').read().strip() + ':' + p)\n" +
		"        except OSError: pass\n[sorted(mine), others]"
	var got [2]json.RawMessage
	s.value(t, code, &got)
	var others []string
	json.Unmarshal(got[1], &others)
	if len(others) > 0 {
		t.Fatalf("/proc shows processes that are not the sandbox's own: %v (own %s)", others, got[0])
	}
}

func (s *suite) initUnreachable(t *testing.T) {
	code := "import os\nout = {}\n" +
		"for name, fn in [('exe', lambda: os.readlink('/proc/1/exe')), ('fd', lambda: os.listdir('/proc/1/fd')), ('environ', lambda: open('/proc/1/environ','rb').read())]:\n" +
		"    try:\n        fn(); out[name] = 'ok'\n" +
		"    except OSError as e: out[name] = e.errno\n" +
		"import errno\n{k: (v == errno.EACCES) for k, v in out.items()}"
	var got map[string]bool
	s.value(t, code, &got)
	for _, k := range []string{"exe", "fd", "environ"} {
		if !got[k] {
			t.Errorf("/proc/1/%s: want EACCES, got %v", k, got)
		}
	}
}

func (s *suite) hostPathsAbsent(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "host-secret")
	if err := os.WriteFile(secret, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The host's own: absent from every backend.
	paths := []string{secret, dir, "/run/containerd/containerd.sock", "/var/run/docker.sock", "/run/docker.sock",
		"/run/podman/podman.sock", "/dev/mem", "/dev/kmem", "/dev/port", "/root/.bash_history"}
	if !s.b.ImageRoot {
		// A root built from nothing has none of these either; an image
		// has its own.
		paths = append(paths, "/etc/shadow", "/var", "/run", "/home", "/sys")
	}
	pj, _ := json.Marshal(paths)
	code := "import os, stat, sys\npaths = " + string(pj) + "\npresent = [p for p in paths if os.path.lexists(p)]\n" +
		"blocks = [f'/dev/{d}' for d in os.listdir('/dev') if stat.S_ISBLK(os.lstat(f'/dev/{d}').st_mode)]\n" +
		"def ls(d):\n    try: return sorted(os.listdir(d))\n    except OSError: return None\n" +
		"def readable(p):\n    try: open(p, 'rb').read(1); return True\n    except OSError: return False\n" +
		"[present, blocks, ls('/root'), sys.prefix, ls('/sys'), readable('/etc/shadow') or readable('/etc/gshadow')]"
	var got struct {
		Present, Blocks, Root, Sys []string
		Prefix                     string
		Shadow                     bool
	}
	var raw [6]json.RawMessage
	s.value(t, code, &raw)
	json.Unmarshal(raw[0], &got.Present)
	json.Unmarshal(raw[1], &got.Blocks)
	json.Unmarshal(raw[2], &got.Root)
	json.Unmarshal(raw[3], &got.Prefix)
	json.Unmarshal(raw[4], &got.Sys)
	json.Unmarshal(raw[5], &got.Shadow)
	if len(got.Present) > 0 || len(got.Blocks) > 0 {
		t.Errorf("host paths visible in the sandbox: %v; block devices: %v", got.Present, got.Blocks)
	}
	if s.b.ImageRoot {
		// The image's /root may be there, but not listable or empty; its
		// /sys an empty mount point (no sysfs); its shadow files unreadable.
		if len(got.Root) > 0 || len(got.Sys) > 0 || got.Shadow {
			t.Errorf("the image root shows /root %v, /sys %v, shadow readable %v; want nothing of either and no shadow", got.Root, got.Sys, got.Shadow)
		}
		return
	}
	// /root exists only as the way to an interpreter that lives under it.
	if got.Root != nil && !(strings.HasPrefix(got.Prefix, "/root/") && len(got.Root) == 1 && strings.HasPrefix(got.Prefix, "/root/"+got.Root[0])) {
		t.Errorf("/root is visible: %v (interpreter prefix %s)", got.Root, got.Prefix)
	}
}

func (s *suite) readOnlyOutsideTmp(t *testing.T) {
	code := "import os, sys, errno\nres = {}\n" +
		"for d in ['/', '/etc', '/usr', '/dev', '/proc/sys/kernel', sys.prefix, os.path.dirname(sys.executable), '/tmp', '/work', '/dev/shm']:\n" +
		"    p = os.path.join(d, 'psych-write-probe')\n" +
		"    try:\n        open(p, 'w').write('x'); res[d] = 'written'; os.unlink(p)\n" +
		"    except OSError as e: res[d] = errno.errorcode.get(e.errno, str(e.errno))\n" +
		"try:\n    open('/proc/sys/kernel/hostname', 'w').write('x'); res['hostname'] = 'written'\n" +
		"except OSError as e: res['hostname'] = errno.errorcode.get(e.errno, str(e.errno))\nres"
	var got map[string]string
	s.value(t, code, &got)
	for d, v := range got {
		writable := d == "/tmp" || d == sandbox.WorkDir || d == "/dev/shm"
		if writable != (v == "written") {
			t.Errorf("write in %s: %s (want writable=%v)", d, v, writable)
		}
	}
	if len(got) < 10 {
		t.Fatalf("probe incomplete: %v", got)
	}
}

func (s *suite) tmpCaps(t *testing.T) {
	// Bytes, then inodes: each must end in ENOSPC well before the host's
	// own disk or memory would.
	code := "import os, errno\nd = os.environ['TMPDIR']\nchunk = b'x' * (1 << 20)\ntotal, err = 0, None\n" +
		"for i in range(2048):\n    try:\n        with open(f'{d}/f{i}', 'wb') as f:\n            for _ in range(8):\n                f.write(chunk); total += len(chunk)\n" +
		"    except OSError as e:\n        err = e.errno; break\n" +
		"for i in range(2048):\n    try: os.unlink(f'{d}/f{i}')\n    except OSError: pass\n" +
		"n, ierr = 0, None\nfor i in range(1000000):\n    try: open(f'{d}/i{i}', 'w').close(); n += 1\n" +
		"    except OSError as e:\n        ierr = e.errno; break\n" +
		"[total, err == errno.ENOSPC, n, ierr == errno.ENOSPC]"
	res := s.run(t, code, sandbox.Limits{WallSeconds: 60}, nil)
	wantSuccess(t, res)
	dec := json.NewDecoder(strings.NewReader(string(res.Value)))
	dec.UseNumber()
	var vals []any
	if err := dec.Decode(&vals); err != nil || len(vals) != 4 {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	total, _ := vals[0].(json.Number).Int64()
	inodes, _ := vals[2].(json.Number).Int64()
	if vals[1] != true || total > 1<<30 {
		t.Errorf("filling /tmp wrote %d bytes, ENOSPC=%v: want ENOSPC from a size cap", total, vals[1])
	}
	if vals[3] != true || inodes >= 1000000 {
		t.Errorf("creating files made %d, ENOSPC=%v: want ENOSPC from an inode cap", inodes, vals[3])
	}
}

func (s *suite) killEverything(t *testing.T) {
	code := "import os, signal\nfor target in (os.getppid(), 1):\n" +
		"    try: os.kill(target, signal.SIGKILL)\n    except OSError: pass\n" +
		"os.kill(-1, signal.SIGKILL)\n'survived'"
	res := s.run(t, code, sandbox.Limits{}, nil)
	if res.Failure == nil && string(res.Value) != `"survived"` {
		t.Fatalf("unexpected result %+v", res)
	}
	// The host is unharmed: it goes on serving runs.
	again := s.run(t, "6 * 7", sandbox.Limits{}, nil)
	wantSuccess(t, again)
	if string(again.Value) != "42" {
		t.Fatalf("after the kill attempts a clean run gave %s", again.Value)
	}
}

// probeSyscalls are the numbers of the denial probes' raw syscalls, by
// architecture (Backend.Arch).
var probeSyscalls = map[string]map[string]int{
	"amd64": {"unshare": 272, "keyctl": 250, "add_key": 248, "io_uring_setup": 425},
	"arm64": {"unshare": 97, "keyctl": 219, "add_key": 217, "io_uring_setup": 425},
}

// DenialProbes is a program of syscalls that succeed for an unprivileged
// process without a filter; inside the sandbox each must fail with EPERM.
// arch numbers the raw syscalls (GOARCH names; "" is runtime.GOARCH).
func DenialProbes(arch string) string {
	if arch == "" {
		arch = runtime.GOARCH
	}
	nr := probeSyscalls[arch]
	if nr == nil {
		panic("contract: no syscall numbers for " + arch)
	}
	return fmt.Sprintf(`import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
out = {}
def sc(name, nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    out[name] = 0 if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
sc('unshare_user', %d, 0x10000000)
sc('keyctl_join', %d, 1, 0)
sc('add_key', %d, ctypes.cast(ctypes.c_char_p(b'user'), ctypes.c_void_p).value, ctypes.cast(ctypes.c_char_p(b'psych'), ctypes.c_void_p).value, ctypes.cast(ctypes.c_char_p(b'x'), ctypes.c_void_p).value, 1, -3)
params = ctypes.create_string_buffer(120)
sc('io_uring_setup', %d, 4, ctypes.cast(params, ctypes.c_void_p).value)
try:
    socket.socket(40, socket.SOCK_STREAM).close(); out['vsock'] = 0
except OSError as e:
    out['vsock'] = errno.errorcode.get(e.errno, str(e.errno))
out
`, nr["unshare"], nr["keyctl"], nr["add_key"], nr["io_uring_setup"])
}

func (s *suite) denialProbes(t *testing.T) {
	var got map[string]any
	s.value(t, DenialProbes(s.b.Arch), &got)
	for _, k := range []string{"unshare_user", "keyctl_join", "add_key", "io_uring_setup", "vsock"} {
		if got[k] != "EPERM" {
			t.Errorf("%s: got %v, want EPERM", k, got[k])
		}
	}
}

func (s *suite) networkEmpty(t *testing.T) {
	port := testutil.HostService(t)
	code := fmt.Sprintf("import socket, errno\nout = {'ifaces': socket.if_nameindex()}\n"+
		"s = socket.socket(); s.settimeout(3)\n"+
		"try: s.connect(('127.0.0.1', %d)); out['tcp'] = 'connected'\n"+
		"except OSError as e: out['tcp'] = errno.errorcode.get(e.errno, str(e))\n"+
		"u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"+
		"try: u.connect(('192.0.2.1', 53)); out['udp'] = 'connected'\n"+
		"except OSError as e: out['udp'] = errno.errorcode.get(e.errno, str(e))\nout", port)
	var got struct {
		Ifaces [][]any `json:"ifaces"`
		TCP    string  `json:"tcp"`
		UDP    string  `json:"udp"`
	}
	res := s.value(t, code, &got)
	if !reflect.DeepEqual(got.Ifaces, [][]any{{1.0, "lo"}}) {
		t.Errorf("if_nameindex() = %v, want [(1, 'lo')]", got.Ifaces)
	}
	if got.TCP == "connected" || got.UDP == "connected" {
		t.Errorf("the network reached out: tcp to host loopback %s, udp to TEST-NET %s", got.TCP, got.UDP)
	}
	if !res.NetworkDenied {
		t.Errorf("network_denied is false for a run without network")
	}
}

func (s *suite) concurrentRunsApart(t *testing.T) {
	sb := s.b.New(t, Options{})
	// Each run leaves a file and a process, waits for the other's, then
	// reports what it could see or signal of the other.
	code := func(me, other string) string {
		return "import os, time, subprocess, signal\n" +
			"open('/tmp/" + me + "', 'w').write('x')\n" +
			"p = subprocess.Popen(['sleep', '5'])\n" +
			"time.sleep(1.5)\n" +
			"seen_file = os.path.exists('/tmp/" + other + "')\n" +
			"pids = [int(x) for x in os.listdir('/proc') if x.isdigit()]\n" +
			"signalled = []\nfor pid in range(1, 4 * 4096):\n" +
			"    if pid in pids: continue\n" +
			"    try: os.kill(pid, 0); signalled.append(pid)\n    except OSError: pass\n" +
			"p.kill()\n[seen_file, signalled, len(pids)]"
	}
	var wg sync.WaitGroup
	results := make([]*sandbox.Result, 2)
	errs := make([]error, 2)
	for i, names := range [][2]string{{"run-a", "run-b"}, {"run-b", "run-a"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), s.scaled(2*time.Minute))
			defer cancel()
			results[i], errs[i] = sb.Run(ctx, sandbox.Request{Code: code(names[0], names[1]), Limits: sandbox.Limits{WallSeconds: 30}})
		}()
	}
	wg.Wait()
	for i, res := range results {
		if errs[i] != nil || res == nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		wantSuccess(t, res)
		var got []any
		json.Unmarshal(res.Value, &got)
		if len(got) != 3 || got[0] != false || len(got[1].([]any)) != 0 {
			t.Errorf("run %d saw the other run: [file seen, pids signalled, own pids] = %s", i, res.Value)
		}
	}
}

func (s *suite) ids(t *testing.T) {
	code := "import os\nm = open('/proc/self/uid_map').read().split()\n[os.getuid(), os.geteuid(), os.getgid(), m]"
	var got []any
	s.value(t, code, &got)
	if got[0] == 0.0 || got[1] == 0.0 || got[2] == 0.0 {
		t.Errorf("the program runs as uid/gid 0 inside: %v", got)
	}
	m, _ := got[3].([]any)
	if s.b.HostUIDs {
		// No user namespace: the identity map, so the inside uid is the
		// outside uid, checked non-zero above.
		if !reflect.DeepEqual(m, []any{"0", "0", "4294967295"}) {
			t.Errorf("uid map %v: declared the host's own ids, want the identity map", m)
		}
		return
	}
	// A user namespace: no line maps to the host's uid 0, and the program's
	// own uid is mapped.
	mine := false
	for i := 0; i+2 < len(m); i += 3 {
		in, _ := strconv.Atoi(m[i].(string))
		out, _ := strconv.Atoi(m[i+1].(string))
		n, _ := strconv.Atoi(m[i+2].(string))
		if out == 0 {
			t.Errorf("uid map %v maps to the host's uid 0", m)
		}
		mine = mine || float64(in) <= got[0].(float64) && got[0].(float64) < float64(in+n)
	}
	if len(m) < 3 || len(m)%3 != 0 || !mine {
		t.Errorf("uid map %v: want lines that map the program's uid %v to a non-zero outside uid", m, got[0])
	}
}

func (s *suite) attestation(t *testing.T) {
	res := s.run(t, "None", sandbox.Limits{}, nil)
	wantSuccess(t, res)
	iso := res.Isolation
	if iso == nil {
		t.Fatal("no isolation attestation in the result")
	}
	if iso.Backend != "subprocess" && iso.Backend != "container" || (iso.Backend == "container") != (iso.Engine != "") {
		t.Errorf("attestation names backend %q, engine %q", iso.Backend, iso.Engine)
	}
	for _, p := range []struct {
		name string
		st   sandbox.ProcessStatus
	}{{"init", iso.Init}, {"interpreter", iso.Interpreter}} {
		if p.st.Seccomp != 2 || p.st.NoNewPrivs != 1 || strings.Trim(p.st.CapEff, "0") != "" || p.st.CapEff == "" {
			t.Errorf("%s: seccomp %d, no_new_privs %d, cap_eff %q; want 2, 1, all zero", p.name, p.st.Seccomp, p.st.NoNewPrivs, p.st.CapEff)
		}
		for _, id := range append(append([]int{}, p.st.UID...), p.st.GID...) {
			if id == 0 {
				t.Errorf("%s runs with an outside id 0: uid %v gid %v", p.name, p.st.UID, p.st.GID)
			}
		}
	}
	want := s.b.Namespaces
	if want == nil {
		want = AllNamespaces
	}
	if !slices.Equal(iso.Namespaces, want) {
		t.Errorf("namespaces entered %v, want exactly %v", iso.Namespaces, want)
	}
	if iso.SeccompDigest == "" || iso.Network == nil || !iso.Network.Verified || !res.NetworkDenied {
		t.Errorf("attestation lacks the filter digest or a verified network check: %+v", iso)
	}
	if iso.Cgroup == "" {
		t.Errorf("attestation lacks the cgroup mode")
	}
	// RLIMIT_CPU counts the interpreter's whole life: a pooled one's, from
	// dispatch, is a second above the budget for its start-up (under 1 s).
	wantCPU := "10 11"
	if iso.Warm {
		wantCPU = "11 12"
	}
	if !strings.HasPrefix(iso.RootMount, "own:") || iso.Limits["cpu"] != wantCPU || iso.Limits["as"] == "" {
		t.Errorf("attestation: root mount %q, limits %v; want a root of its own and the run's rlimits", iso.RootMount, iso.Limits)
	}
	if iso.PythonPath == "" || !slices.Contains(iso.EnvKeys, "PATH") || !slices.Contains(iso.EnvKeys, "HOME") || !slices.IsSorted(iso.EnvKeys) {
		t.Errorf("attestation: python_path %q, env_keys %v; want the interpreter and the sorted names", iso.PythonPath, iso.EnvKeys)
	}
}
