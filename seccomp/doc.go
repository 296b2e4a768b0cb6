// Package seccomp is psych's syscall policy: a plain Go value (Policy),
// compiled with libseccomp to a classic BPF program (Filter) that the
// sandbox's init loads with seccomp(SECCOMP_SET_MODE_FILTER) after setting
// no_new_privs, just before it executes the interpreter. The filter then
// governs the init and CPython and everything they start. The package
// imports no other package of psych, and never installs a filter itself.
//
// # What Default allows
//
// Docker's default profile (github.com/moby/profiles/seccomp, not retyped
// here), as it applies to a process with no capabilities on x86_64: its
// allow rules without capability requirements, for amd64, and whose minimum
// kernel psych's own minimum (5.12) meets, with their argument conditions
// (personality, clone). That covers what the Go runtime, glibc and CPython
// use. Its errno rule for clone3 is kept as an override.
//
// # What Default refuses, and how
//
//   - Another ABI kills the process (SECCOMP_RET_KILL_PROCESS): i386 through
//     int 0x80, and x32 (x86_64 with bit 30 set in the number). Only the
//     native architecture is in the filter; libseccomp emits the x32 check
//     itself, and Compile verifies it.
//   - A syscall the filter knows by name but does not allow fails with EPERM.
//   - A number the filter has no name for fails with ENOSYS: a syscall newer
//     than libseccomp's table looks absent, as on an older kernel, and glibc
//     and CPython take their fallbacks (fchmodat2, for one).
//   - clone3 fails with ENOSYS, so glibc and CPython fall back to clone,
//     whose flags the filter can read (clone3 passes them in memory).
//   - Always EPERM, whatever Docker's profile says: mount, umount2,
//     pivot_root, chroot and the new mount API (fsopen, fsconfig, fsmount,
//     fspick, open_tree, move_mount, mount_setattr); unshare and setns;
//     ptrace, process_vm_readv, process_vm_writev, process_madvise, kcmp
//     and pidfd_getfd; bpf, perf_event_open and userfaultfd; keyctl,
//     add_key and request_key (the keyring is not namespaced); io_uring_setup,
//     io_uring_enter and io_uring_register; kexec_load, kexec_file_load,
//     init_module, finit_module, delete_module, reboot, swapon and swapoff;
//     open_by_handle_at and name_to_handle_at (file handles bypass the
//     mount view); modify_ldt (psych's addition: nothing it runs needs
//     16-bit segments, and the LDT has a history of kernel bugs).
//   - clone with any namespace flag (CLONE_NEWNS, NEWCGROUP, NEWUTS,
//     NEWIPC, NEWUSER, NEWPID, NEWNET): EPERM. CLONE_NEWTIME (0x80) is not
//     tested: in clone's flags that bit belongs to the exit signal, and
//     clone cannot make a time namespace.
//   - ioctl TIOCSTI and TIOCLINUX (terminal input injection): EPERM. Only the
//     low 32 bits of the command are compared, because that is all the
//     kernel reads; every other ioctl is allowed, as in Docker.
//   - setuid, setgid, setreuid, setregid, setresuid, setresgid, setfsuid
//     and setfsgid naming id 0 in any argument: EPERM (the low 32 bits are
//     compared, as the kernel reads a uid_t). No run's own id is 0 on any
//     backend, and a process without capabilities could never take it; but
//     inside a user namespace, where 0 is not mapped, the kernel answers
//     EINVAL, and programs and CPython's tests expect EPERM. Every other id
//     is the kernel's to refuse. Policy.ConfineIDs goes further for a
//     backend that knows its run's ids: only those ids, or -1, pass, so an
//     unmapped id of any value is EPERM too. setgroups needs no rule: the
//     kernel refuses it with EPERM to a process without CAP_SETGID before
//     it looks at the groups.
//   - socket is an allowlist of domains: AF_UNIX, AF_INET, AF_INET6, and
//     AF_NETLINK with protocol NETLINK_ROUTE only (glibc's getaddrinfo and
//     CPython's socket.if_nameindex need it). Everything else, AF_PACKET,
//     AF_VSOCK and other netlink families among them, fails with EPERM.
//     socketpair: AF_UNIX only. The domain is compared as a 64-bit value, so
//     a domain with garbage in the upper half is refused, never let
//     through.
//
// # How a Policy compiles
//
// Policy documents the order in which its parts decide a syscall. Compile
// gives libseccomp only rules whose meaning it specifies: a filter has one
// default action, rules for one syscall are OR'd, and a rule compares each
// argument at most once (libseccomp refuses a second comparison of the
// same argument with EINVAL, so two comparisons become two rules). What
// libseccomp does with overlapping rules of different actions for one
// syscall is unspecified (an unconditional rule silently replaces the
// conditional ones), and it cannot compare a syscall number with a range.
// So the program is three parts, spliced: a six-instruction prologue of
// psych's own that sends numbers above libseccomp's table to ENOSYS; a
// libseccomp stage holding the Deny rules whose default is "go on"; and a
// libseccomp stage holding the overrides, ENOSYS for holes in the table,
// and the Allow rules, whose default is EPERM. Both stages are binary trees
// by syscall number and check the architecture themselves.
//
// libseccomp is linked dynamically: another version may know more syscall
// names, and then builds a different program with a different digest. Names
// it does not know are skipped (Filter.Unresolved), which never widens the
// policy. Compile refuses a result that the kernel would not load, or that
// does not kill other ABIs, or does not return the policy's errno for an
// unknown number or an override.
//
// # For container engines
//
// Policy.OCI renders the same policy as the OCI spec's LinuxSeccomp (and
// the JSON podman and docker read), rule by rule, for the engine to load.
// The Deny rules have no faithful OCI form; psych's init loads the filter
// Compile builds on top of the engine's in every container, and of two
// stacked filters the stricter answer wins, so both backends deny the same
// calls (a test compiles the rendering and compares every number).
//
// # Testing without installing
//
// Filter.Evaluate is a classic BPF interpreter over struct seccomp_data
// that refuses what the kernel's checker refuses, so tests check a filter
// without loading it (as gVisor does). A test that loads one does it in a
// child process, never in the test process: seccomp cannot be undone.
package seccomp
