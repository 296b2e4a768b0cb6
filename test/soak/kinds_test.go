//go:build linux && cgo

package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/demotools"
	"github.com/psych-runtime/psych/test/contract"
)

// prog is one execution of a kind.
type prog struct {
	n      int    // the execution's number in the soak
	marker string // a token of this execution's own, for its processes' argv
}

// kind is a program with the outcome it must have.
type kind struct {
	name   string
	weight int
	// needsCgroup: the outcome rests on a per-run cgroup (memory_bytes);
	// the kind is left out where the backend's runs have none.
	needsCgroup bool
	limits      sandbox.Limits
	bindings    bool
	code        func(p prog) string
	// cancelBelow: the run's context is cancelled after a random delay
	// below it.
	cancelBelow time.Duration
	check       func(p prog, res *sandbox.Result, err error) error
}

// garbage is what the protocol-abuse kind sends, by execution number.
var garbage = []string{
	"send_raw(b'\\xff\\xff\\xff\\xff')\ntime.sleep(30)",
	"send_raw(b'\\x00\\x00\\x00\\x20\\xff' + os.urandom(31))\ntime.sleep(30)",
	"send_raw(b'\\x02' + os.urandom(203))\ntime.sleep(30)",
	"send_raw(b'\\x00\\x00\\x00\\x00')\ntime.sleep(30)",
	"send({'type': 'exec', 'code': 'x'})\ntime.sleep(30)",
	"send({'type': 'reply', 'id': 1, 'value': 1})\ntime.sleep(30)",
	"send({'type': 'call', 'id': 1, 'name': 'run_code', 'args': {}})\ntime.sleep(30)",
	"send({'type': 'call', 'id': 9, 'name': 'echo', 'args': {}})\nsend({'type': 'call', 'id': 9, 'name': 'echo', 'args': {}})\ntime.sleep(30)",
	"send({'type': 'result', 'value': 1, 'failure': None})\n'the real result'",
	"send_raw(b'\\x00\\x00\\x00\\x64{\"type\"')\nos._exit(0)",
}

// detachCode starts a setsid'd, double-forked sleeper tagged with m, and
// defines alive(): whether that grandchild (which writes its pid to a file
// once it has detached) runs, else what its parent wrote on stderr. The
// code then waits until it runs.
func detachCode(m string) string {
	return "import os, subprocess, sys, time\n" +
		"_ready = os.path.join(os.environ.get('TMPDIR', '/tmp'), 'orphan-" + m + "')\n" +
		"_err = open(_ready + '.err', 'wb')\n" +
		"subprocess.Popen([sys.executable, '-c', 'import os, sys, time\\nif os.fork() == 0:\\n    os.setsid()\\n" +
		"    open(sys.argv[1] + \".tmp\", \"w\").write(str(os.getpid()))\\n    os.rename(sys.argv[1] + \".tmp\", sys.argv[1])\\n" +
		"    time.sleep(300)', _ready, '" + m + "'],\n" +
		"                 start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=_err)\n" +
		"def alive():\n" +
		"    try:\n        pid = int(open(_ready).read())\n        return '" + m + "' in open(f'/proc/{pid}/cmdline').read()\n" +
		"    except (OSError, ValueError):\n        return False\n" +
		"deadline = time.time() + 10\nwhile not alive() and time.time() < deadline:\n    time.sleep(0.01)\n" +
		"def orphaned():\n    return alive() or 'no orphan: ' + open(_ready + '.err').read()\n"
}

func describe(res *sandbox.Result) string {
	if res == nil {
		return "no result"
	}
	f := "none"
	if res.Failure != nil {
		f = fmt.Sprintf("%s: %.200s", res.Failure.Type, res.Failure.Message)
	}
	return fmt.Sprintf("value %.100s, failure %s, limit_hit %q, stdout %d bytes, stderr %.300q", res.Value, f, res.LimitHit, len(res.Stdout), res.Stderr)
}

// ok checks a clean result with value want (JSON-decoded).
func ok(res *sandbox.Result, err error, want any) error {
	if err != nil || res == nil {
		return fmt.Errorf("Run: %v, %s; want a result", err, describe(res))
	}
	if res.Failure != nil || res.LimitHit != "" {
		return fmt.Errorf("unexpected failure: %s", describe(res))
	}
	var got any
	if res.Value != nil {
		if err := json.Unmarshal(res.Value, &got); err != nil {
			return fmt.Errorf("value %q is not JSON", res.Value)
		}
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("value %#v, want %#v", got, want)
	}
	return nil
}

// failed checks a failure of type typ (any if empty) with limit_hit limit.
func failed(res *sandbox.Result, err error, typ string, limit sandbox.LimitName) error {
	if err != nil || res == nil {
		return fmt.Errorf("Run: %v; want a failure result", err)
	}
	if res.Failure == nil || typ != "" && res.Failure.Type != typ || res.LimitHit != limit {
		return fmt.Errorf("%s; want failure %q, limit_hit %q", describe(res), typ, limit)
	}
	return nil
}

// noneLeft checks that no process of the run outlives it. Run returns once
// they are all killed; the kernel may take a moment more to remove them, a
// live one would stay.
func noneLeft(p prog) error {
	var left []string
	for end := time.Now().Add(goneWithin); ; time.Sleep(10 * time.Millisecond) {
		if left = contract.ProcessesWith(p.marker); len(left) == 0 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("processes of the run outlived it by %v: %v", goneWithin, left)
		}
	}
}

// goneWithin is how long a killed run's processes, or a served run's removal,
// may take to be gone.
const goneWithin = 5 * time.Second

// kinds is the soak's mix.
func kinds() []kind {
	return []kind{
		{name: "value", weight: 3,
			code: func(p prog) string { return fmt.Sprintf("sum(range(%d))", p.n) },
			check: func(p prog, res *sandbox.Result, err error) error {
				return ok(res, err, float64(p.n*(p.n-1)/2))
			}},
		{name: "stdout", weight: 2,
			code: func(p prog) string {
				return fmt.Sprintf("print('soak', %d)\nimport sys\nprint('err', file=sys.stderr)\n'x'", p.n)
			},
			check: func(p prog, res *sandbox.Result, err error) error {
				if err := ok(res, err, "x"); err != nil {
					return err
				}
				if res.Stdout != fmt.Sprintf("soak %d\n", p.n) || res.Stderr != "err\n" || res.StdoutTruncated {
					return fmt.Errorf("stdout %q, stderr %q", res.Stdout, res.Stderr)
				}
				return nil
			}},
		{name: "exception", weight: 2,
			code: func(p prog) string { return fmt.Sprintf("def f():\n    raise ValueError('soak %d')\nf()", p.n) },
			check: func(p prog, res *sandbox.Result, err error) error {
				if err := failed(res, err, "ValueError", ""); err != nil {
					return err
				}
				if res.Failure.Message != fmt.Sprintf("soak %d", p.n) || !strings.Contains(res.Failure.Traceback, "line 2") {
					return fmt.Errorf("failure %+v", *res.Failure)
				}
				return nil
			}},
		{name: "syntax", weight: 1,
			code: func(prog) string { return "x = 1\ndef f(:\n    pass" },
			check: func(p prog, res *sandbox.Result, err error) error {
				return failed(res, err, "SyntaxError", "")
			}},
		{name: "bindings", weight: 2, bindings: true,
			code: func(prog) string {
				return "try:\n    fail('soak')\nexcept BindingError as e:\n    r = str(e)\n[echo(i=k)['i'] for k in range(5)] + [r]"
			},
			check: func(p prog, res *sandbox.Result, err error) error {
				return ok(res, err, []any{0.0, 1.0, 2.0, 3.0, 4.0, "soak"})
			}},
		{name: "forkbomb", weight: 1, limits: sandbox.Limits{ProcessCount: 16, WallSeconds: 30},
			code: func(prog) string {
				return "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(30)\n        os._exit(0)"
			},
			check: func(p prog, res *sandbox.Result, err error) error {
				return failed(res, err, "", sandbox.LimitProcessCount)
			}},
		{name: "threadbomb", weight: 1, limits: sandbox.Limits{ProcessCount: 16, WallSeconds: 30},
			code: func(prog) string {
				return "import threading, time\nts = []\nwhile True:\n" +
					"    t = threading.Thread(target=time.sleep, args=(60,), daemon=True)\n    t.start()\n    ts.append(t)"
			},
			check: func(p prog, res *sandbox.Result, err error) error {
				return failed(res, err, "", sandbox.LimitProcessCount)
			}},
		{name: "flood", weight: 1,
			code: func(prog) string {
				return "import sys\nb = b'x' * (1 << 20)\nfor _ in range(8):\n    sys.stdout.buffer.write(b)\n" +
					"sys.stdout.flush()\nfor _ in range(2):\n    sys.stderr.buffer.write(b)\nsys.stderr.flush()\n'done'"
			},
			check: func(p prog, res *sandbox.Result, err error) error {
				if err := ok(res, err, "done"); err != nil {
					return err
				}
				if len(res.Stdout) != 1<<20 || !res.StdoutTruncated || len(res.Stderr) != 1<<20 || !res.StderrTruncated {
					return fmt.Errorf("flood kept %d/%d bytes (truncated %v/%v); want the 1 MiB caps",
						len(res.Stdout), len(res.Stderr), res.StdoutTruncated, res.StderrTruncated)
				}
				return nil
			}},
		{name: "orphan", weight: 2,
			code: func(p prog) string { return detachCode(p.marker) + "orphaned()" },
			check: func(p prog, res *sandbox.Result, err error) error {
				if err := ok(res, err, true); err != nil {
					return fmt.Errorf("%w (the orphan never ran inside the run?)", err)
				}
				return noneLeft(p)
			}},
		{name: "garbage", weight: 2, bindings: true, limits: sandbox.Limits{WallSeconds: 20},
			code: func(p prog) string { return contract.ChannelPrelude + garbage[p.n%len(garbage)] },
			check: func(p prog, res *sandbox.Result, err error) error {
				if err := failed(res, err, sandbox.FailureProtocol, ""); err != nil {
					return fmt.Errorf("%q: %w", garbage[p.n%len(garbage)], err)
				}
				if res.Value != nil {
					return fmt.Errorf("a protocol violation has a value: %s", res.Value)
				}
				return nil
			}},
		{name: "memhog", weight: 1, limits: sandbox.Limits{AddressSpaceBytes: 512 << 20},
			code: func(prog) string { return "b = bytearray(2 << 30)" },
			check: func(p prog, res *sandbox.Result, err error) error {
				return failed(res, err, "MemoryError", sandbox.LimitAddressSpaceBytes)
			}},
		{name: "oom", weight: 1, needsCgroup: true, limits: sandbox.Limits{MemoryBytes: 48 << 20, AddressSpaceBytes: 512 << 20},
			code: func(prog) string {
				return "b = bytearray(256 << 20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1"
			},
			check: func(p prog, res *sandbox.Result, err error) error {
				return failed(res, err, "", sandbox.LimitMemoryBytes)
			}},
		{name: "wall", weight: 1, limits: sandbox.Limits{WallSeconds: 1},
			code: func(prog) string { return "import time\ntime.sleep(60)" },
			check: func(p prog, res *sandbox.Result, err error) error {
				return failed(res, err, sandbox.FailureWallTimeout, sandbox.LimitWallSeconds)
			}},
		{name: "cancel", weight: 2, cancelBelow: 500 * time.Millisecond,
			code: func(p prog) string { return detachCode(p.marker) + "time.sleep(30)" },
			check: func(p prog, res *sandbox.Result, err error) error {
				if !errors.Is(err, context.Canceled) || res != nil {
					return fmt.Errorf("cancelled run: %v, %s; want context.Canceled and no result", err, describe(res))
				}
				return noneLeft(p)
			}},
		{name: "cancelrace", weight: 1, cancelBelow: 300 * time.Millisecond,
			code: func(p prog) string { return fmt.Sprintf("sum(range(%d))", p.n) },
			check: func(p prog, res *sandbox.Result, err error) error {
				if errors.Is(err, context.Canceled) && res == nil {
					return nil // cancelled first
				}
				return ok(res, err, float64(p.n*(p.n-1)/2))
			}},
	}
}

// bindingsFor is what a kind's request offers.
func bindingsFor(k kind) sandbox.Bindings {
	if k.bindings {
		return demotools.Bindings{}
	}
	return nil
}
