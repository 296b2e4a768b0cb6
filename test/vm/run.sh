#!/usr/bin/env bash
# The VM lane (`make vm-test`): builds the test binaries of VM_PACKAGES and
# runs them as root inside qemu, on Debian's cloud kernel booted with
# cgroup_no_v1=all, so the unified-hierarchy code is proven on a pure
# cgroup-v2 kernel whatever the host has. See test/vm/README.md.
#
# Environment (the Makefile sets the first five):
#   VM_PACKAGES      Go packages whose tests run in the guest; each must exist
#                    and have tests (default: ./cgroups ./sandbox/subprocess)
#   VM_RUN           -test.run regexp (default: all tests)
#   VM_BENCH         -test.bench regexp, with -test.benchtime VM_BENCHTIME
#                    (default 20x): benchmarks reported, never graded
#   VM_TIME_SCALE    PSYCH_TIME_SCALE in the guest: the tests stretch their
#                    time bounds by it under emulation (default 4)
#   VM_TIMEOUT       seconds for the whole boot, after which qemu is killed
#                    and the lane fails (default 1500)
#   GO               the go command (default: go)
#   VM_TEST_TIMEOUT  -test.timeout for each binary (default 20m)
#   VM_CGROUP        run the tests in this non-root cgroup (e.g.
#                    /psych.slice/test.service) with the controllers
#                    delegated to it, instead of in the root cgroup
#   VM_MEM, VM_SMP, VM_ACCEL   qemu -m, -smp, -accel (4G, 2, tcg)
#   VM_LOG           the console log (default: build/vm-test.log)
#   PSYCH_VM_CACHE   kernel and rootfs cache (default /var/cache/psych/vm)
#   PSYCH_VM_MIRROR  Debian mirror for debootstrap (default: the host's
#                    bookworm source in /etc/apt/sources.list*)
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin

t0=$(date +%s)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here=$repo/test/vm
cd "$repo"

GO=${GO:-go}
VM_PACKAGES=${VM_PACKAGES:-./cgroups ./sandbox/subprocess}
VM_RUN=${VM_RUN:-}
VM_BENCH=${VM_BENCH:-}
VM_BENCHTIME=${VM_BENCHTIME:-20x}
VM_TIME_SCALE=${VM_TIME_SCALE:-4}
VM_TIMEOUT=${VM_TIMEOUT:-1500}
VM_TEST_TIMEOUT=${VM_TEST_TIMEOUT:-20m}
VM_CGROUP=${VM_CGROUP:-}
VM_MEM=${VM_MEM:-4G}
VM_SMP=${VM_SMP:-2}
VM_ACCEL=${VM_ACCEL:-tcg}
VM_LOG=${VM_LOG:-$repo/build/vm-test.log}
CACHE=${PSYCH_VM_CACHE:-/var/cache/psych/vm}

SUITE=bookworm
# The view binds services, protocols, the trust store and /etc/fonts
# (fontconfig: TestViewFontconfig runs fc-list in a run).
ROOTFS_PACKAGES=python3,libseccomp2,procps,kmod,netbase,ca-certificates,fontconfig
# The tests that are the host lane's, not this one's (testutil.HostLaneOnly
# prints PSYCH-HOST-LANE-ONLY: NAME): the fallbacks' whole contract suites
# and a few hundred imports pass the per-binary timeout under TCG, and the
# rootfs has no data libraries. A test marked so that this does not match
# fails the lane.
VM_HOST_ONLY='^(TestContractRootFallback|TestContractLandlockFallback|TestDebianModulesImportInRun|TestContract[A-Za-z]*/(DataLibraries|Preload|Figures(Two|ShowTwice|Closed|OverCap|Forged|FontCache)))$'
# Bump when the rootfs recipe changes: the cache is rebuilt on a mismatch.
ROOTFS_RECIPE=3

log() { echo "vm-test: [$(($(date +%s) - t0))s] $*" >&2; }
die() {
	log "FAIL: $*"
	exit 1
}

# --- arguments ----------------------------------------------------------------
[[ $VM_TIME_SCALE =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "VM_TIME_SCALE must be a number, not '$VM_TIME_SCALE'"
[[ $VM_TIMEOUT =~ ^[0-9]+$ ]] || die "VM_TIMEOUT must be whole seconds, not '$VM_TIMEOUT'"
[[ $VM_TEST_TIMEOUT =~ ^[0-9]+(ns|us|ms|s|m|h)$ ]] || die "VM_TEST_TIMEOUT must be a Go duration such as 10m, not '$VM_TEST_TIMEOUT'"
[[ -z $VM_CGROUP || $VM_CGROUP =~ ^(/[A-Za-z0-9_.-]+)+$ ]] || die "VM_CGROUP must be an absolute cgroup path such as /psych.slice/test.service"
[[ $VM_RUN != *$'\n'* ]] || die "VM_RUN must be one line"
[[ $VM_BENCH$VM_BENCHTIME != *[$'\n'\'\"]* ]] || die "VM_BENCH and VM_BENCHTIME must be one line, without quotes"
[ "$(id -u)" = 0 ] || die "needs root (apt-get, debootstrap, and a rootfs owned by root)"
[ "$(uname -m)" = x86_64 ] || die "needs an x86_64 host (the guest is Debian amd64)"

# --- cleanup ------------------------------------------------------------------
work=""
stage=""
qpid=""
tailpid=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	[ -n "$tailpid" ] && kill "$tailpid" 2>/dev/null || true
	if [ -n "$qpid" ] && kill -0 "$qpid" 2>/dev/null; then
		log "stopping qemu (pid $qpid)"
		kill "$qpid" 2>/dev/null || true
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$qpid" 2>/dev/null || break
			sleep 0.5
		done
		kill -KILL "$qpid" 2>/dev/null || true
	fi
	[ -n "$qpid" ] && wait "$qpid" 2>/dev/null || true
	[ -z "$stage" ] || rm -rf --one-file-system "$stage"
	[ -z "$work" ] || rm -rf --one-file-system "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM HUP

# --- host packages ------------------------------------------------------------
export DEBIAN_FRONTEND=noninteractive
apt_updated=0
apt_update() {
	if [ $apt_updated = 0 ]; then
		log "apt-get update"
		apt-get update -qq >/dev/null 2>&1 || log "apt-get update reported errors (continuing with the lists it got)"
		apt_updated=1
	fi
}
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v depmod >/dev/null || need+=(kmod)
[ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || need+=(debian-archive-keyring)
if [ ${#need[@]} -gt 0 ]; then
	apt_update
	log "installing ${need[*]}"
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null || die "apt-get install ${need[*]} failed"
fi

# --- test binaries ------------------------------------------------------------
mkdir -p "$(dirname "$VM_LOG")"
mkdir -p "$repo/build"
work=$(mktemp -d "$repo/build/vm-run.XXXXXX")
mkdir -p "$work/tests"
: >"$work/tests.list"
read -r -a pkgs <<<"$VM_PACKAGES"
[ ${#pkgs[@]} -gt 0 ] || die "VM_PACKAGES is empty"
for pkg in "${pkgs[@]}"; do
	info=$("$GO" list -f '{{.Dir}}|{{len .TestGoFiles}}|{{len .XTestGoFiles}}' "$pkg" 2>&1) ||
		die "package $pkg: $(echo "$info" | tail -n 1)"
	IFS='|' read -r dir nt nx <<<"$info"
	[ $((nt + nx)) -gt 0 ] || die "package $pkg has no test files"
	rel=${dir#"$repo"/}
	[ "$rel" != "$dir" ] || die "package $pkg is outside the repository"
	name=$(echo "$rel" | tr / _).test
	log "building $pkg"
	"$GO" test -c -o "$work/tests/$name" "$pkg" || die "go test -c $pkg failed"
	printf '%s\t%s\n' "$name" "$rel" >>"$work/tests.list"
done

# --- kernel -------------------------------------------------------------------
# The versioned package that linux-image-cloud-amd64 depends on.
resolve_kernel() {
	apt-cache depends linux-image-cloud-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9].*-cloud-amd64$/ {print $2; exit}'
}
kpkg=$(resolve_kernel || true)
if [ -z "$kpkg" ]; then
	apt_update
	kpkg=$(resolve_kernel || true)
fi
kver=""
[ -n "$kpkg" ] && kver=$(apt-cache policy "$kpkg" | awk '$1 == "Candidate:" {print $2}')
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
if [ -n "$kpkg" ] && [ -n "$kver" ] && [ "$kver" != "(none)" ]; then
	kdir=$CACHE/kernel/${kpkg}_$kver
	if [ ! -e "$kdir/complete" ]; then
		log "fetching $kpkg $kver"
		dl=$(mktemp -d "$work/kernel.XXXXXX")
		chmod 0777 "$dl" # apt-get download runs as _apt where it can
		(cd "$dl" && apt-get download -qq "$kpkg=$kver" >/dev/null 2>&1) || die "apt-get download $kpkg=$kver failed"
		dpkg-deb -x "$dl"/"$kpkg"_*.deb "$dl/x"
		rm -rf "$CACHE/kernel"
		mkdir -p "$kdir/root/lib"
		cp "$dl"/x/boot/vmlinuz-* "$kdir/vmlinuz"
		cp "$dl"/x/boot/config-* "$kdir/config"
		# The modules, for what the kernel loads on demand (dummy and veth
		# links, for one); the package's postinst would run depmod.
		for m in "$dl/x/lib/modules" "$dl/x/usr/lib/modules"; do
			[ ! -d "$m" ] || mv "$m" "$kdir/root/lib/modules"
		done
		[ -d "$kdir/root/lib/modules" ] || die "$kpkg has no modules directory"
		depmod -b "$kdir/root" "$(ls "$kdir/root/lib/modules")"
		rm -rf "$dl"
		touch "$kdir/complete"
	fi
else
	# No apt metadata (offline): use the cached kernel, if any.
	kdir=$(ls -d "$CACHE"/kernel/linux-image-*_* 2>/dev/null | tail -n 1 || true)
	[ -n "$kdir" ] && [ -e "$kdir/complete" ] || die "cannot resolve linux-image-cloud-amd64 with apt-cache and no kernel is cached"
	log "cannot resolve linux-image-cloud-amd64; using the cached $(basename "$kdir")"
fi
kernel_name=$(basename "$kdir")

# --- rootfs -------------------------------------------------------------------
. "$repo/scripts/lib/debian.sh"
mirror=${PSYCH_VM_MIRROR:-$(host_mirror "$SUITE" | head -n 1)}
mirror=${mirror:-http://deb.debian.org/debian}
recipe="recipe=$ROOTFS_RECIPE suite=$SUITE variant=minbase include=$ROOTFS_PACKAGES mirror=$mirror"
if [ ! -d "$CACHE/rootfs" ] || [ "$(cat "$CACHE/rootfs.stamp" 2>/dev/null)" != "$recipe" ]; then
	log "building the rootfs: debootstrap $SUITE from $mirror (about a minute)"
	new=$CACHE/rootfs.new
	unmount_under "$new"
	rm -rf --one-file-system "$new"
	if ! debootstrap --variant=minbase --include="$ROOTFS_PACKAGES" "$SUITE" "$new" "$mirror" >"$work/debootstrap.log" 2>&1; then
		unmount_under "$new"
		tail -n 20 "$work/debootstrap.log" >&2
		die "debootstrap failed (full log above)"
	fi
	unmount_under "$new"
	rm -rf --one-file-system "$new"/var/cache/apt/archives/*.deb "$new"/var/lib/apt/lists/* "$new"/var/log/*.log
	echo psych-vm >"$new/etc/hostname"
	unmount_under "$CACHE/rootfs"
	rm -rf --one-file-system "$CACHE/rootfs" "$CACHE/rootfs.stamp"
	mv "$new" "$CACHE/rootfs"
	echo "$recipe" >"$CACHE/rootfs.stamp"
fi

# --- the per-run image --------------------------------------------------------
# The staging tree hard-links the cache, so it lives beside it (one file
# system); a run killed outright leaves one behind, removed here later.
for d in "$CACHE"/stage.*; do
	[ -d "$d" ] || continue
	kill -0 "${d##*.}" 2>/dev/null || rm -rf --one-file-system "$d"
done
stage=$CACHE/stage.$$
cp -al "$CACHE/rootfs" "$stage" # hard links: the run only adds files
mkdir -p "$stage/lib/modules" # /lib is usr/lib in bookworm
cp -al "$kdir"/root/lib/modules/* "$stage/lib/modules/"
flock -u 9
mkdir -p "$stage/psych-vm/src"
cp "$here/init.sh" "$stage/psych-vm/init"
chmod 0755 "$stage/psych-vm/init"
cp -r "$work/tests" "$work/tests.list" "$stage/psych-vm/"
printf '%s\n' "$VM_RUN" >"$stage/psych-vm/run-regexp"
cat >"$stage/psych-vm/env" <<EOF
PSYCH_TIME_SCALE=$VM_TIME_SCALE
VM_TEST_TIMEOUT=$VM_TEST_TIMEOUT
VM_CGROUP=$VM_CGROUP
VM_BENCH='$VM_BENCH'
VM_BENCHTIME=$VM_BENCHTIME
EOF
# The source tree: each binary runs in its package directory (testdata).
tar -C "$repo" --exclude=./.git --exclude=./build --exclude=./bin -cf - . | tar -C "$stage/psych-vm/src" -xf -
# Fail here, not after a boot, when the guest lacks a shared library.
while IFS=$'\t' read -r name _; do
	missing=$(chroot "$stage" /usr/bin/ldd "/psych-vm/tests/$name" 2>&1 | grep 'not found' || true)
	[ -z "$missing" ] || die "$name needs libraries the guest lacks: $missing"
done <"$work/tests.list"

size=$(($(du -sm "$stage" | cut -f1) + 1024))
img=$work/root.img
truncate -s "${size}M" "$img"
log "making the ${size} MiB image"
mkfs.ext4 -q -F -L psych-vm -d "$stage" "$img" || die "mkfs.ext4 -d failed"
rm -rf --one-file-system "$stage"
stage=""

# --- boot ---------------------------------------------------------------------
: >"$VM_LOG"
log "booting $kernel_name (accel $VM_ACCEL, ${VM_SMP} cpus, $VM_MEM, timeout ${VM_TIMEOUT}s); console: $VM_LOG"
tb=$(date +%s)
qemu-system-x86_64 \
	-accel "$VM_ACCEL" -cpu max -smp "$VM_SMP" -m "$VM_MEM" \
	-nodefaults -no-reboot -display none -nic none \
	-serial "file:$VM_LOG" \
	-kernel "$kdir/vmlinuz" \
	-append "root=/dev/nvme0n1 rootfstype=ext4 rw init=/psych-vm/init console=ttyS0 cgroup_no_v1=all panic=-1 loglevel=4" \
	-drive "file=$img,if=none,id=root,format=raw,cache=unsafe" \
	-device nvme,drive=root,serial=psych-vm \
	</dev/null >"$work/qemu.out" 2>&1 &
qpid=$!
tail -n +1 -f --pid="$qpid" "$VM_LOG" &
tailpid=$!
timed_out=0
while kill -0 "$qpid" 2>/dev/null; do
	if [ $(($(date +%s) - tb)) -ge "$VM_TIMEOUT" ]; then
		timed_out=1
		log "timeout: the guest ran for ${VM_TIMEOUT}s; killing qemu"
		kill "$qpid" 2>/dev/null || true
		break
	fi
	sleep 1
done
qrc=0
wait "$qpid" || qrc=$?
qpid=""
wait "$tailpid" 2>/dev/null || true
tailpid=""
te=$(date +%s)
if [ -s "$work/qemu.out" ]; then
	log "qemu said:"
	sed 's/^/  /' "$work/qemu.out" >&2
fi

# --- verdict ------------------------------------------------------------------
console=$(tr -d '\r' <"$VM_LOG")
result=$(grep '^PSYCH-VM-RESULT: ' <<<"$console" | tail -n 1 || true)
cg_line=$(grep '^PSYCH-VM-CGROUP: fstype=' <<<"$console" | tail -n 1 || true)
controllers=$(grep '^PSYCH-VM-CGROUP: controllers=' <<<"$console" | tail -n 1 | sed 's/^PSYCH-VM-CGROUP: controllers=//' || true)
subtree=$(grep '^PSYCH-VM-CGROUP: subtree_control=' <<<"$console" | tail -n 1 | sed 's/^PSYCH-VM-CGROUP: subtree_control=//' || true)
npass=$(grep -c -- '--- PASS' <<<"$console" || true)
nfail=$(grep -c -- '--- FAIL' <<<"$console" || true)
nskip=$(grep -c -- '--- SKIP' <<<"$console" || true)
nrun=$(grep -c -- '=== RUN' <<<"$console" || true)

problems=()
[ $timed_out = 0 ] || problems+=("timed out after ${VM_TIMEOUT}s")
if [ -z "$result" ]; then
	problems+=("no PSYCH-VM-RESULT line: the guest did not finish (qemu exit $qrc)")
else
	rc=$(sed -n 's/.* rc=\([0-9]*\).*/\1/p' <<<"$result")
	[ "$rc" = 0 ] || problems+=("a test binary exited $rc")
fi
if [[ $cg_line != *"fstype=cgroup2fs"* ]]; then
	problems+=("/sys/fs/cgroup was not cgroup2 in the guest")
elif [[ $cg_line != *"v1=refused"* ]]; then
	problems+=("the guest kernel still mounted a cgroup-v1 controller")
fi
for c in memory pids; do
	[[ " $controllers " == *" $c "* ]] || problems+=("controller $c missing from the guest's cgroup.controllers")
	[[ " $subtree " == *" $c "* ]] || problems+=("controller $c not enabled in the guest's root subtree_control")
done
[ "$nskip" = 0 ] || problems+=("$nskip test(s) skipped in the VM (none may skip there)")
while read -r name; do
	[ -n "$name" ] || continue
	[[ $name =~ $VM_HOST_ONLY ]] || problems+=("$name says it is the host lane's, and VM_HOST_ONLY does not name it")
done < <(sed -n 's/^PSYCH-HOST-LANE-ONLY: //p' <<<"$console" | sort -u)
# The runs' own attestation (TestCgroupModeAttested) must say v2 there.
if grep -q -- '^PSYCH-CGROUP-MODE: ' <<<"$console"; then
	if grep -- '^PSYCH-CGROUP-MODE: ' <<<"$console" | grep -qv -- '^PSYCH-CGROUP-MODE: v2$'; then
		problems+=("a run attested a cgroup mode other than v2")
	fi
elif [[ " $VM_PACKAGES " == *" ./sandbox/subprocess "* ]] && [ -z "$VM_RUN" ]; then
	problems+=("no run attested its cgroup mode (TestCgroupModeAttested did not print)")
fi
[ "$nrun" -gt 0 ] || problems+=("no test ran")

if [ "$nfail" -gt 0 ] || [ "$nskip" -gt 0 ]; then
	log "failed and skipped tests:"
	grep -E -- '--- (FAIL|SKIP)' <<<"$console" | sed 's/^/  /' >&2
fi
t1=$(date +%s)
summary="$npass passed, $nfail failed, $nskip skipped; ${#pkgs[@]} package(s): $VM_PACKAGES; kernel $kernel_name, cgroup2 controllers: ${controllers:-none}; boot to shutdown $((te - tb))s, total $((t1 - t0))s; console log $VM_LOG"
{
	echo
	echo "vm-test: host verdict"
	printf '  %s\n' "${problems[@]:-none}"
	echo "  $summary"
} >>"$VM_LOG"
if [ ${#problems[@]} -gt 0 ]; then
	for p in "${problems[@]}"; do log "  $p"; done
	log "FAIL: $summary"
	echo "vm-test: $npass passed, $nfail failed, $nskip skipped"
	exit 1
fi
log "PASS: $summary"
echo "vm-test: $npass passed, $nfail failed, $nskip skipped"
