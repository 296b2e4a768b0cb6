// Package layers lets psych's own benchmark take the subprocess backend's
// isolation apart, layer by layer, to measure what each costs. It is
// internal to the module: no user of psych can import it, so no public
// option lowers isolation. A run that had layers taken away says so in its
// attestation, which shows exactly what it had.
package layers

import "context"

// Set says which layers a run gets, in the order the benchmark adds them.
// The zero Set is the nsexec init running the interpreter as the run user,
// with the environment built from nothing and nothing else.
type Set struct {
	Rlimits   bool // the run's rlimits
	UserNS    bool // a user namespace with the one-id map
	NetNS     bool // a network namespace, verified empty
	PidIpcUts bool // pid, ipc and uts namespaces
	Mount     bool // mount and cgroup namespaces: the view, pivot_root, a fresh /proc
	Seccomp   bool // the seccomp filter and Landlock
	Cgroup    bool // the per-run cgroup
}

// Full is every layer: what a run gets without this package.
func Full() Set { return Set{true, true, true, true, true, true, true} }

type key struct{}

// With returns ctx asking the backend for exactly s.
func With(ctx context.Context, s Set) context.Context { return context.WithValue(ctx, key{}, s) }

// From returns the Set ctx asks for; Full when it asks for none.
func From(ctx context.Context) Set {
	if s, ok := ctx.Value(key{}).(Set); ok {
		return s
	}
	return Full()
}
