module github.com/psych-runtime/psych

go 1.26.6

require (
	github.com/moby/profiles/seccomp v0.3.0
	github.com/opencontainers/go-digest v1.0.0
	github.com/opencontainers/image-spec v1.1.1
	github.com/opencontainers/runtime-spec v1.3.0
	github.com/seccomp/libseccomp-golang v0.11.1
	golang.org/x/sys v0.50.0
)

require github.com/containerd/containerd/v2 v2.4.2 // indirect
