package contract

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

// watchPaths is Python that defines paths(): the shared read-only files and
// directories a run sees, as the watching run and the reading run both
// list them: the interpreter's trees (its stdlib, a package, its
// executable, the shared objects it mapped), the library roots, the host
// files the view hands in, and every other read-only mount outside /proc,
// /dev and /sys.
const watchPaths = `import json, os, sys
def paths():
    out = []
    def add(p):
        if p and os.path.exists(p):
            out.append(p)
    stdlib = os.path.dirname(os.__file__)
    for p in [stdlib, os.__file__, os.path.join(stdlib, 'lib-dynload'), os.path.dirname(json.__file__), json.__file__,
              os.path.join(os.path.dirname(json.__file__), 'decoder.py'), sys.executable, os.path.realpath(sys.executable),
              os.path.dirname(os.path.realpath(sys.executable)), '/usr', '/usr/lib', '/usr/lib64', '/usr/bin', '/lib', '/lib64',
              '/etc/ld.so.cache', '/etc/services', '/etc/protocols', '/etc/ssl/openssl.cnf', '/etc/ssl/certs',
              '/etc/ssl/certs/ca-certificates.crt', '/etc/alternatives', '/etc/matplotlibrc']:
        add(p)
    for line in open('/proc/self/maps'):
        f = line.split()
        if len(f) >= 6 and f[5].startswith('/') and not f[5].startswith(('/dev/', '/proc/', '/memfd:')):
            add(f[5])
            add(os.path.dirname(f[5]))
    for line in open('/proc/self/mountinfo'):
        f = line.split()
        mp = f[4].replace('\\040', ' ')
        if 'ro' in f[5].split(',') and mp != '/' and not mp.startswith(('/proc', '/dev', '/sys', '/tmp')):
            add(mp)
    seen, uniq = set(), []
    for p in out:
        if p not in seen:
            seen.add(p)
            uniq.append(p)
    return uniq
`

// watchProgram places inotify watches (and, where the kernel and the filter
// let a program have one, a fanotify group with inode marks) on paths(),
// calls ready() (the host runs the other program meanwhile), and reports
// every event: any before its own control reads is another process's.
const watchProgram = watchPaths + `import ctypes, errno, select, struct, time
libc = ctypes.CDLL(None, use_errno=True)
def err():
    e = ctypes.get_errno()
    return errno.errorcode.get(e, str(e))
MASK = 0x1 | 0x20 | 0x10  # IN_ACCESS | IN_OPEN | IN_CLOSE_NOWRITE
ps = paths()
fd = libc.inotify_init1(0o4000 | 0o2000000)  # IN_NONBLOCK | IN_CLOEXEC
out = {'inotify': 'ok' if fd >= 0 else err(), 'watched': [], 'unwatched': {}}
wds = {}
for p in ps:
    wd = libc.inotify_add_watch(fd, p.encode(), MASK)
    if wd < 0:
        out['unwatched'][p] = err()
    else:
        wds[wd] = p
        out['watched'].append(p)
# fanotify: an unprivileged group reports file ids and takes inode marks only.
FAN_MARKS = 0x1 | 0x20 | 0x10 | 0x40000000 | 0x08000000  # ACCESS OPEN CLOSE_NOWRITE ONDIR EVENT_ON_CHILD
fan = libc.fanotify_init(0x200 | 0x2, 0)  # FAN_REPORT_FID | FAN_NONBLOCK, O_RDONLY
out['fanotify'] = 'ok' if fan >= 0 else err()
out['fan_marked'], out['fan_other_marks'] = 0, {}
if fan >= 0:
    for p in ps:
        if libc.fanotify_mark(fan, 0x1, ctypes.c_uint64(FAN_MARKS), -100, p.encode()) == 0:
            out['fan_marked'] += 1
    for name, flag in [('mount', 0x10), ('filesystem', 0x100)]:
        r = libc.fanotify_mark(fan, 0x1 | flag, ctypes.c_uint64(0x1 | 0x20), -100, b'/usr')
        out['fan_other_marks'][name] = 'ok' if r == 0 else err()
def drain(t):
    evs = []
    end = time.monotonic() + t
    while time.monotonic() < end:
        fds = [fd] + ([fan] if fan >= 0 else [])
        r, _, _ = select.select(fds, [], [], max(0, end - time.monotonic()))
        if fd in r:
            buf = os.read(fd, 1 << 16)
            off = 0
            while off < len(buf):
                wd, mask, cookie, n = struct.unpack_from('iIII', buf, off)
                name = buf[off + 16:off + 16 + n].rstrip(b'\0').decode(errors='replace')
                off += 16 + n
                evs.append(['inotify', wds.get(wd, '?'), name, mask])
        if fan >= 0 and fan in r:
            buf = os.read(fan, 1 << 16)
            off = 0
            while off + 24 <= len(buf):
                ln, _, _, _, mask, efd, pid = struct.unpack_from('IBBHQii', buf, off)
                evs.append(['fanotify', pid, '', mask])
                off += max(ln, 24)
    return evs
out['idle'] = drain(0.3)
out['other'] = ready()
out['during'] = drain(0.3)
# The control: the program's own reads must show, or a watch that sees
# nothing proves nothing.
open(json.__file__, 'rb').read()
os.listdir(os.path.dirname(os.__file__))
own = drain(0.3)
out['own'] = sorted({e[1] + ('/' + e[2] if e[2] else '') for e in own if e[0] == 'inotify'})
out['own_fan'] = sum(1 for e in own if e[0] == 'fanotify')
out['json'] = json.__file__
out
`

// readProgram is the concurrent run: it reads every file and lists every
// directory of paths(), and starts an interpreter (exec, the loader).
const readProgram = watchPaths + `import subprocess
n = 0
for p in paths():
    try:
        if os.path.isdir(p):
            os.listdir(p)
        else:
            with open(p, 'rb') as f:
                f.read(1 << 16)
        n += 1
    except OSError:
        pass
subprocess.run([sys.executable, '-c', 'import json'], check=True)
n
`

// readyBindings is ready(): it runs the reading program on the same
// Sandbox, to its end, while the watching run waits in the call.
type readyBindings struct {
	sb      sandbox.Sandbox
	timeout time.Duration
}

func (b readyBindings) List() []sandbox.Binding { return []sandbox.Binding{{Name: "ready"}} }
func (b readyBindings) Call(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	res, err := b.sb.Run(ctx, sandbox.Request{Code: readProgram})
	if err != nil {
		return nil, err
	}
	if res.Failure != nil {
		return nil, fmt.Errorf("the reading run failed: %+v\nstderr: %s", *res.Failure, res.Stderr)
	}
	return res.Value, nil
}

// watchAcrossRuns: a run that watches the shared read-only trees with
// inotify (or fanotify) receives no event caused by another run, while its
// own reads still show.
func (s *suite) watchAcrossRuns(t *testing.T) {
	sb := s.b.New(t, Options{})
	w := WatchAcrossRuns(t, sb, sb, s.scaled(time.Minute))
	if w.Fanotify != "ok" && w.Fanotify != "EPERM" {
		t.Errorf("fanotify_init: %s, want a group or EPERM (the filter's)", w.Fanotify)
	}
}

// Watch is what the watching program of WatchAcrossRuns reports.
type Watch struct {
	// Inotify and Fanotify are "ok" or inotify_init1's and fanotify_init's
	// errno names.
	Inotify, Fanotify string
	// Watched are the paths watched; Unwatched those refused, with errno.
	Watched   []string
	Unwatched map[string]string
	// FanMarked counts fanotify inode marks; FanOtherMarks are the
	// outcomes of a mount and a filesystem mark on /usr.
	FanMarked     int               `json:"fan_marked"`
	FanOtherMarks map[string]string `json:"fan_other_marks"`
	// Idle and During are the events before and after ready() returned:
	// [api, watched path or pid, name, mask], none of them the run's own.
	Idle, During [][]any
	// Other is how many paths the other run read.
	Other float64
	// Own are the inotify paths of the run's own control reads; OwnFan
	// counts its fanotify events.
	Own    []string
	OwnFan int `json:"own_fan"`
	// JSON is json/__init__.py's path, one of the control's reads.
	JSON string
}

// WatchAcrossRuns runs a program on watcher that watches the shared
// read-only trees (inotify, and fanotify inode marks where it may have a
// group) while a program on reader, run from its binding call, reads them
// all. It fails t if the watcher received any event it did not cause, if
// a fanotify mount or filesystem mark was allowed, or if its own reads did
// not show, and returns the report.
func WatchAcrossRuns(t *testing.T, watcher, reader sandbox.Sandbox, timeout time.Duration) Watch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	defer cancel()
	res, err := watcher.Run(ctx, sandbox.Request{Code: watchProgram, Limits: sandbox.Limits{WallSeconds: 60},
		Bindings: readyBindings{sb: reader, timeout: timeout}})
	if err != nil {
		t.Fatalf("Run returned a Go error for a program's outcome: %v", err)
	}
	wantSuccess(t, res)
	var got Watch
	if err := json.Unmarshal(res.Value, &got); err != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	t.Logf("watched %d paths (%d refused: %v); fanotify %s, %d inode marks, other marks %v; the other run read %v",
		len(got.Watched), len(got.Unwatched), got.Unwatched, got.Fanotify, got.FanMarked, got.FanOtherMarks, got.Other)
	if got.Inotify != "ok" || len(got.Watched) < 8 || got.Other < 8 {
		t.Fatalf("inotify %s, watches on %v, the other run read %v paths: the probe did not get going", got.Inotify, got.Watched, got.Other)
	}
	for _, m := range got.FanOtherMarks {
		if m == "ok" {
			t.Errorf("a fanotify mount or filesystem mark was allowed: %v", got.FanOtherMarks)
		}
	}
	if foreign := append(got.Idle, got.During...); len(foreign) > 0 {
		var lines []string
		for i, e := range foreign {
			if i == 20 {
				lines = append(lines, fmt.Sprintf("... %d more", len(foreign)-i))
				break
			}
			lines = append(lines, fmt.Sprint(e))
		}
		t.Errorf("the watching run received %d events it did not cause ([api, watched path or pid, name, mask]):\n%s", len(foreign), strings.Join(lines, "\n"))
	}
	dir := got.JSON[:strings.LastIndex(got.JSON, "/")]
	ownSeen := false
	for _, p := range got.Own {
		ownSeen = ownSeen || p == got.JSON || p == dir+"/__init__.py"
	}
	if !ownSeen || got.FanMarked > 0 && got.OwnFan == 0 {
		t.Errorf("the run's own reads of %s did not show (inotify: %v; fanotify events %d): a watch that sees nothing proves nothing", got.JSON, got.Own, got.OwnFan)
	}
	return got
}
