#!/usr/bin/env bash
# `make image`: builds psych's container image without a registry and puts it
# where the container backend looks for it. The image is IMAGE_REF
# (localhost/psych-python:3.11): a Debian bookworm minbase with python3 at
# /usr/bin/python3 (label io.psych.python), netbase, ca-certificates, tzdata,
# libpython3.11-testsuite and the data libraries (numpy, pandas, matplotlib,
# scipy, PIL) with matplotlib's font list built at /.psych/matplotlib; docs,
# man pages, locales and apt's lists stripped; no psych code (the init and the
# bootstrap reach each container per run).
#
# The archive is cached under PSYCH_IMAGE_CACHE/<recipe hash> (default
# /var/cache/psych/image), so a clean clone on the same machine reuses it; a
# changed recipe (this script, the package list, the archive writer) builds
# anew. Then it is imported into every engine that is reachable, each with
# the container backend's defaults:
#   containerd  ctr -n psych images import           (socket CONTAINERD_ADDRESS)
#   podman      podman --root PODMAN_ROOT --runroot PODMAN_RUNROOT load
#   docker      docker -H DOCKER_HOST load
# An engine that holds the image with the same digest already is left alone.
# Needs root (debootstrap, and the engines' sockets).
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
. scripts/lib/debian.sh
LOG_NAME=image
. scripts/lib/log.sh
. scripts/lib/image.sh

GO=${GO:-go}
IMAGE_REF=${IMAGE_REF:-localhost/psych-python:3.11}
SUITE=bookworm
PACKAGES=python3,netbase,ca-certificates,tzdata,libpython3.11-testsuite,python3-numpy,python3-pandas,python3-matplotlib,python3-scipy,python3-pil
CACHE=${PSYCH_IMAGE_CACHE:-/var/cache/psych/image}
CONTAINERD_ADDRESS=${CONTAINERD_ADDRESS:-/run/containerd/containerd.sock}
CONTAINERD_NAMESPACE=${CONTAINERD_NAMESPACE:-psych}
PODMAN_ROOT=${PODMAN_ROOT:-/var/lib/psych/podman/root}
PODMAN_RUNROOT=${PODMAN_RUNROOT:-/run/psych/podman}
DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}

need_root "debootstrap, and the engines' sockets"

# --- the archive ----------------------------------------------------------------
mirror=${PSYCH_IMAGE_MIRROR:-$(host_mirror "$SUITE" | head -n 1)}
mirror=${mirror:-http://deb.debian.org/debian}
recipe=$( {
	echo "ref=$IMAGE_REF suite=$SUITE packages=$PACKAGES"
	cat scripts/image.sh scripts/lib/image.sh internal/ociarchive/ociarchive.go internal/cmd/mkimage/main.go
} | sha256sum | cut -c1-16)
dir=$CACHE/$recipe
archive=$dir/image.tar
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
if [ ! -s "$archive" ] || [ ! -s "$dir/digest" ]; then
	command -v debootstrap >/dev/null || {
		log "installing debootstrap"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null || die "apt-get install debootstrap failed"
	}
	rm -rf --one-file-system "$dir"
	mkdir -p "$dir"
	root=$dir/rootfs
	log "debootstrap $SUITE minbase with $PACKAGES from $mirror (about a minute)"
	if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$mirror" >"$dir/debootstrap.log" 2>&1; then
		unmount_under "$root"
		tail -n 20 "$dir/debootstrap.log" >&2
		die "debootstrap failed (log: $dir/debootstrap.log)"
	fi
	unmount_under "$root"
	[ -x "$root/usr/bin/python3" ] || die "the rootfs has no /usr/bin/python3"
	rm -rf --one-file-system "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
		"$root"/usr/share/locale/* "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/log/* \
		"$root"/var/cache/debconf/*-old
	# matplotlib's font list, built once here by the image's interpreter
	# over the image's own fonts (the paths every run sees: its root is this
	# tree), for every run to find read-only in /.psych/matplotlib
	# (bootstrap.FontsDir): no run builds it (docs/files-and-figures.md).
	fonts=$root/.psych/matplotlib
	mkdir -p "$fonts"
	chroot "$root" /usr/bin/env -i HOME=/nonexistent MPLCONFIGDIR=/.psych/matplotlib PATH=/usr/bin:/bin LC_ALL=C.UTF-8 \
		/usr/bin/python3 -I -B -c 'import matplotlib.font_manager' || die "building matplotlib's font list failed"
	find "$fonts" -mindepth 1 ! -name 'fontlist-v*.json' -exec rm -rf {} +
	ls "$fonts"/fontlist-v*.json >/dev/null 2>&1 || die "matplotlib wrote no font list"
	chmod 0755 "$root/.psych" "$fonts" && chmod 0644 "$fonts"/fontlist-v*.json
	log "writing the image archive"
	write_image "$dir" "$root" "$IMAGE_REF" /usr/bin/python3
	rm -rf --one-file-system "$root"
	# Older recipes' archives are not wanted any more.
	keep_image "$CACHE" "$dir"
fi
digest=$(cat "$dir/digest")
log "archive $archive ($(du -h "$archive" | cut -f1)), manifest $digest"
flock -u 9

# --- the engines ------------------------------------------------------------------
imported=0
if ctr_reachable "$CONTAINERD_ADDRESS"; then
	ctr_import containerd "$CONTAINERD_ADDRESS" "$CONTAINERD_NAMESPACE" "$IMAGE_REF" "$archive" "$digest"
	imported=$((imported + 1))
else
	log "containerd: not reachable at $CONTAINERD_ADDRESS; skipped"
fi
if command -v podman >/dev/null; then
	pm=(podman --root "$PODMAN_ROOT" --runroot "$PODMAN_RUNROOT" --cgroup-manager cgroupfs --events-backend file)
	have=$("${pm[@]}" image inspect --format '{{.Digest}}' "$IMAGE_REF" 2>/dev/null || true)
	if [ "$have" = "$digest" ]; then
		log "podman: $IMAGE_REF is there"
	else
		log "podman: load"
		"${pm[@]}" load -q -i "$archive" >/dev/null || die "podman load failed"
	fi
	imported=$((imported + 1))
else
	log "podman: not installed; skipped"
fi
if command -v docker >/dev/null && docker -H "$DOCKER_HOST" version >/dev/null 2>&1; then
	# docker load keeps no manifest digest: the image's config digest is its id.
	cfg=$(tar -xOf "$archive" manifest.json | sed -n 's/.*"Config":"blobs\/sha256\/\([0-9a-f]*\)".*/sha256:\1/p')
	have=$(docker -H "$DOCKER_HOST" image inspect --format '{{.Id}}' "$IMAGE_REF" 2>/dev/null || true)
	if [ -n "$cfg" ] && [ "$have" = "$cfg" ]; then
		log "docker: $IMAGE_REF is there"
	else
		log "docker: load"
		docker -H "$DOCKER_HOST" load -q -i "$archive" >/dev/null || die "docker load failed"
	fi
	imported=$((imported + 1))
else
	log "docker: not reachable at $DOCKER_HOST; skipped"
fi
log "done: $IMAGE_REF in $imported engine(s)"
