package attest

import "golang.org/x/sys/unix"

// Landlock scopes (ABI 6), which x/sys does not name yet.
const (
	landlockScopeAbstractUnix = 1 << 0
	landlockScopeSignal       = 1 << 1
)

// LandlockScopes returns the scopes every run's init confines it with:
// abstract Unix sockets and signals stay inside the run's own domain. Zero
// where the kernel lacks Landlock ABI 6. ScopeNames names them.
func LandlockScopes() uint64 {
	const createRulesetVersion = 1
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, createRulesetVersion)
	if errno != 0 || int(abi) < 6 {
		return 0
	}
	return landlockScopeAbstractUnix | landlockScopeSignal
}

// ScopeNames names the scopes for the attestation; never nil.
func ScopeNames(scopes uint64) []string {
	out := []string{}
	if scopes&landlockScopeAbstractUnix != 0 {
		out = append(out, "abstract_unix_socket")
	}
	if scopes&landlockScopeSignal != 0 {
		out = append(out, "signal")
	}
	return out
}

// LandlockABI is the kernel's Landlock ABI version; 0 without Landlock.
func LandlockABI() int {
	const createRulesetVersion = 1
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, createRulesetVersion)
	if errno != 0 {
		return 0
	}
	return int(abi)
}

// File-system accesses a fallback run is granted (LANDLOCK_ACCESS_FS_*).
const (
	// LandlockRead reads files and lists directories.
	LandlockRead = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// LandlockExec adds executing files.
	LandlockExec = LandlockRead | unix.LANDLOCK_ACCESS_FS_EXECUTE
	// LandlockWrite is what a run may do in its own directory: everything
	// but executing and making device nodes.
	LandlockWrite = LandlockRead | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM | unix.LANDLOCK_ACCESS_FS_REFER |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE
	// LandlockDev is what a run may do with the /dev nodes it gets.
	LandlockDev = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	// landlockFile are the accesses that apply to a file (not a directory).
	landlockFile = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// LandlockHandledFS is every file-system access the kernel's ABI abi
// knows, which a domain confining files handles: ABI 1's thirteen, REFER
// (2), TRUNCATE (3), IOCTL_DEV (5). Zero below ABI 1.
func LandlockHandledFS(abi int) uint64 {
	if abi < 1 {
		return 0
	}
	m := uint64(unix.LANDLOCK_ACCESS_FS_MAKE_SYM<<1 - 1) // ABI 1: bits 0-12
	if abi >= 2 {
		m |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		m |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		m |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return m
}

// LandlockRule is the access granted beneath path under the handled set:
// access within handled, and for a file only what applies to a file.
// ok is false where nothing is left or path is not there.
func LandlockRule(path string, access, handled uint64) (uint64, bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, false
	}
	access &= handled
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= landlockFile
	}
	return access, access != 0
}

// LandlockAnyWrite are the accesses that change files.
const LandlockAnyWrite = LandlockWrite &^ LandlockRead
