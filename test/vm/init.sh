#!/bin/sh
# PID 1 of the VM lane's guest (test/vm/run.sh copies it to /psych-vm/init).
# It mounts a pure cgroup-v2 system, runs each test binary listed in
# /psych-vm/tests.list, prints one PSYCH-VM-RESULT line and powers off.
# The host decides pass or fail from the console; this script only reports.
# POSIX sh: the guest's /bin/sh is dash.

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TMPDIR=/tmp LANG=C.UTF-8
export PSYCH_TEST_PYTHON=/usr/bin/python3
umask 022

say() { echo "PSYCH-VM: $*"; }

# The end of every path: report, flush the disk, power off. A dying PID 1
# panics instead, which panic=-1 and -no-reboot also turn into qemu's exit.
finish() {
	echo "PSYCH-VM-RESULT: rc=$1 skipped=$2 binaries=$3 uptime=$(cut -d' ' -f1 /proc/uptime)"
	sync
	echo o >/proc/sysrq-trigger
	sleep 30
	exit "$1"
}

mount -t proc -o nosuid,nodev,noexec proc /proc
mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
mount -t devtmpfs -o nosuid,mode=755 devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts -o nosuid,noexec,gid=5,mode=620,ptmxmode=000 devpts /dev/pts
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs /dev/shm # POSIX semaphores (multiprocessing)
ln -sf /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs /tmp
mount -t tmpfs -o nosuid,nodev,mode=755 tmpfs /run
# As systemd mounts it.
mount -t cgroup2 -o nosuid,nodev,noexec,nsdelegate,memory_recursiveprot cgroup2 /sys/fs/cgroup ||
	{ say "cannot mount cgroup2"; finish 1 0 0; }
hostname psych-vm

. /psych-vm/env # PSYCH_TIME_SCALE, VM_TEST_TIMEOUT, VM_CGROUP (checked by the host)
export PSYCH_TIME_SCALE
# The tests that are the host lane's say so (testutil.HostLaneOnly); the
# host checks each against VM_HOST_ONLY.
export PSYCH_TEST_LANE=vm

echo "+memory +pids +cpu" >/sys/fs/cgroup/cgroup.subtree_control ||
	{ say "cannot enable controllers in the root cgroup"; finish 1 0 0; }

# Optionally run the tests in a non-root cgroup with the controllers
# delegated to it, as a systemd service with Delegate=yes would: the root
# cgroup is exempt from the no-internal-processes rule, a service is not.
if [ -n "$VM_CGROUP" ]; then
	dir=/sys/fs/cgroup
	for part in $(echo "$VM_CGROUP" | tr / ' '); do
		dir=$dir/$part
		mkdir -p "$dir"
		[ -f "$dir/cgroup.subtree_control" ] || { say "bad cgroup $dir"; finish 1 0 0; }
		# enable in every ancestor of the leaf, so the leaf has the controllers
		[ "$dir" = "/sys/fs/cgroup$VM_CGROUP" ] ||
			echo "+memory +pids +cpu" >"$dir/cgroup.subtree_control"
	done
	echo $$ >"$dir/cgroup.procs" || { say "cannot enter $dir"; finish 1 0 0; }
fi

# What the runner checks: a cgroup2 mount with memory and pids, and v1
# controllers refused by the kernel (cgroup_no_v1=all).
mkdir -p /run/v1probe
if mount -t cgroup -o memory cgroup /run/v1probe 2>/dev/null; then
	v1=mounted
	umount /run/v1probe
else
	v1=refused
fi
say "kernel $(uname -r); cmdline: $(cat /proc/cmdline)"
echo "PSYCH-VM-CGROUP: fstype=$(stat -f -c %T /sys/fs/cgroup) v1=$v1 self=$(sed -n 's/^0:://p' /proc/self/cgroup)"
echo "PSYCH-VM-CGROUP: controllers=$(cat /sys/fs/cgroup/cgroup.controllers)"
echo "PSYCH-VM-CGROUP: subtree_control=$(cat /sys/fs/cgroup/cgroup.subtree_control)"
say "python $(/usr/bin/python3 -c 'import sys; print(sys.version.split()[0])'), $(nproc) cpus, $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo), time scale $PSYCH_TIME_SCALE"

runre=$(cat /psych-vm/run-regexp)
rc=0 skipped=0 n=0
while IFS='	' read -r name dir; do
	[ -n "$name" ] || continue
	n=$((n + 1))
	out=/run/out.$name
	start=$(cut -d' ' -f1 /proc/uptime)
	say "begin $name (in $dir)"
	(
		cd "/psych-vm/src/$dir" || exit 1
		set -- -test.v -test.count=1 -test.timeout="$VM_TEST_TIMEOUT"
		[ -z "$runre" ] || set -- "$@" -test.run "$runre"
		[ -z "$VM_BENCH" ] || set -- "$@" -test.bench "$VM_BENCH" -test.benchtime "${VM_BENCHTIME:-20x}"
		exec "/psych-vm/tests/$name" "$@"
	) </dev/null >"$out" 2>&1 &
	pid=$!
	# Stream the output to the console while the binary runs.
	tail -n +1 -f --pid=$pid "$out" &
	tailpid=$!
	wait $pid
	trc=$?
	wait $tailpid
	k=$(grep -c -- '--- SKIP' "$out")
	skipped=$((skipped + k))
	[ $trc -eq 0 ] || rc=$trc
	say "end $name rc=$trc skipped=$k seconds=$(awk -v a="$start" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN {printf "%.1f", b - a}')"
done </psych-vm/tests.list

if [ $rc -ne 0 ]; then
	say "kernel log tail (dmesg, without the indented lines of OOM reports):"
	dmesg | grep -v '^[[:space:]]' | tail -n 40
fi
finish $rc $skipped $n
