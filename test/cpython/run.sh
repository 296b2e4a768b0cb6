#!/usr/bin/env bash
# `make cpython-suite`: CPython's own tests (Debian's libpython3.11-testsuite),
# the whole list of modules, on the host as an unprivileged user and in the
# sandbox (subprocess backend, containerd), compared by TestCPythonSuite; it
# writes test/cpython/RESULTS.md. As root it first starts the container
# engines (scripts/engines.sh, stopped again on exit) and makes the image
# (scripts/image.sh), as `make test` does.
#   PSYCH_CPYTHON_MODULES   all (default), ci, or a comma-separated list
#   PSYCH_CPYTHON_RESULTS   where the table goes (default: RESULTS.md, for all)
#   PSYCH_CPYTHON_JOBS      runs at a time (default 3)
#   PSYCH_CPYTHON_LOGS      a directory for every run's raw stdout and stderr
#   CPYTHON_TIMEOUT         go test -timeout (default 4h)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
GO=${GO:-go}
export PSYCH_CPYTHON_MODULES=${PSYCH_CPYTHON_MODULES:-all}
if [ "$PSYCH_CPYTHON_MODULES" = all ]; then
	export PSYCH_CPYTHON_RESULTS=${PSYCH_CPYTHON_RESULTS:-$PWD/test/cpython/RESULTS.md}
fi
if [ "$(id -u)" = 0 ]; then
	trap './scripts/engines.sh stop' EXIT
	./scripts/engines.sh start
	GO="$GO" ./scripts/image.sh
fi
t0=$(date +%s)
"$GO" test -count=1 -v -run '^TestCPythonSuite$' -timeout "${CPYTHON_TIMEOUT:-4h}" ./test/cpython
echo "cpython-suite: took $(($(date +%s) - t0))s" >&2
