#!/usr/bin/env bash
# The container engines the tests use: `engines.sh start` installs
# containerd, runc, podman and docker.io where missing, and starts containerd
# and dockerd in the background where none answers on the default socket,
# with psych's own state directories; `engines.sh stop` stops exactly the
# daemons start started (by the pids it recorded, checked against the
# process's name so a reused pid is never killed), and only once no other
# job that started or reused them is still alive: each start records its
# caller (PSYCH_ENGINES_USER, by default the calling process's pid) under
# the state directory, each stop removes its own. Needs root: elsewhere it
# says so and does nothing, and the container tests skip.
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin
STATE=${PSYCH_ENGINES_STATE:-/run/psych/engines}
CONTAINERD_ADDRESS=${CONTAINERD_ADDRESS:-/run/containerd/containerd.sock}
DOCKER_SOCK=${DOCKER_SOCK:-/var/run/docker.sock}
log() { echo "engines: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
	log "not root: the container engines are root's; the container tests will skip"
	exit 0
fi
USER_ID=${PSYCH_ENGINES_USER:-$PPID}
mkdir -p "$STATE/users"
# One start or stop at a time on this machine.
exec 9>"$STATE/lock"
flock 9

wait_for() { # what, seconds, command...
	local what=$1 secs=$2
	shift 2
	for _ in $(seq $((secs * 10))); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	log "FAIL: $what did not come up in ${secs}s"
	return 1
}

start() {
	: >"$STATE/users/$USER_ID"
	need=()
	command -v containerd >/dev/null || need+=(containerd)
	command -v runc >/dev/null || need+=(runc)
	command -v podman >/dev/null || need+=(podman)
	command -v dockerd >/dev/null || need+=(docker.io)
	if [ ${#need[@]} -gt 0 ]; then
		log "installing ${need[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >/dev/null 2>&1 || log "apt-get update reported errors (continuing)"
		apt-get install -y -qq "${need[@]}" >/dev/null
	fi
	if ctr -a "$CONTAINERD_ADDRESS" version >/dev/null 2>&1; then
		log "containerd: reusing the one at $CONTAINERD_ADDRESS"
	else
		log "containerd: starting"
		containerd 9>&- >"$STATE/containerd.log" 2>&1 &
		echo $! >"$STATE/containerd.pid"
		wait_for containerd 30 ctr -a "$CONTAINERD_ADDRESS" version
	fi
	if docker -H "unix://$DOCKER_SOCK" version >/dev/null 2>&1; then
		log "dockerd: reusing the one at $DOCKER_SOCK"
	else
		log "dockerd: starting"
		mkdir -p /var/lib/psych/docker /run/psych/docker
		dockerd --data-root /var/lib/psych/docker --exec-root /run/psych/docker \
			-H "unix://$DOCKER_SOCK" --containerd "$CONTAINERD_ADDRESS" \
			--bridge=none --iptables=false --ip-masq=false \
			--pidfile /run/psych/docker/dockerd.pid 9>&- >"$STATE/dockerd.log" 2>&1 &
		echo $! >"$STATE/dockerd.pid"
		wait_for dockerd 60 docker -H "unix://$DOCKER_SOCK" version
	fi
}

stop() {
	rm -f "$STATE/users/$USER_ID"
	# A user is alive while its process is (a named user, whose process
	# is unknown, until its own stop).
	for u in "$STATE"/users/*; do
		[ -e "$u" ] || continue
		id=${u##*/}
		if [[ $id =~ ^[0-9]+$ ]] && [ ! -d "/proc/$id" ]; then
			rm -f "$u"
			continue
		fi
		log "left running: still used by $id"
		return 0
	done
	# dockerd first: it uses containerd.
	for d in dockerd containerd; do
		f=$STATE/$d.pid
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		rm -f "$f"
		if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != "$d" ]; then
			log "$d: pid $pid is gone or not $d; nothing to stop"
			continue
		fi
		kill "$pid" 2>/dev/null || continue
		for _ in $(seq 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
		log "$d: stopped (pid $pid)"
	done
}

case ${1:-} in
start) start ;;
stop) stop ;;
*)
	echo "usage: engines.sh start|stop" >&2
	exit 2
	;;
esac
