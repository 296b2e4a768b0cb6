#!/usr/bin/env bash
# The Python package's tests (clients/python, unittest) on Debian's Python
# 3.11 and pyenv's 3.8 and 3.13: over the embedded transport against psych
# and psych-full built here from the tree, over a real psych serve, the
# wiring example of docs/python.md as written, and the offline install in a
# venv. As root (the sandboxes run as ids of their own); in CI a missing
# interpreter is a failure. PSYCH_SANDBOX_PYTHON is the programs'
# interpreter (default $PYTHON, else /usr/bin/python3); PSYCH_SANDBOX_IMAGE
# psych's image for the container case (default localhost/psych-python:3.11).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
bin=$(mktemp -d /tmp/psych-python-client.XXXXXX)
trap 'rm -rf "$bin"' EXIT
"$GO" build -tags netgo,osusergo -ldflags '-linkmode=external -extldflags=-static' -o "$bin/" ./cmd/psych ./cmd/psych-full
export PSYCH_BIN=$bin/psych
export PSYCH_SANDBOX_PYTHON=${PSYCH_SANDBOX_PYTHON:-${PYTHON:-/usr/bin/python3}}
export PSYCH_SANDBOX_IMAGE=${PSYCH_SANDBOX_IMAGE:-localhost/psych-python:3.11}
pyroot=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
pythons=(/usr/bin/python3)
for minor in 3.8 3.13; do
	py=$(ls -d "$pyroot"/versions/"$minor".*/bin/python3 2>/dev/null | sort -V | tail -1 || true)
	if [ -z "$py" ]; then
		if [ "${CI:-}" = true ]; then
			echo "python-client-test: CI's machine has no pyenv Python $minor under $pyroot" >&2
			exit 1
		fi
		echo "python-client-test: no pyenv Python $minor under $pyroot; skipped" >&2
		continue
	fi
	pythons+=("$py")
done
cd clients/python
for py in "${pythons[@]}"; do
	echo "python-client-test: $("$py" --version) ($py)" >&2
	PYTHONDONTWRITEBYTECODE=1 "$py" -m unittest discover -s tests -t . -v
done
