#!/usr/bin/env bash
# run.sh: `make k8s-test`. Starts the lane's cluster (cluster.sh up) unless
# one is up already, runs test/k8s's tests on it (-tags k8s), and, when it
# started the cluster, takes it down again whatever happened (cluster.sh
# down) and checks nothing of it is left (cluster.sh verify). K8S_RUN is a
# -run regexp; K8S_BENCH a -bench one (reported, never graded).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/../.."
GO=${GO:-go}
export GO
t0=$(date +%s)
mine=0
finish() {
	local rc=$?
	if [ "$mine" = 1 ]; then
		"$here/cluster.sh" down || rc=1
		"$here/cluster.sh" verify || rc=1
	fi
	echo "k8s-test: $(($(date +%s) - t0)) s in all" >&2
	exit $rc
}
trap finish EXIT
if [ ! -s "${PSYCH_K8S_RUN:-/run/psych-k8s}/pids" ]; then
	mine=1
	"$here/cluster.sh" up
	echo "k8s-test: cluster up $(($(date +%s) - t0)) s after the start" >&2
fi
eval "$("$here/cluster.sh" env | sed 's/^/export /')"
"$GO" test -tags k8s -count=1 -v -timeout 60m -run "${K8S_RUN:-.}" ${K8S_BENCH:+-bench "$K8S_BENCH" -benchtime 20x} ./test/k8s
