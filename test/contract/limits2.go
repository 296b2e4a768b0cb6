package contract

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/sandbox"
)

// Limits, second part: what the defaults allow, and how limit_hit rests on
// the kernel's evidence rather than on what the program says or does to
// itself.

// threadsFitDefaults: under the default limits a program starts as many
// threads as process_count allows (63 beside its main thread): each
// thread's stack, whose size glibc takes from RLIMIT_STACK, fits in the
// default address space.
func (s *suite) threadsFitDefaults(t *testing.T) {
	code := "import threading\nev = threading.Event()\nts = [threading.Thread(target=ev.wait, daemon=True) for _ in range(63)]\n" +
		"for th in ts:\n    th.start()\nn = threading.active_count()\nev.set()\nfor th in ts:\n    th.join()\nn"
	res := s.run(t, code, sandbox.Limits{}, nil)
	wantSuccess(t, res)
	if got := mustJSON(t, res.Value); got != 64.0 {
		t.Fatalf("active threads %#v, want 64", got)
	}
}

// recursionDefaultStack: the default stack still lets the main thread and
// a thread recurse to the recursion limit, and recursing past it is a
// RecursionError, not a SIGSEGV, also where each level goes through C
// (sorted with a key), which costs C stack on every level.
func (s *suite) recursionDefaultStack(t *testing.T) {
	code := "import sys, threading\n" +
		"def depth():\n    n, f = 0, sys._getframe()\n    while f:\n        n, f = n + 1, f.f_back\n    return n\n" +
		"def down(n):\n    return 0 if n == 0 else down(n - 1) + 1\n" +
		"def via_sorted(n):\n    return 0 if n == 0 else sorted([n - 1], key=via_sorted)[0] + 1\n" +
		"def probe():\n    out = [sys.getrecursionlimit()]\n" +
		"    room = sys.getrecursionlimit() - depth() - 5\n    out.append(down(room) == room)\n" +
		"    for f in (down, via_sorted):\n        try:\n            f(10 * sys.getrecursionlimit())\n            out.append('no error')\n" +
		"        except RecursionError:\n            out.append('RecursionError')\n    return out\n" +
		"r = {'main': probe()}\nth = threading.Thread(target=lambda: r.update(thread=probe()))\nth.start()\nth.join()\nr"
	res := s.run(t, code, sandbox.Limits{}, nil)
	wantSuccess(t, res)
	want := []any{1000.0, true, "RecursionError", "RecursionError"}
	got, ok := mustJSON(t, res.Value).(map[string]any)
	if !ok || !reflect.DeepEqual(got["main"], want) || !reflect.DeepEqual(got["thread"], want) {
		t.Fatalf("[recursion limit, reached it, past it plainly, past it through sorted] = %s, want %v in the main thread and in a thread", res.Value, want)
	}
}

// threadStackOutOfAddressSpace: with 8 MiB stacks a program runs out of
// address space before it reaches process_count. Where the run's pids
// cgroup shows no task refused, the kernel contradicts the program's "can't
// start new thread" as a cap on tasks: the limit is address_space_bytes,
// on the program's report. Without a cgroup that report is all there is,
// and it says process_count.
func (s *suite) threadStackOutOfAddressSpace(t *testing.T) {
	code := "import threading\nev = threading.Event()\nwhile True:\n" +
		"    threading.Thread(target=ev.wait, daemon=True).start()"
	res := s.run(t, code, sandbox.Limits{StackBytes: 8 << 20}, nil)
	f := wantFailure(t, res, "RuntimeError")
	if !strings.Contains(f.Message, "can't start new thread") {
		t.Fatalf("failure %+v, want a thread that could not start", *f)
	}
	if res.Isolation != nil && res.Isolation.Cgroup == "none" {
		wantLimit(t, res, sandbox.LimitProcessCount, sandbox.SourceProgram)
		return
	}
	if res.Usage == nil || res.Usage.PeakProcesses >= 64 {
		t.Fatalf("usage %+v: want the run below its 64 tasks", res.Usage)
	}
	wantLimit(t, res, sandbox.LimitAddressSpaceBytes, sandbox.SourceProgram)
}

// selfSentSignals: a SIGXCPU or SIGKILL the program sends itself, far below
// its CPU limit, is not the CPU limit.
func (s *suite) selfSentSignals(t *testing.T) {
	for _, sig := range []string{"SIGXCPU", "SIGKILL"} {
		code := "import os, signal, time\nt0 = time.process_time()\nwhile time.process_time() - t0 < 0.03:\n    pass\n" +
			"os.kill(os.getpid(), signal." + sig + ")\nimport time\ntime.sleep(5)"
		res := s.run(t, code, sandbox.Limits{}, nil)
		f := wantFailure(t, res, sandbox.FailureSignal)
		if string(f.Signal) != sig {
			t.Errorf("%s: failure %+v", sig, *f)
		}
		if res.LimitHit != "" {
			t.Errorf("%s sent to itself after 0.03 s of CPU: limit_hit %q/%q, usage %+v", sig, res.LimitHit, res.LimitSource, res.Usage)
		}
	}
}

// childOOMParentGoesOn: a child killed at the memory limit while the parent
// goes on to its end. Each run either completed (the result arrived: no
// failure, no limit, the kill in usage.oom_kills) or the limit ended it (a
// failure and memory_bytes), never both; which one depends on whether the
// host's kill on the OOM kill came before the result.
func (s *suite) childOOMParentGoesOn(t *testing.T) {
	code := "import subprocess, sys\n" +
		"p = subprocess.run([sys.executable, '-c', 'b = bytearray(256 << 20)\\nfor i in range(0, len(b), 4096): b[i] = 1'])\n" +
		"p.returncode"
	sb := s.b.New(t, Options{})
	completed, ended := 0, 0
	for i := 0; i < 8; i++ {
		res := s.runWith(t, sb, code, sandbox.Limits{MemoryBytes: 64 << 20}, nil)
		if res.Isolation != nil && res.Isolation.Cgroup == "none" {
			// No whole-run memory cap: the child has its 256 MiB.
			wantSuccess(t, res)
			if got := mustJSON(t, res.Value); got != 0.0 {
				t.Fatalf("without a cgroup the child exited %#v", got)
			}
			return
		}
		switch {
		case res.Failure == nil:
			completed++
			if res.LimitHit != "" || res.Usage == nil || res.Usage.OOMKills < 1 || mustJSON(t, res.Value) != -9.0 {
				t.Errorf("run %d completed: limit_hit %q, usage %+v, value %s; want no limit, the OOM kill in usage and the child's -9", i, res.LimitHit, res.Usage, res.Value)
			}
		default:
			ended++
			if res.LimitHit != sandbox.LimitMemoryBytes || res.LimitSource != sandbox.SourceKernel {
				t.Errorf("run %d failed (%+v) with limit_hit %q/%q, want memory_bytes/kernel", i, *res.Failure, res.LimitHit, res.LimitSource)
			}
		}
	}
	t.Logf("%d runs completed, %d ended by the memory limit", completed, ended)
}

// tmpfsOverflow: a shared mapping written past the cap of /dev/shm or /tmp
// dies of SIGBUS, which is tmp_bytes on the kernel's evidence (the host
// finds the tmpfs at its cap). A SIGBUS the program sends itself is not.
func (s *suite) tmpfsOverflow(t *testing.T) {
	if s.b.NoIsolation != "" {
		t.Skip("this host cannot isolate, so the run has no tmpfs of its own: " + s.b.NoIsolation)
	}
	for _, dir := range []string{"'/dev/shm'", "os.environ['TMPDIR']"} {
		code := "import mmap, os\nd = " + dir + "\nn = 4 << 20\n" +
			"for k in range(64):\n    fd = os.open(f'{d}/fill{k}', os.O_CREAT | os.O_RDWR, 0o600)\n    os.ftruncate(fd, n)\n" +
			"    m = mmap.mmap(fd, n)\n    for i in range(0, n, 4096):\n        m[i] = 1\n'no cap'"
		res := s.run(t, code, sandbox.Limits{}, nil)
		f := wantFailure(t, res, sandbox.FailureSignal)
		if f.Signal != "SIGBUS" {
			t.Fatalf("%s: failure %+v, want SIGBUS", dir, *f)
		}
		wantLimit(t, res, sandbox.LimitTmpBytes, sandbox.SourceKernel)
	}
	res := s.run(t, "import os, signal\nos.kill(os.getpid(), signal.SIGBUS)", sandbox.Limits{}, nil)
	if f := wantFailure(t, res, sandbox.FailureSignal); f.Signal != "SIGBUS" || res.LimitHit != "" {
		t.Fatalf("a SIGBUS sent to itself: failure %+v, limit_hit %q", *f, res.LimitHit)
	}
}

// hostNofileHard is this test process's own hard RLIMIT_NOFILE, which is
// the host's: the most open files a run can be given.
func hostNofileHard(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			if f := strings.Fields(rest); len(f) >= 2 {
				if n, err := strconv.Atoi(f[1]); err == nil {
					return n
				}
			}
		}
	}
	t.Fatalf("no hard open-files limit in /proc/self/limits:\n%s", b)
	return 0
}

// openFiles: RLIMIT_NOFILE is open_files, 1024 by default, can be raised to
// the host's own hard limit and no further (the request is refused), and
// running out of descriptors is an ordinary EMFILE, never a limit_hit.
func (s *suite) openFiles(t *testing.T) {
	hard := hostNofileHard(t)
	code := "import os, resource, errno\nlim = list(resource.getrlimit(resource.RLIMIT_NOFILE))\nfds, err = [], None\n" +
		"while True:\n    try:\n        fds.append(os.open('/dev/null', os.O_RDONLY))\n" +
		"    except OSError as e:\n        err = errno.errorcode[e.errno]\n        break\n" +
		"top = max(fds)\nfor fd in fds:\n    os.close(fd)\n[lim, top, err]"
	sb := s.b.New(t, Options{})
	for _, n := range []int{0, min(4096, hard)} {
		want := n
		if n == 0 {
			want = min(1024, hard)
		}
		res := s.runWith(t, sb, code, sandbox.Limits{OpenFiles: n}, nil)
		wantSuccess(t, res)
		var got []any
		if err := json.Unmarshal(res.Value, &got); err != nil || len(got) != 3 {
			t.Fatalf("open_files %d: value %s", n, res.Value)
		}
		w := float64(want)
		if !reflect.DeepEqual(got[0], []any{w, w}) || got[1] != w-1 || got[2] != "EMFILE" {
			t.Errorf("open_files %d: [rlimit, highest fd, error] = %s, want [[%d, %d], %d, EMFILE]", n, res.Value, want, want, want-1)
		}
	}
	res := s.runWith(t, sb, "import os\nfds = [os.open('/dev/null', os.O_RDONLY) for _ in range(100)]", sandbox.Limits{OpenFiles: 64}, nil)
	if f := wantFailure(t, res, "OSError"); !strings.Contains(f.Message, "Too many open files") || res.LimitHit != "" {
		t.Errorf("an uncaught EMFILE: failure %+v, limit_hit %q; want an ordinary OSError and no limit", *f, res.LimitHit)
	}
	for _, n := range []int{hard + 1, math.MaxInt32} {
		res, err := sb.Run(context.Background(), sandbox.Request{Code: "None", Limits: sandbox.Limits{OpenFiles: n}})
		if !errors.Is(err, sandbox.ErrInvalidRequest) || res != nil {
			t.Errorf("open_files %d above the host's hard limit %d: %v, %+v; want ErrInvalidRequest and no result", n, hard, err, res)
		}
	}
}
