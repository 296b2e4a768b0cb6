// Package trustcache is the trusted-file cache, apart from what it holds: a
// directory this euid owns alone, and entries in it that are served only
// if nobody else could have written them and they are whole. The
// interpreter's facts and the blobs of package pyfacts (the compiled
// seccomp program, matplotlib's font list) are kept in it.
//
// What it promises. OpenDir creates the directory 0700 if missing, opens
// it with O_DIRECTORY|O_NOFOLLOW and uses it only if fstat on the opened
// fd shows a directory owned by the effective uid with mode exactly 0700.
// Read opens an entry relative to that fd with O_NOFOLLOW and serves it
// only if fstat shows a regular file owned by the effective uid, mode
// exactly 0600, one link and at most MaxEntryBytes, in the exact layout
// Seal makes, {"format":N,"sha256":HEX,"payload":BODY} and a line break,
// then the tail (any bytes), with its SHA-256 over BODY, a line break and
// the tail. Write replaces an entry atomically: a 0600 temporary file in
// the directory, fsync, rename, fsync of the directory.
//
// What it refuses: a symlink, a foreign owner or another mode, and for an
// entry another link count or anything but a regular file, is refused as
// tampered with (the directory: OpenDir's untrusted; an entry:
// ErrUntrusted); an oversized or malformed entry, another format or a
// checksum mismatch is refused as broken. It never follows a link (Write
// replaces one in an entry's place) and knows nothing of what a payload
// means: its caller decides what a refusal is (for package pyfacts, a
// miss). Where there are no owners, modes and openat(O_NOFOLLOW) to check
// (other than Linux, macOS and the BSDs), there is no cache: OpenDir fails
// with ErrUnsupported.
//
// # Files
//
//   - trustcache.go: the entry's format version and size cap.
//   - trustcache_unix.go: the directory opened and checked, entries
//     listed, read and checked, sealed and written atomically;
//     trustcache_other.go: elsewhere, ErrUnsupported.
//   - errors.go: the sentinel errors.
package trustcache
