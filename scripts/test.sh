#!/usr/bin/env bash
# `make test`: the container engines and psych's image where the host can
# have them (scripts/engines.sh, scripts/image.sh; root only; the image
# builds beside the fuzzers), the wire fuzzer and the host-core fuzzer,
# every package's tests under the race
# detector (the contract suite on the subprocess backend and on containerd,
# podman and docker), the bootstrap's tests on Python 3.8-3.13, the Python
# package's (scripts/python-client-test.sh), the soak's
# short form (SOAK_RUNS=200 per backend),
# then, as root, the isolation tests again from an unprivileged host
# process. The daemons it started are stopped on every path. Each phase's
# time is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
PYTHON=${PYTHON:-/usr/bin/python3}
# The fuzz budgets are counts of executions, not durations: with a
# duration, Go 1.26's fuzz coordinator can fail a clean run with a bare
# "context deadline exceeded" when its deadline meets a worker's call in
# flight (golang/go#75804; it failed FuzzServe so in CI). A count has no
# deadline. About 15 s, and 40-120 s (a growing cached corpus slows later
# runs on one machine).
FUZZTIME=${FUZZTIME:-500000x}
HOST_FUZZTIME=${HOST_FUZZTIME:-100000x}
SOAK_RUNS=${SOAK_RUNS:-200}
t0=$(date +%s)
phase_start=$t0
phase() {
	local now
	now=$(date +%s)
	echo "test: phase '$1' took $((now - phase_start))s (total $((now - t0))s)" >&2
	phase_start=$now
}

# The image builds in the background while the fuzzers run, which need no
# image: on a fresh machine it is about 10 minutes, mostly debootstrap's
# downloads and unpacking, and cached after that. It is waited for before
# the race pass, whose container tests run it.
image_pid=
image_log=
if [ "$(id -u)" = 0 ]; then
	image_log=$(mktemp)
	trap '[ -z "$image_pid" ] || kill -- -"$image_pid" 2>/dev/null || true; rm -f "$image_log"; ./scripts/engines.sh stop' EXIT
	./scripts/engines.sh start
	phase engines
	GO="$GO" setsid -w ./scripts/image.sh >"$image_log" 2>&1 &
	image_pid=$!
fi
"$GO" test -count=1 -run '^$' -fuzz FuzzDecoder -fuzztime "$FUZZTIME" -fuzzminimizetime 2s ./sandbox/wire
phase fuzz
# The host core driven by a fake child (sandbox/internal/host FuzzServe).
# Minimization is capped: the coordinator counts no exec while both
# workers minimize, so an uncapped one stalls the run.
"$GO" test -count=1 -run '^$' -fuzz '^FuzzServe$' -fuzztime "$HOST_FUZZTIME" -fuzzminimizetime 2s ./sandbox/internal/host
phase "fuzz host core"
# The streamed output's decoding (Request.Output) against the Result's text.
"$GO" test -count=1 -run '^$' -fuzz '^FuzzCaptureEmit$' -fuzztime "$HOST_FUZZTIME" -fuzzminimizetime 2s ./sandbox/internal/host
phase "fuzz output decoding"
# The server's request decoding and checks (a client's body is hostile).
"$GO" test -count=1 -run '^$' -fuzz '^FuzzDecodeRunRequest$' -fuzztime "${SERVER_FUZZTIME:-20000x}" -fuzzminimizetime 2s ./server
phase "fuzz server requests"
# The API's event reader, as the Go client reads a server's stream.
"$GO" test -count=1 -run '^$' -fuzz '^FuzzEventReader$' -fuzztime "${API_FUZZTIME:-50000x}" -fuzzminimizetime 2s ./api
phase "fuzz the API's event reader"
# The Go client's handling of whatever a server answers (client FuzzStream).
"$GO" test -count=1 -run '^$' -fuzz '^FuzzStream$' -fuzztime "${CLIENT_FUZZTIME:-50000x}" -fuzzminimizetime 2s ./client
phase "fuzz client"
if [ -n "$image_pid" ]; then
	rc=0
	wait "$image_pid" || rc=$?
	image_pid=
	cat "$image_log" >&2
	[ "$rc" = 0 ] || { echo "test: scripts/image.sh failed (exit $rc)" >&2; exit "$rc"; }
	phase "image (built beside the fuzzers; this is the wait)"
fi
PSYCH_TEST_PYTHON=$PYTHON "$GO" test -race -count=1 -timeout 30m ./...
phase "go test -race ./..."
# test/k8s's tests build only with -tags k8s (make k8s-test runs them on a
# cluster, not yet in CI): vetting them here keeps them compiling.
"$GO" vet -tags k8s ./test/k8s/
phase "vet test/k8s"
# The bootstrap's own tests on every Python it serves (pyenv's 3.8-3.13;
# the pass above ran them on $PYTHON). CI's machine has them all.
pyroot=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
for minor in 3.8 3.9 3.10 3.11 3.12 3.13; do
	py=$(ls -d "$pyroot"/versions/"$minor".*/bin/python3 2>/dev/null | sort -V | tail -1 || true)
	if [ -z "$py" ]; then
		if [ "${CI:-}" = true ]; then
			echo "test: CI's machine has no pyenv Python $minor under $pyroot" >&2
			exit 1
		fi
		echo "test: no pyenv Python $minor under $pyroot; the bootstrap's tests skip it" >&2
		continue
	fi
	PSYCH_TEST_PYTHON=$py "$GO" test -count=1 ./bootstrap/
done
phase "bootstrap tests on Python 3.8-3.13"
# The Python package (clients/python) on Debian's 3.11 and pyenv's 3.8 and
# 3.13, against psych built from the tree and a real psych serve.
GO="$GO" PYTHON="$PYTHON" ./scripts/python-client-test.sh
phase "python client (clients/python on 3.11, 3.8, 3.13)"
# The soak's short form (test/soak; make soak runs 2000): without the race
# detector, whose own memory would swamp the RSS bound; the ./... pass above
# skips it, saying so, and runs the soak package's fault tests.
PSYCH_SOAK_RUNS=$SOAK_RUNS PSYCH_TEST_PYTHON=$PYTHON "$GO" test -count=1 -v -run '^TestSoak' -timeout 30m ./test/soak
phase "soak ($SOAK_RUNS runs per backend)"
PSYCH_CPYTHON_MODULES=ci "$GO" test -count=1 -v -run '^TestCPythonSuite$' -timeout 30m ./test/cpython; phase "cpython suite (test/cpython, CI subset)"
if [ "$(id -u)" = 0 ]; then
	GO="$GO" PYTHON="$PYTHON" ./scripts/test-unpriv.sh
	phase unprivileged
else
	echo "test: not root; the unprivileged-host pass needs root to drop privileges" >&2
fi
