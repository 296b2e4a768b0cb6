#!/usr/bin/env bash
# `make serve-image`: builds the image of `psych serve`, SERVE_IMAGE_REF
# (localhost/psych-serve:dev), without a registry, from the runs' image's
# cached root (scripts/image.sh builds it where it is missing): the same
# Debian root with the same interpreter and data libraries, plus the static
# psych and psych-full at /usr/local/bin. Its command is `psych serve`; the
# manifests (deploy/kubernetes) give its flags.
#
# The archive is cached under PSYCH_SERVE_IMAGE_CACHE/<hash of the runs'
# image and psych's sources> (a warm call builds nothing) and imported
# into the containerd at CONTAINERD_ADDRESS, namespace
# SERVE_IMAGE_NAMESPACE (k8s.io: the one a kubelet's CRI reads), where
# that containerd answers. Needs root.
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
LOG_NAME=serve-image
. scripts/lib/log.sh
. scripts/lib/image.sh

GO=${GO:-go}
SERVE_IMAGE_REF=${SERVE_IMAGE_REF:-localhost/psych-serve:dev}
SERVE_IMAGE_NAMESPACE=${SERVE_IMAGE_NAMESPACE:-k8s.io}
RUNS_CACHE=${PSYCH_IMAGE_CACHE:-/var/cache/psych/image}
CACHE=${PSYCH_SERVE_IMAGE_CACHE:-/var/cache/psych/serve-image}
CONTAINERD_ADDRESS=${CONTAINERD_ADDRESS:-/run/psych-k8s/containerd/containerd.sock}

need_root

# The runs' image: its archive's one layer is the root this image builds on.
base=$(ls -d "$RUNS_CACHE"/*/image.tar 2>/dev/null | head -n 1 || true)
if [ -z "$base" ]; then
	log "no runs' image archive under $RUNS_CACHE: make image first"
	GO="$GO" ./scripts/image.sh
	base=$(ls -d "$RUNS_CACHE"/*/image.tar | head -n 1)
fi
[ -s "$base" ] || die "no runs' image archive under $RUNS_CACHE"

# The recipe: the runs' image (its cache directory is named by its own
# recipe), the Go toolchain, the module's requirements, every non-test Go
# source of the module and this script. A warm call builds nothing.
recipe=$( {
	echo "ref=$SERVE_IMAGE_REF"
	echo "$base $(stat -c '%s %Y' "$base")"
	"$GO" version
	cat go.mod go.sum scripts/serve-image.sh scripts/lib/image.sh
	find . -name '*.go' ! -name '*_test.go' -print0 | sort -z | xargs -0 sha256sum
} | sha256sum | cut -c1-16)
dir=$CACHE/$recipe
archive=$dir/image.tar
work=$(mktemp -d /var/tmp/psych-serve-image.XXXXXX)
trap 'rm -rf --one-file-system "$work"' EXIT
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
if [ ! -s "$archive" ] || [ ! -s "$dir/digest" ]; then
	# The binaries, static, as make build links them.
	log "building psych and psych-full (static)"
	"$GO" build -tags netgo,osusergo -ldflags '-linkmode=external -extldflags=-static' \
		-o "$work/bin/" ./cmd/psych ./cmd/psych-full || die "go build failed"
	root=$work/rootfs
	mkdir -p "$root"
	layer=$(tar -xOf "$base" manifest.json | sed -n 's/.*"Layers":\["\([^"]*\)"\].*/\1/p')
	[ -n "$layer" ] || die "the runs' image archive names no single layer"
	log "unpacking the runs' image root ($layer)"
	tar -xOf "$base" "$layer" | tar -xz --numeric-owner -p -C "$root" || die "unpacking the runs' root failed"
	install -m 0755 "$work/bin/psych" "$work/bin/psych-full" "$root/usr/local/bin/"
	mkdir -p "$dir"
	log "writing the image archive"
	write_image "$dir" "$root" "$SERVE_IMAGE_REF" /usr/local/bin/psych serve
	keep_image "$CACHE" "$dir"
fi
digest=$(cat "$dir/digest")
flock -u 9
log "archive $archive ($(du -h "$archive" | cut -f1)), manifest $digest"
echo "$archive" >"$CACHE/latest"

if ctr_reachable "$CONTAINERD_ADDRESS"; then
	ctr_import "containerd ($CONTAINERD_ADDRESS)" "$CONTAINERD_ADDRESS" "$SERVE_IMAGE_NAMESPACE" "$SERVE_IMAGE_REF" "$archive" "$digest"
else
	log "containerd: not reachable at $CONTAINERD_ADDRESS; the archive is built, not imported"
fi
log "done: $SERVE_IMAGE_REF"
