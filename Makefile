# psych: `make demo` runs a sample program in the sandbox; `make test` runs
# the tests. Both install what they need first (scripts/deps.sh).
GO      ?= go
# The interpreter for the demo and the tests. Debian's is executable by the
# sandbox's run user (nobody); a pyenv interpreter under /root is not.
PYTHON  ?= /usr/bin/python3
FUZZTIME ?= 15s

.PHONY: all build demo test deps vet image

all: build

deps:
	@./scripts/deps.sh

build: deps
	$(GO) build -o bin/psych ./cmd/psych

demo: build
	./bin/psych run --python $(PYTHON) --demo-tools examples/demo.py

# image: the container backend's image, localhost/psych-python:3.11, built
# with debootstrap (no registry), cached under /var/cache/psych/image and
# imported into every reachable engine (scripts/image.sh). Needs root.
image: deps
	GO='$(GO)' ./scripts/image.sh

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# test: as root, the container engines and psych's image; the fuzzer;
# every package's tests under the race detector (the contract suite on every
# backend and engine; the portable builds are a test of their own); then,
# as root, the isolation tests again from an unprivileged host process
# (scripts/test.sh).
test: deps vet
	GO='$(GO)' PYTHON='$(PYTHON)' FUZZTIME='$(FUZZTIME)' ./scripts/test.sh

# vm-test: the test binaries of VM_PACKAGES, run as root in qemu on Debian's
# cloud kernel with cgroup_no_v1=all (test/vm/README.md). VM_RUN is a
# -test.run regexp, VM_BENCH a -test.bench one (reported, never graded), VM_TIME_SCALE stretches the tests' time bounds under
# emulation, VM_TIMEOUT (seconds) bounds the whole boot.
VM_PACKAGES   ?= ./cgroups ./sandbox/subprocess
VM_RUN        ?=
VM_BENCH      ?=
VM_TIME_SCALE ?= 4
VM_TIMEOUT    ?= 900
.PHONY: vm-test
vm-test: deps
	GO='$(GO)' VM_PACKAGES='$(VM_PACKAGES)' VM_RUN='$(value VM_RUN)' VM_BENCH='$(value VM_BENCH)' \
		VM_TIME_SCALE='$(VM_TIME_SCALE)' VM_TIMEOUT='$(VM_TIMEOUT)' ./test/vm/run.sh
