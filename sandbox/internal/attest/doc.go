// Package attest reads a run's attestation from the kernel: what the run
// actually had, never what a frame or the configuration says. Both backends
// call it on the run's init and interpreter before the start frame, and a
// pooled sandbox reads it back at dispatch.
//
// What it promises: every reader takes its answer from /proc, statx,
// uname, netlink or the landlock syscalls alone; a file it cannot read gives an
// empty or zero answer (the attestation then says less), never a guess.
// What it refuses: it changes nothing about a process, and it never setns()
// into one (the network check runs on a socket the init opened inside).
//
// # Files
//
//   - attest.go: namespaces against the host's, /proc/PID/status, the id
//     maps, rlimits, the root mount, the read-back of a pooled sandbox, a
//     process's CPU, the node name.
//   - rootmount_linux.go: this process's root mount id from statx (5.8),
//     one call instead of a read of the mount table, and a run's root mount
//     from its mount table, read with moby/sys/mountinfo on the per-run
//     path too: a reader of psych's own saved some 30 µs and half the
//     allocations per run (BenchmarkRootMount, 24 lines), which no row of
//     psych bench can see.
//   - network.go: the netns check (package netns) shaped for the result.
//   - landlock_linux.go: the landlock ABI and scopes the kernel offers, and
//     the rule a path gets; elsewhere (_other.go), none.
package attest
