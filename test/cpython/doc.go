// Package cpython runs modules of CPython's own test suite (Debian's
// libpython3.11-testsuite, /usr/lib/python3.11/test) inside the sandbox, on
// the subprocess backend and on containerd, beside the same modules on the
// host as an unprivileged user, and compares them. It has no API: it is
// TestCPythonSuite and the files it reads.
//
//   - runner.py runs one module through test.libregrtest (as
//     `python3 -m test -v MODULE` does) and prints every test id with its
//     outcome (ok, fail, error, skip with its reason, xfail, upass) as
//     machine-readable lines. The very same program text runs on the host
//     (`python3 -I -B prog.py`, the interpreter flags the bootstrap uses, as
//     uid 1000 in a fresh HOME/TMPDIR, with the sandbox's environment) and
//     in the sandbox (as the program).
//   - A module "behaves as on the host" when the set of failing or erroring
//     test ids (unexpected successes included) is the same on both sides. A
//     difference in skips alone is a difference too, and needs a row.
//   - Every difference must match a row of differences.txt (backend,
//     module, kind, test id pattern, reason), which README.md mirrors; only
//     deliberate restrictions belong there. A difference that reproduces
//     when its tests are run again alone, on both sides, and matches no row
//     fails the test. One that does not reproduce is reported as flaky.
//
// TestCPythonSuite skips unless PSYCH_CPYTHON_MODULES is set: "ci" (the
// eight modules CI runs, scripts/test.sh), "all" (`make cpython-suite`), or
// a comma-separated list. See README.md for the other variables and
// RESULTS.md for the last full run.
package cpython
