module github.com/psych-runtime/psych

go 1.26.0

require (
	github.com/moby/profiles/seccomp v0.3.0
	github.com/opencontainers/runtime-spec v1.2.1
	github.com/seccomp/libseccomp-golang v0.11.1
	golang.org/x/sys v0.50.0
)
