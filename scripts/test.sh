#!/usr/bin/env bash
# `make test`: the container engines and psych's image where the host can
# have them (scripts/engines.sh, scripts/image.sh; root only), the wire
# fuzzer, every package's tests under the race detector (the contract suite
# on the subprocess backend and on containerd, podman and docker), then, as
# root, the isolation tests again from an unprivileged host process. The
# daemons it started are stopped on every path. Each phase's time is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
PYTHON=${PYTHON:-/usr/bin/python3}
FUZZTIME=${FUZZTIME:-15s}
t0=$(date +%s)
phase_start=$t0
phase() {
	local now
	now=$(date +%s)
	echo "test: phase '$1' took $((now - phase_start))s (total $((now - t0))s)" >&2
	phase_start=$now
}

if [ "$(id -u)" = 0 ]; then
	trap './scripts/engines.sh stop' EXIT
	./scripts/engines.sh start
	phase engines
	GO="$GO" ./scripts/image.sh
	phase image
fi
"$GO" test -count=1 -run '^$' -fuzz FuzzDecoder -fuzztime "$FUZZTIME" ./sandbox/wire
phase fuzz
PSYCH_TEST_PYTHON=$PYTHON "$GO" test -race -count=1 -timeout 30m ./...
phase "go test -race ./..."
if [ "$(id -u)" = 0 ]; then
	GO="$GO" PYTHON="$PYTHON" ./scripts/test-unpriv.sh
	phase unprivileged
else
	echo "test: not root; the unprivileged-host pass needs root to drop privileges" >&2
fi
