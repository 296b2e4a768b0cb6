#!/usr/bin/env bash
# cluster.sh up|down|verify|env|prepare: a one-node Kubernetes cluster on this machine for
# test/k8s (make k8s-up, k8s-test, k8s-down), from Kubernetes' own sources
# (build.sh) and Debian's packages only; it never pulls an image.
#
#   prepare  builds the node's images (the pause image, psych serve's)
#         where they are not cached and imports and unpacks them once into
#         a containerd root kept under $K8S_CACHE/node-images.
#   up    builds what is missing (the five binaries; prepare, while etcd
#         and the apiserver start), then starts, each recording its pid in
#         $RUN/pids: Debian's etcd, kube-apiserver, a containerd of its own
#         (its own socket, root, state and runc root, beside the one
#         scripts/engines.sh runs, never touching it) on a root linked from
#         the prepared one, so it imports nothing, kube-controller-manager,
#         kube-scheduler and kubelet; waits for the node to be Ready. No
#         kube-proxy: the host reaches pod IPs directly.
#   down  ends what up started, by the recorded pids only (the containers'
#         shims of the lane's containerd and the processes in the lane's
#         cgroup root, which only the lane starts, included); removes its
#         mounts, cgroups, network namespaces, bridge, iptables chain,
#         sysctls (restored), state and logs. Safe after a failed or partial
#         up, and when nothing is up.
#   verify  fails, listing it, if anything of the lane is left on the host.
#   env   prints the variables the tests read (KUBECONFIG, PSYCH_K8S_*).
#
# The pods' network: a bridge (psychk8s0, 10.233.77.0/24) the host holds
# the first address of, with no gateway and no masquerade in the pods and an
# iptables chain (PSYCH-K8S) that drops whatever the pods send to anything
# but the bridge itself (answers to the host's connections aside): nothing
# of a pod leaves this machine, nor reaches the host's own services.
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
GO=${GO:-go}
K8S_VERSION=${K8S_VERSION:-v1.37.2}
K8S_CACHE=${K8S_CACHE:-/var/cache/psych/k8s}
RUN=${PSYCH_K8S_RUN:-/run/psych-k8s}
DATA=${PSYCH_K8S_DATA:-/var/lib/psych-k8s}
BIN=$K8S_CACHE/bin-$K8S_VERSION
SEEDS=$K8S_CACHE/node-images
SERVE_CACHE=${PSYCH_SERVE_IMAGE_CACHE:-/var/cache/psych/serve-image}
BRIDGE=psychk8s0
SUBNET=10.233.77.0/24
HOSTIP=10.233.77.1
SERVICES=10.233.78.0/24
CHAIN=PSYCH-K8S
CGROOT=psych-k8s
SOCK=$RUN/containerd/containerd.sock
APIPORT=16443
KCFG=$DATA/pki/admin.kubeconfig
SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"

LOG_NAME=k8s
. "$repo/scripts/lib/log.sh"
need_root

# start NAME LOG CMD...: starts CMD in a session of its own and records
# "NAME PID" in $RUN/pids.
start() {
	local name=$1 out=$2
	shift 2
	setsid "$@" </dev/null >>"$out" 2>&1 &
	echo "$name $! $(starttime $!)" >>"$RUN/pids"
	log "started $name (pid $!)"
}

# starttime PID: the process's start time (field 22 of its stat), which
# tells a recorded process from a later one with its pid.
starttime() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

wait_for() { # what seconds command...
	local what=$1 secs=$2 i
	shift 2
	for ((i = 0; i < secs * 5; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	die "$what did not come up in ${secs}s (logs: $DATA/logs)"
}

# recorded NAME: NAME's recorded pid, while it is still that process.
recorded() {
	local pid st
	read -r pid st < <(awk -v n="$1" '$1 == n {print $2, $3}' "$RUN/pids" 2>/dev/null | tail -n 1) || return 1
	[ -n "$pid" ] && [ "$(starttime "$pid")" = "$st" ] && echo "$pid"
}

alive() { recorded "$1" >/dev/null; }

kubectl() { "$BIN/kubectl" --kubeconfig "$KCFG" "$@"; }

# pki: the lane's CA, certificates and service-account key, on P-256
# (an RSA-2048 key costs about 0.4 s of CPU on the loaded machine, six of
# them 2.5 s of the start; a P-256 one 0.05 s).
pki() {
	local d=$DATA/pki
	mkdir -p "$d"
	cd "$d"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=psych-k8s-ca 2>/dev/null
	cert() { # name CN O [SAN]
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" -out "$1.csr" -subj "/CN=$2${3:+/O=$3}" 2>/dev/null
		if [ -n "${4:-}" ]; then
			printf 'subjectAltName=%s\n' "$4" >"$1.ext"
			openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 2 -extfile "$1.ext" 2>/dev/null
		else
			openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 2 2>/dev/null
		fi
	}
	cert apiserver kube-apiserver "" "IP:127.0.0.1,IP:$HOSTIP,IP:${SERVICES%.0/24}.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc"
	cert admin psych-k8s-admin system:masters
	cert kubelet system:node:localhost system:nodes
	cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
	openssl ecparam -name prime256v1 -genkey -noout -out sa.key
	openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
	kubeconfig() { # file cert
		cat >"$1" <<-EOF
			apiVersion: v1
			kind: Config
			clusters:
			- name: psych-k8s
			  cluster: {server: "https://127.0.0.1:$APIPORT", certificate-authority: "$d/ca.crt"}
			users:
			- name: u
			  user: {client-certificate: "$d/$2.crt", client-key: "$d/$2.key"}
			contexts:
			- name: c
			  context: {cluster: psych-k8s, user: u}
			current-context: c
		EOF
	}
	kubeconfig admin.kubeconfig admin
	kubeconfig kubelet.kubeconfig kubelet
	chmod 0600 ./*.key
	cd - >/dev/null
}

containerd_config() {
	mkdir -p "$RUN/cni/net.d" "$DATA/cni"
	cat >"$RUN/cni/net.d/10-psych-k8s.conflist" <<-EOF
		{"cniVersion": "0.4.0", "name": "psych-k8s", "plugins": [
		  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": false, "isDefaultGateway": false, "ipMasq": false,
		   "hairpinMode": true,
		   "ipam": {"type": "host-local", "dataDir": "$DATA/cni", "ranges": [[{"subnet": "$SUBNET", "rangeStart": "${SUBNET%.0/24}.10", "rangeEnd": "${SUBNET%.0/24}.250"}]]}},
		  {"type": "loopback"}]}
	EOF
	cat >"$RUN/containerd/config.toml" <<-EOF
		version = 2
		root = "$DATA/containerd/root"
		state = "$RUN/containerd/state"
		[grpc]
		  address = "$SOCK"
		[ttrpc]
		  address = "$RUN/containerd/containerd.sock.ttrpc"
		[plugins."io.containerd.internal.v1.opt"]
		  path = "$DATA/containerd/opt"
		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "localhost/pause:psych"
		  restrict_oom_score_adj = true
		  enable_unprivileged_ports = false
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "overlayfs"
		    default_runtime_name = "runc"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		        SystemdCgroup = false
		        Root = "$RUN/runc"
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "/usr/lib/cni"
		    conf_dir = "$RUN/cni/net.d"
	EOF
}

network() {
	if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link add "$BRIDGE" type bridge
		echo "bridge $BRIDGE" >>"$RUN/made"
	fi
	ip addr replace "$HOSTIP/24" dev "$BRIDGE"
	ip link set "$BRIDGE" up
	iptables -w -N "$CHAIN" 2>/dev/null || iptables -w -F "$CHAIN"
	echo "chain $CHAIN" >>"$RUN/made"
	iptables -w -A "$CHAIN" -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
	iptables -w -A "$CHAIN" -i "$BRIDGE" -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
	iptables -w -A "$CHAIN" -i "$BRIDGE" -j DROP
	iptables -w -A "$CHAIN" -o "$BRIDGE" ! -i "$BRIDGE" -m conntrack ! --ctstate ESTABLISHED,RELATED -j DROP
	iptables -w -C INPUT -i "$BRIDGE" -j "$CHAIN" 2>/dev/null || iptables -w -I INPUT 1 -i "$BRIDGE" -j "$CHAIN"
	iptables -w -C FORWARD -j "$CHAIN" 2>/dev/null || iptables -w -I FORWARD 1 -j "$CHAIN"
}

kubelet_config() {
	mkdir -p "$DATA/kubelet" "$DATA/pod-logs"
	cat >"$DATA/kubelet-config.yaml" <<-EOF
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		address: 127.0.0.1
		port: 10250
		readOnlyPort: 0
		healthzBindAddress: 127.0.0.1
		healthzPort: 10248
		cgroupDriver: cgroupfs
		cgroupRoot: /$CGROOT
		failCgroupV1: false
		failSwapOn: false
		protectKernelDefaults: false
		containerRuntimeEndpoint: unix://$SOCK
		podLogsDir: $DATA/pod-logs
		maxPods: 16
		serializeImagePulls: false
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
		authentication:
		  anonymous: {enabled: false}
		  webhook: {enabled: true}
		  x509: {clientCAFile: $DATA/pki/ca.crt}
		authorization: {mode: Webhook}
		tlsCertFile: $DATA/pki/apiserver.crt
		tlsPrivateKeyFile: $DATA/pki/apiserver.key
		resolvConf: /etc/resolv.conf
		registerNode: true
		nodeStatusReportFrequency: 5s
		nodeStatusUpdateFrequency: 2s
		syncFrequency: 5s
		fileCheckFrequency: 5s
	EOF
}

# prepare: the node's images, made ahead of a start: psych serve's image
# archive (scripts/serve-image.sh, cached by its recipe) and the pause
# image, imported and unpacked by a containerd of its own (its own socket,
# root and state under a temporary directory; no CRI) into a root kept
# under $SEEDS/<key>, the key naming both images and the containerd. up
# links that root into the lane's containerd (cp -al: the unpacked layers
# and blobs are shared, read only; the databases are copied), so a start
# imports nothing. CI runs it in the background while make test runs; up
# runs it too, and finds it made unless psych's code changed.
prepare() {
	local work pid serve digest key seed i c
	for c in containerd ctr; do command -v $c >/dev/null || die "$c is missing (scripts/engines.sh installs it)"; done
	work=$(mktemp -d /var/tmp/psych-k8s-prepare.XXXXXX)
	# shellcheck disable=SC2064
	trap "prepare_cleanup '$work'" EXIT
	mkdir -p "$SEEDS"
	exec 8>"$SEEDS/.lock"
	flock 8
	CONTAINERD_ADDRESS=$work/none GO="$GO" "$repo/scripts/serve-image.sh"
	serve=$(cat "$SERVE_CACHE/latest")
	digest=$(cat "$(dirname "$serve")/digest")
	[ -s "$serve" ] && [ -n "$digest" ] || die "no psych serve image archive under $SERVE_CACHE"
	key=$({
		echo "$digest"
		cat "$repo"/test/k8s/pause/*.go "$repo"/internal/cmd/mkimage/*.go "$repo"/internal/ociarchive/*.go
		containerd --version
	} | sha256sum | cut -c1-16)
	seed=$SEEDS/$key
	if [ ! -f "$seed/done" ]; then
		rm -rf --one-file-system "$seed"
		CGO_ENABLED=0 "$GO" build -C "$repo" -o "$work/pause/pause" ./test/k8s/pause
		"$GO" run -C "$repo" ./internal/cmd/mkimage -root "$work/pause" -ref localhost/pause:psych -cmd /pause \
			-empty dev -empty proc -empty sys -o "$work/pause.tar" >/dev/null
		cat >"$work/config.toml" <<-EOF
			version = 2
			root = "$seed/root"
			state = "$work/state"
			disabled_plugins = ["io.containerd.grpc.v1.cri"]
			[grpc]
			  address = "$work/containerd.sock"
			[ttrpc]
			  address = "$work/containerd.sock.ttrpc"
			[plugins."io.containerd.internal.v1.opt"]
			  path = "$work/opt"
		EOF
		setsid containerd --config "$work/config.toml" </dev/null >"$work/containerd.log" 2>&1 &
		pid=$!
		echo "$pid" >"$work/pid"
		for ((i = 0; i < 300; i++)); do
			ctr -a "$work/containerd.sock" version >/dev/null 2>&1 && break
			kill -0 "$pid" 2>/dev/null || die "the preparing containerd exited: $(tail -n 5 "$work/containerd.log")"
			sleep 0.2
		done
		log "importing and unpacking the node's images into $seed"
		ctr -a "$work/containerd.sock" -n k8s.io images import "$work/pause.tar" >/dev/null || die "importing the pause image failed"
		ctr -a "$work/containerd.sock" -n k8s.io images import "$serve" >/dev/null || die "importing psych serve's image failed"
		kill -TERM "$pid"
		wait "$pid" || true
		rm -f "$work/pid"
		touch "$seed/done"
		for i in "$SEEDS"/*/; do
			[ "${i%/}" = "$seed" ] || rm -rf --one-file-system "${i%/}"
		done
	fi
	echo "$key" >"$SEEDS/latest"
	log "prepared: the node's images in $seed"
}

prepare_cleanup() {
	local work=$1 pid
	if [ -s "$work/pid" ]; then
		read -r pid <"$work/pid"
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	awk -v a="$work/" -v b="$SEEDS/" 'index($2, a) == 1 || index($2, b) == 1 {print $2}' /proc/self/mounts | sort -r |
		while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" || true; done
	rm -rf --one-file-system "$work"
}

# seed: the lane's containerd root from the prepared one: every directory
# made anew, the unpacked layers and the blobs hard-linked (containerd
# only reads them, and removes them by unlinking), every other file (the
# databases) copied; all of it copied where the two are on different
# filesystems.
seed() {
	local key from to=$DATA/containerd/root
	key=$(cat "$SEEDS/latest" 2>/dev/null) || die "no prepared images (cluster.sh prepare)"
	from=$SEEDS/$key/root
	[ -f "$SEEDS/$key/done" ] && [ -d "$from" ] || die "no prepared images in $SEEDS/$key"
	mkdir -p "$DATA/containerd"
	if ! cp -al "$from" "$to" 2>/dev/null; then
		log "cannot link $from into $to (another filesystem?): copying it"
		rm -rf --one-file-system "$to"
		cp -a "$from" "$to"
	fi
	(cd "$from" && find . -type f ! -path './io.containerd.content.v1.content/blobs/*' \
		! -path './io.containerd.snapshotter.v1.overlayfs/snapshots/*' -print0) |
		while IFS= read -r -d '' f; do cp --remove-destination -p "$from/$f" "$to/$f"; done
	log "seeded the lane's containerd with the prepared images ($key)"
}

up() {
	[ ! -s "$RUN/pids" ] || die "a cluster is up (or a failed one is left): make k8s-down first"
	# What a fresh machine lacks, from Debian: etcd, the CNI plugins
	# (bridge, host-local, loopback) and the tools this script runs.
	local need=() c
	command -v etcd >/dev/null || need+=(etcd-server)
	[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] || need+=(containernetworking-plugins)
	for c in openssl iptables curl; do command -v $c >/dev/null || need+=($c); done
	if [ ${#need[@]} -gt 0 ]; then
		log "installing ${need[*]}"
		apt-get update -qq >/dev/null 2>&1 || log "apt-get update reported errors (continuing)"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null || die "apt-get install ${need[*]} failed"
	fi
	for c in containerd runc ctr; do command -v $c >/dev/null || die "$c is missing (scripts/engines.sh installs containerd and runc: make test runs it)"; done
	GO="$GO" K8S_VERSION=$K8S_VERSION K8S_CACHE=$K8S_CACHE "$repo/test/k8s/build.sh"
	mkdir -p "$RUN/containerd" "$DATA/logs"
	: >"$RUN/pids"
	: >"$RUN/made"
	for s in $SYSCTLS; do echo "$s $(sysctl -n "$s")"; done >"$RUN/sysctls"
	echo "$t0" >"$RUN/started"
	local L=$DATA/logs
	# The node's images (cached: made ahead by CI's background phase)
	# while etcd and the apiserver start; the containerd starts on them.
	# etcd needs none of the set-up below, the apiserver its certificates
	# and address only, the containerd and the kubelet the rest.
	(prepare) &
	local prep=$!
	start etcd "$L/etcd.log" etcd --name psych-k8s --data-dir "$DATA/etcd" \
		--listen-client-urls http://127.0.0.1:12379 --advertise-client-urls http://127.0.0.1:12379 \
		--listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
		--initial-cluster psych-k8s=http://127.0.0.1:12380
	pki
	network
	wait_for "etcd" 60 curl -sf http://127.0.0.1:12379/health
	start kube-apiserver "$L/kube-apiserver.log" "$BIN/kube-apiserver" \
		--etcd-servers=http://127.0.0.1:12379 --bind-address=127.0.0.1 --advertise-address=$HOSTIP \
		--secure-port=$APIPORT --service-cluster-ip-range=$SERVICES \
		--tls-cert-file="$DATA/pki/apiserver.crt" --tls-private-key-file="$DATA/pki/apiserver.key" \
		--client-ca-file="$DATA/pki/ca.crt" --service-account-issuer=https://kubernetes.default.svc \
		--service-account-key-file="$DATA/pki/sa.pub" --service-account-signing-key-file="$DATA/pki/sa.key" \
		--authorization-mode=Node,RBAC --allow-privileged=true \
		--kubelet-client-certificate="$DATA/pki/apiserver-kubelet-client.crt" \
		--kubelet-client-key="$DATA/pki/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types=Hostname --profiling=false
	containerd_config
	kubelet_config
	# The kubelet's cgroupRoot must exist in every hierarchy (a cpuset one
	# with its parent's cpus and mems).
	local h
	for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
		if [ -f "$h/cgroup.procs" ] && [ ! -d "$h$CGROOT" ]; then
			mkdir "$h$CGROOT"
			if [ -f "$h/cpuset.cpus" ]; then
				cat "$h/cpuset.cpus" >"$h$CGROOT/cpuset.cpus"
				cat "$h/cpuset.mems" >"$h$CGROOT/cpuset.mems"
			fi
		fi
	done
	wait "$prep" || die "preparing the node's images failed"
	seed
	start containerd "$L/containerd.log" containerd --config "$RUN/containerd/config.toml"
	wait_for "kube-apiserver" 120 "$BIN/kubectl" --kubeconfig "$KCFG" get --raw /readyz
	start kube-controller-manager "$L/kube-controller-manager.log" "$BIN/kube-controller-manager" \
		--kubeconfig="$KCFG" --authentication-kubeconfig="$KCFG" --authorization-kubeconfig="$KCFG" \
		--bind-address=127.0.0.1 --secure-port=0 --leader-elect=false --service-cluster-ip-range=$SERVICES \
		--service-account-private-key-file="$DATA/pki/sa.key" --root-ca-file="$DATA/pki/ca.crt" \
		--use-service-account-credentials=false --profiling=false
	start kube-scheduler "$L/kube-scheduler.log" "$BIN/kube-scheduler" \
		--kubeconfig="$KCFG" --authentication-kubeconfig="$KCFG" --authorization-kubeconfig="$KCFG" \
		--bind-address=127.0.0.1 --secure-port=0 --leader-elect=false --profiling=false
	wait_for "containerd" 60 ctr -a "$SOCK" version
	# --node-ip is the bridge's host address: the kubelet refuses a
	# loopback one ("nodeIP can't be loopback address") and then reports
	# no address at all, not even its Hostname, which the apiserver
	# (--kubelet-preferred-address-types=Hostname: localhost, so
	# 127.0.0.1, where the kubelet listens) needs for exec and logs.
	start kubelet "$L/kubelet.log" "$BIN/kubelet" --config="$DATA/kubelet-config.yaml" \
		--kubeconfig="$DATA/pki/kubelet.kubeconfig" --hostname-override=localhost --node-ip=$HOSTIP \
		--root-dir="$DATA/kubelet" --cert-dir="$DATA/kubelet/pki"
	wait_for "the node" 120 "$BIN/kubectl" --kubeconfig "$KCFG" get node localhost
	kubectl wait --for=condition=Ready node/localhost --timeout=180s >/dev/null || die "the node is not Ready (logs: $L)"
	log "up: node Ready ($(kubectl get node localhost -o jsonpath='{.status.nodeInfo.kubeletVersion}'))"
}

# pids_of_lane: the recorded pids, the lane's containerd's shims (their
# -address is the lane's socket) and every process in the lane's cgroup
# root (kubelet's cgroupRoot: the pods').
pids_of_lane() {
	local p f c
	if [ -f "$RUN/pids" ]; then
		while read -r _ p st; do
			if [ "$(starttime "$p")" = "$st" ]; then echo "$p"; fi
		done <"$RUN/pids"
	fi
	for p in $(grep -lsaF "$SOCK" /proc/[0-9]*/cmdline 2>/dev/null); do
		p=${p%/cmdline}
		c=
		read -r c <"$p/comm" 2>/dev/null || true
		if [ "$c" = containerd-shim ]; then echo "${p#/proc/}"; fi
	done
	for f in /sys/fs/cgroup/*/"$CGROOT" /sys/fs/cgroup/unified/"$CGROOT" /sys/fs/cgroup/"$CGROOT"; do
		if [ -d "$f" ]; then find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null || true; fi
	done
	true
}

# live: the pids read that are alive (not zombies), this script's own
# aside, once each.
live() {
	local pid st
	sort -u | while read -r pid; do
		st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
		if [ -n "$st" ] && [ "$st" != Z ] && [ "$pid" != $$ ]; then echo "$pid"; fi
	done
}

end_pid() { # pid signal
	[ -d "/proc/$1" ] || return 0
	kill "-$2" "$1" 2>/dev/null || true
}

down() {
	[ -d "$RUN" ] || [ -d "$DATA" ] || {
		log "nothing is up"
		return 0
	}
	# The pods first, gracefully (psych serve drains and ends its runs'
	# sandboxes), while the control plane is up: their Deployment and
	# ReplicaSets so none is replaced, then the pods, waited for. Not the
	# namespace: its deletion sweeps every resource type (38 s at load 20),
	# and all of it goes with etcd's data.
	if alive kube-apiserver && alive kubelet; then
		kubectl -n psych delete deployment,replicaset,pod --all --ignore-not-found --wait=true --timeout=90s >/dev/null 2>&1 || true
		log "deleted psych's pods"
	fi
	# The control plane and the node, in reverse order.
	local name pid n
	if [ -f "$RUN/pids" ]; then
		for name in kubelet kube-scheduler kube-controller-manager kube-apiserver; do
			pid=$(recorded "$name") && end_pid "$pid" TERM
		done
	fi
	# What is left in the pods, then the shims and the rest.
	for sig in TERM KILL; do
		for n in $(seq 50); do
			left=$(pids_of_lane | live)
			if [ -z "$left" ]; then break 2; fi
			if [ "$n" = 1 ]; then for pid in $left; do end_pid "$pid" "$sig"; done; fi
			sleep 0.2
		done
	done
	left=$(pids_of_lane | live)
	[ -z "$left" ] || log "WARN: still alive: $left"
	log "ended the lane's processes"
	# Mounts under the lane's directories, deepest first.
	awk -v a="$RUN/" -v b="$DATA/" 'index($2, a) == 1 || index($2, b) == 1 {print $2}' /proc/self/mounts | sort -r |
		while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" || true; done
	# Network namespaces whose interfaces hold the lane's addresses.
	for ns in /var/run/netns/cni-*; do
		[ -e "$ns" ] || continue
		if ip netns exec "${ns##*/}" ip -o -4 addr 2>/dev/null | grep -q " ${SUBNET%.0/24}\."; then
			ip netns delete "${ns##*/}" 2>/dev/null || { umount "$ns" 2>/dev/null; rm -f "$ns"; }
		fi
	done
	# The lane's cgroups, deepest first.
	for f in /sys/fs/cgroup/*/"$CGROOT" /sys/fs/cgroup/unified/"$CGROOT" /sys/fs/cgroup/"$CGROOT"; do
		if [ -d "$f" ]; then find "$f" -depth -type d -exec rmdir {} \; 2>/dev/null || true; fi
	done
	# The network.
	iptables -w -D INPUT -i "$BRIDGE" -j "$CHAIN" 2>/dev/null || true
	iptables -w -D FORWARD -j "$CHAIN" 2>/dev/null || true
	iptables -w -F "$CHAIN" 2>/dev/null && iptables -w -X "$CHAIN" 2>/dev/null || true
	if ip link show "$BRIDGE" >/dev/null 2>&1; then ip link delete "$BRIDGE"; fi
	# The host's sysctls, as they were.
	if [ -f "$RUN/sysctls" ]; then
		while read -r s v; do sysctl -qw "$s=$v" 2>/dev/null || true; done <"$RUN/sysctls"
	fi
	# Pod log links the kubelet made in /var/log/containers.
	for l in /var/log/containers/*.log; do
		if [ -L "$l" ]; then case "$(readlink "$l")" in "$DATA"/*) rm -f "$l" ;; esac; fi
	done
	# The CNI result cache of the lane's network.
	rm -rf /var/lib/cni/results/psych-k8s-* 2>/dev/null || true
	rm -rf --one-file-system "$RUN" "$DATA"
	log "down"
}

# verify: nothing of the lane is left on the host (after down).
verify() {
	local left=() p
	for p in $(find /proc -mindepth 2 -maxdepth 2 -name exe -lname "$BIN/*" 2>/dev/null); do
		left+=("process ${p#/proc/}")
	done
	for p in $(grep -lsaF -e "$RUN/" -e "$DATA/" /proc/[0-9]*/cmdline 2>/dev/null); do
		p=${p%/cmdline}
		if [ "${p#/proc/}" != $$ ] && [ -d "$p" ]; then left+=("process ${p#/proc/} ($(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | cut -c1-80))"); fi
	done
	awk -v a="$RUN/" -v b="$DATA/" 'index($2, a) == 1 || index($2, b) == 1 {print "mount " $2}' /proc/self/mounts >"$RUN.verify" 2>/dev/null || true
	while read -r l; do left+=("$l"); done <"$RUN.verify"
	rm -f "$RUN.verify"
	for p in /sys/fs/cgroup/*/"$CGROOT" /sys/fs/cgroup/"$CGROOT"; do if [ -d "$p" ]; then left+=("cgroup $p"); fi; done
	if iptables -w -n -L "$CHAIN" >/dev/null 2>&1; then left+=("iptables chain $CHAIN"); fi
	if iptables -w -S 2>/dev/null | grep -q -- "-j $CHAIN"; then left+=("iptables jump to $CHAIN"); fi
	if ip link show "$BRIDGE" >/dev/null 2>&1; then left+=("bridge $BRIDGE"); fi
	if [ -e "$RUN" ]; then left+=("directory $RUN"); fi
	if [ -e "$DATA" ]; then left+=("directory $DATA"); fi
	for p in /var/run/netns/cni-*; do
		if [ -e "$p" ] && ip netns exec "${p##*/}" ip -o -4 addr 2>/dev/null | grep -q " ${SUBNET%.0/24}\."; then left+=("netns $p"); fi
	done
	if [ ${#left[@]} -gt 0 ]; then
		printf 'k8s: left on the host: %s\n' "${left[@]}" >&2
		return 1
	fi
	log "verified: nothing of the lane is left on the host"
}

case "${1:-}" in
up) up ;;
prepare) prepare ;;
down) down ;;
verify) verify ;;
env)
	echo "KUBECONFIG=$KCFG"
	echo "PSYCH_K8S_KUBECTL=$BIN/kubectl"
	;;
*)
	echo "usage: cluster.sh up|down|verify|env|prepare" >&2
	exit 2
	;;
esac
