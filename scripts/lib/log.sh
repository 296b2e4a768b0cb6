# Progress lines and failure for the scripts that build and run things
# (scripts/image.sh, scripts/serve-image.sh, test/k8s/cluster.sh). Set
# LOG_NAME, then source it: it starts the clock and defines functions only.

t0=$(date +%s)

# log MSG...: "LOG_NAME: [Ns] MSG" on stderr, N the seconds since sourcing.
log() { echo "$LOG_NAME: [$(($(date +%s) - t0))s] $*" >&2; }

# die MSG...: logs "FAIL: MSG" and exits 1.
die() {
	log "FAIL: $*"
	exit 1
}

# need_root [WHY]: dies unless run as root ("needs root (WHY)").
need_root() { [ "$(id -u)" = 0 ] || die "needs root${1:+ ($1)}"; }
