#!/usr/bin/env bash
# Runs the isolation tests again from an unprivileged host process, to
# exercise the user-namespace path non-root hosts take. Needs root (to drop
# to UNPRIV_UID with setpriv); CI is root.
set -euo pipefail
GO=${GO:-go}
UNPRIV_UID=${UNPRIV_UID:-1000}
PYTHON=${PYTHON:-/usr/bin/python3}
PACKAGES=${UNPRIV_PACKAGES:-./sandbox/subprocess ./internal/reexec ./netns}
if [ "$(id -u)" != 0 ]; then
	echo "test-unpriv: needs root to drop to uid $UNPRIV_UID" >&2
	exit 1
fi
if [ "$UNPRIV_UID" = 0 ]; then
	echo "test-unpriv: UNPRIV_UID must not be 0" >&2
	exit 1
fi
work=$(mktemp -d /tmp/psych-unpriv.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work"
mkdir "$work/tmp"
chown "$UNPRIV_UID:$UNPRIV_UID" "$work/tmp"
rc=0
for pkg in $PACKAGES; do
	bin="$work/$(basename "$pkg").test"
	"$GO" test -c -o "$bin" "$pkg"
	chmod 0755 "$bin"
	echo "test-unpriv: $pkg as uid $UNPRIV_UID"
	if ! (cd "$work" && setpriv --reuid="$UNPRIV_UID" --regid="$UNPRIV_UID" --clear-groups \
		env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$work/tmp" TMPDIR="$work/tmp" \
		PSYCH_TEST_PYTHON="$PYTHON" "$bin" -test.count=1); then
		rc=1
	fi
done
exit $rc
