# psych: `make demo` runs a sample program in the sandbox; `make test` runs
# the tests. Both install what they need first (scripts/deps.sh).
GO      ?= go
# The interpreter for the demo and the tests. Debian's is executable by the
# sandbox's run user (nobody); a pyenv interpreter under /root is not.
PYTHON  ?= /usr/bin/python3
FUZZTIME ?= 15s

.PHONY: all build demo test deps vet

all: build

deps:
	@./scripts/deps.sh

build: deps
	$(GO) build -o bin/psych ./cmd/psych

demo: build
	./bin/psych run --python $(PYTHON) --demo-tools examples/demo.py

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

test: deps vet
	$(GO) test -count=1 -run '^$$' -fuzz FuzzDecoder -fuzztime $(FUZZTIME) ./sandbox/wire
	PSYCH_TEST_PYTHON=$(PYTHON) $(GO) test -count=1 ./...
