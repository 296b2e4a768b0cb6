// Package resources owns what a run holds on the host and what its identity
// is made of: the outside ids it runs as, the directory it runs from, and
// the sandbox's /etc. Both backends take them here, so that the run user,
// the directory names and the passwd line are the same in each.
//
// What it promises: a run's outside ids are its own while it holds them
// (an OFD lock per claim, dropped by the kernel when its host dies); a
// range that someone on the host already owns is refused; a run directory
// names its owner (cgroups.Owner), and RemoveStale removes only what a dead
// host left. What it refuses: id 0 for a run, an id range that overflows,
// a run base that someone else can write.
//
// # Files
//
//   - ids.go: IDs, the one outside-id type (RunAs, the claim range, a
//     run's), the defaults, Check against the host's users and subordinate
//     ranges, Mapped in this user namespace; ids_linux.go: Claim, one OFD
//     lock per run; elsewhere (ids_other.go), none.
//   - rundir.go: the run base, per-run directories and their owners, stale
//     removal; owner_unix.go: a file's owner; unmount_linux.go: what a
//     killed host left mounted under a run directory.
//   - identity.go: the sandbox's user, home and host name, its /etc files
//     and the host /etc entries a view binds.
//   - debian.go: Debian's Python conffiles under /etc, from dpkg's status.
package resources
