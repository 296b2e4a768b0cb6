#!/usr/bin/env bash
# Installs what building, the demo and the tests need, where it is missing.
# Go itself is expected on PATH (Go 1.26). Debian packages need root.
set -euo pipefail

need=()
[ -x /usr/bin/python3 ] || need+=(python3)
command -v gcc >/dev/null || need+=(gcc)
# cgo: the seccomp package compiles its filter with libseccomp.
[ -f /usr/include/seccomp.h ] || need+=(libseccomp-dev)
# make build links psych statically: libc.a (libseccomp-dev has libseccomp.a).
dpkg -s libc6-dev >/dev/null 2>&1 || need+=(libc6-dev)
command -v pkg-config >/dev/null || need+=(pkg-config)
# The trust store the subprocess backend's view binds read-only (the
# contract's TrustStore case: ssl's default context must load CAs).
[ -f /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
[ -f /etc/services ] && [ -f /etc/protocols ] || need+=(netbase) # the view binds them
# test/cpython: CPython's own tests. libregrtest comes with the stdlib; the
# test modules are the testsuite's.
[ -f /usr/lib/python3.11/test/test_os.py ] || need+=(libpython3.11-testsuite)
# The data libraries a model's program is expected to find (numpy, pandas,
# matplotlib, scipy, PIL): a run must import them as the host does.
# clients/python's tests install the package offline into a venv (pip from
# python3-venv's ensurepip).
for pkg in python3-numpy python3-pandas python3-matplotlib python3-scipy python3-pil python3-venv; do
	dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done

if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "deps: missing ${need[*]}; install them as root (apt-get install ${need[*]})" >&2
		exit 1
	fi
	echo "deps: installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${need[@]}" >/dev/null
fi
command -v go >/dev/null || { echo "deps: go is not on PATH (want Go 1.26)" >&2; exit 1; }
# A root host's psych caches under /var/cache/psych and trusts it only at
# mode 0700 (owned by root); the image and VM caches live under it too, and
# a mkdir -p of theirs once made it 0755, which every run then refused.
if [ "$(id -u)" = 0 ]; then
	install -d -m 0700 -o root -g root /var/cache/psych
fi
