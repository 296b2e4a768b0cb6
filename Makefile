# psych: `make demo` runs a sample program in the sandbox; `make test` runs
# the tests. Both install what they need first (scripts/deps.sh).
GO      ?= go
# The interpreter for the demo and the tests. Debian's is executable by the
# sandbox's run user (nobody); a pyenv interpreter under /root is not.
PYTHON  ?= /usr/bin/python3
FUZZTIME ?= 500000x

.PHONY: all build demo test deps vet image

all: build

deps:
	@./scripts/deps.sh

# psych and psych-full are linked statically (glibc and libseccomp, with
# Go's own resolver and user lookup): the dynamic link cost about 0.5 ms on
# every psych start, and again on its fork server's. test/cli's tests build
# them the same way.
STATIC := -tags netgo,osusergo -ldflags '-linkmode=external -extldflags=-static'

build: deps
	$(GO) build $(STATIC) -o bin/ ./cmd/psych ./cmd/psych-full

demo: build
	./bin/psych run --python $(PYTHON) --demo-tools examples/demo.py
	./bin/psych run --python $(PYTHON) --file examples/sales.csv --out bin/demo --force examples/analysis.py

# image: the container backend's image, localhost/psych-python:3.11, built
# with debootstrap (no registry), cached under /var/cache/psych/image and
# imported into every reachable engine (scripts/image.sh). Needs root.
image: deps
	GO='$(GO)' ./scripts/image.sh

# serve-image: psych serve's image, localhost/psych-serve:dev: the runs'
# image's root (make image) with the static psych binaries, imported into
# the containerd at CONTAINERD_ADDRESS, namespace k8s.io
# (scripts/serve-image.sh). Needs root.
.PHONY: serve-image
serve-image: deps
	GO='$(GO)' ./scripts/serve-image.sh

# k8s-prepare, k8s-up, k8s-test, k8s-down: a one-node Kubernetes cluster
# on this machine (test/k8s/cluster.sh: Kubernetes K8S_VERSION built from
# its sources through the Go module proxy, cached under
# /var/cache/psych/k8s; Debian's etcd; a containerd of its own),
# deploy/kubernetes applied to it and test/k8s's end-to-end tests.
# k8s-prepare makes the node's images ahead of a start (CI runs it in the
# background); k8s-test starts and takes down a cluster of its own unless
# one is up; k8s-down ends what k8s-up started, by its recorded pids, and
# removes everything it made. Needs root; pulls nothing.
K8S_VERSION ?= v1.37.2
K8S_RUN     ?=
K8S_BENCH   ?=
.PHONY: k8s-prepare k8s-up k8s-test k8s-down
k8s-prepare: deps
	GO='$(GO)' K8S_VERSION='$(K8S_VERSION)' ./test/k8s/cluster.sh prepare
k8s-up: deps
	GO='$(GO)' K8S_VERSION='$(K8S_VERSION)' ./test/k8s/cluster.sh up
k8s-test: deps
	GO='$(GO)' K8S_VERSION='$(K8S_VERSION)' K8S_RUN='$(value K8S_RUN)' K8S_BENCH='$(value K8S_BENCH)' ./test/k8s/run.sh
k8s-down:
	K8S_VERSION='$(K8S_VERSION)' ./test/k8s/cluster.sh down
	K8S_VERSION='$(K8S_VERSION)' ./test/k8s/cluster.sh verify

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
VM_TIMEOUT    ?= 1500
.PHONY: vm-test
vm-test: deps
	GO='$(GO)' VM_PACKAGES='$(VM_PACKAGES)' VM_RUN='$(value VM_RUN)' VM_BENCH='$(value VM_BENCH)' \
		VM_TIME_SCALE='$(VM_TIME_SCALE)' VM_TIMEOUT='$(VM_TIMEOUT)' ./test/vm/run.sh

# cpython-suite: CPython's own tests (libpython3.11-testsuite), every module
# of test/cpython's list, on the host as uid 1000 and in the sandbox
# (subprocess, containerd), compared; writes test/cpython/RESULTS.md. CI runs
# eight of them (scripts/test.sh). See test/cpython/README.md.
.PHONY: cpython-suite
cpython-suite: deps
	GO='$(GO)' ./test/cpython/run.sh

# soak: the soak (test/soak, see its doc.go): SOAK_RUNS executions on each
# backend (the subprocess backend, containerd), half one after another and
# half 8 at a time, ordinary and hostile programs with every result checked,
# then nothing of them left on the host and its fds, goroutines and RSS
# back. CI runs 200 (scripts/test.sh).
SOAK_RUNS ?= 2000
.PHONY: soak
soak: deps
	PSYCH_SOAK_RUNS='$(SOAK_RUNS)' PSYCH_TEST_PYTHON='$(PYTHON)' $(GO) test -count=1 -v -run '^TestSoak' -timeout 90m ./test/soak

# fuzz: every fuzz target in the module (the wire decoder's, the host
# core's, ...), FUZZ_TARGET_TIME each, one after another, with minimization
# capped at FUZZ_MINIMIZE (the coordinator counts no exec while both workers
# minimize: an uncapped minimization shows as 0 execs/s for many seconds).
# A duration here can end a clean run as "context deadline exceeded"
# (golang/go#75804); make test's budgets are counts (scripts/test.sh).
FUZZ_TARGET_TIME ?= 60s
FUZZ_MINIMIZE    ?= 2s
.PHONY: fuzz
fuzz: deps
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
		for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "fuzz: $$fn ($$(dirname $$f)) for $(FUZZ_TARGET_TIME)"; \
			$(GO) test -count=1 -run '^$$' -fuzz "^$$fn$$" -fuzztime '$(FUZZ_TARGET_TIME)' \
				-fuzzminimizetime '$(FUZZ_MINIMIZE)' "$$(dirname $$f)"; \
		done; \
	done
