# The steps the image scripts (scripts/image.sh, scripts/serve-image.sh)
# share: writing a root tree as a cached image archive and importing it into
# a containerd. Source it after scripts/lib/log.sh, with GO set and the
# repository as the working directory; it defines functions only.

# write_image DIR ROOT REF CMD...: writes ROOT as the image REF, with
# psych's label, PATH and emptied directories and the command CMD..., to
# DIR/image.tar.new and its manifest digest to DIR/digest.new.
write_image() {
	local dir=$1 root=$2 ref=$3 w cmd=()
	shift 3
	for w in "$@"; do
		cmd+=(-cmd "$w")
	done
	"$GO" run ./internal/cmd/mkimage -root "$root" -ref "$ref" \
		-label io.psych.python=/usr/bin/python3 \
		-env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		"${cmd[@]}" -empty dev -empty proc -empty sys -empty tmp -empty run \
		-o "$dir/image.tar.new" >"$dir/digest.new" || die "mkimage failed"
}

# keep_image CACHE DIR: puts what write_image wrote in place (DIR/image.tar,
# DIR/digest) and removes the other recipes' directories under CACHE.
keep_image() {
	local cache=$1 dir=$2 old
	mv "$dir/image.tar.new" "$dir/image.tar"
	mv "$dir/digest.new" "$dir/digest"
	for old in "$cache"/*/; do
		[ "${old%/}" = "$dir" ] || rm -rf --one-file-system "${old%/}"
	done
}

# ctr_reachable ADDRESS: true if a containerd answers at ADDRESS.
ctr_reachable() { [ -S "$1" ] && ctr -a "$1" version >/dev/null 2>&1; }

# ctr_import WHAT ADDRESS NAMESPACE REF ARCHIVE DIGEST: imports ARCHIVE into
# the containerd at ADDRESS, NAMESPACE, unless REF is there with DIGEST
# already; logs which, as WHAT.
ctr_import() {
	local what=$1 addr=$2 ns=$3 ref=$4 archive=$5 digest=$6 have
	have=$(ctr -a "$addr" -n "$ns" images ls 2>/dev/null | awk -v r="$ref" '$1 == r {print $3}')
	if [ "$have" = "$digest" ]; then
		log "$what: $ref is there"
	else
		log "$what: ctr -n $ns images import"
		ctr -a "$addr" -n "$ns" images import "$archive" >/dev/null || die "ctr images import failed"
	fi
}
