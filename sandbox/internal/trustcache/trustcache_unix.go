//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package trustcache

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/psych-runtime/psych/internal/eintr"
	"golang.org/x/sys/unix"
)

// OpenDir opens (creating it 0700 if missing) the cache directory and
// checks it: a directory, not a symlink, owned by the euid, mode 0700.
// untrusted says the directory exists but fails those checks.
func OpenDir(dir string) (fd int, untrusted bool, err error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return -1, false, fmt.Errorf("create cache directory parent: %w", err)
	}
	created := true
	if err := eintr.Retry(func() error { return unix.Mkdir(dir, 0o700) }); err != nil {
		if !errors.Is(err, unix.EEXIST) {
			return -1, false, fmt.Errorf("create cache directory %s: %w", dir, os.NewSyscallError("mkdir", err))
		}
		created = false
	}
	opened := -1
	err = eintr.Retry(func() (err error) {
		opened, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		untrusted = errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)
		return -1, untrusted, fmt.Errorf("open cache directory %s (not following symlinks): %w", dir, os.NewSyscallError("open", err))
	}
	// Every refusal below returns fd -1: the descriptor is closed by its
	// own name, not by the result's.
	defer func() {
		if err != nil {
			unix.Close(opened)
		}
	}()
	fd = opened
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return -1, false, fmt.Errorf("stat cache directory %s: %w", dir, os.NewSyscallError("fstat", err))
	}
	euid := uint32(os.Geteuid())
	// A directory made just now may carry the umask's or a default ACL's
	// bits, or an inherited setgid: set the mode it must have.
	if created && st.Uid == euid && st.Mode&0o7777 != 0o700 {
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return -1, false, fmt.Errorf("chmod cache directory %s: %w", dir, os.NewSyscallError("fchmod", err))
		}
		if err := unix.Fstat(fd, &st); err != nil {
			return -1, false, fmt.Errorf("stat cache directory %s: %w", dir, os.NewSyscallError("fstat", err))
		}
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return -1, true, fmt.Errorf("cache directory %s is not a directory", dir)
	case st.Uid != euid:
		return -1, true, fmt.Errorf("cache directory %s is owned by uid %d, not %d", dir, st.Uid, euid)
	case st.Mode&0o7777 != 0o700:
		return -1, true, fmt.Errorf("cache directory %s has mode %04o, want 0700", dir, st.Mode&0o7777)
	}
	return fd, false, nil
}

// untrustedError is an entry that looked tampered with: a symlink, a
// foreign owner, another mode, another link count, not a regular file. It
// is ErrUntrusted, and says which.
type untrustedError struct{ msg string }

func (e untrustedError) Error() string { return e.msg }

func (e untrustedError) Is(target error) bool { return target == ErrUntrusted }

func untrustedf(format string, args ...any) error {
	return untrustedError{fmt.Sprintf(format, args...)}
}

// Entries lists the cache directory open at dfd, which stays open.
func Entries(dfd int) ([]os.DirEntry, error) {
	dup, err := unix.FcntlInt(uintptr(dfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("fcntl", err)
	}
	d := os.NewFile(uintptr(dup), "cache")
	defer d.Close()
	return d.ReadDir(-1)
}

// Read opens the entry name in the directory dfd without following a
// symlink, checks the opened file (fstat) and its checksum, and returns the
// payload's bytes and the tail's. An entry that looked tampered with is
// ErrUntrusted; any error is a miss to its caller.
func Read(dfd int, name string) (body, tail []byte, err error) {
	var fd int
	err = eintr.Retry(func() (err error) {
		fd, err = unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		return err
	})
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, nil, fmt.Errorf("no entry")
	case errors.Is(err, unix.ELOOP):
		return nil, nil, untrustedf("entry %s is a symlink", name)
	case err != nil:
		return nil, nil, fmt.Errorf("open entry %s: %w", name, os.NewSyscallError("openat", err))
	}
	file := os.NewFile(uintptr(fd), name)
	defer file.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, fmt.Errorf("stat entry %s: %w", name, os.NewSyscallError("fstat", err))
	}
	euid := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, nil, untrustedf("entry %s is not a regular file", name)
	case st.Uid != euid:
		return nil, nil, untrustedf("entry %s is owned by uid %d, not %d", name, st.Uid, euid)
	case st.Mode&0o7777 != 0o600:
		return nil, nil, untrustedf("entry %s has mode %04o, want 0600", name, st.Mode&0o7777)
	case st.Nlink != 1:
		return nil, nil, untrustedf("entry %s has %d links", name, st.Nlink)
	case st.Size > MaxEntryBytes:
		return nil, nil, fmt.Errorf("entry %s is %d bytes, over %d", name, st.Size, MaxEntryBytes)
	}
	// Sized by the fstat: one read takes the whole entry, where ReadAll
	// would grow and copy its buffer a dozen times.
	var buf bytes.Buffer
	buf.Grow(int(st.Size) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(file, MaxEntryBytes+1)); err != nil {
		return nil, nil, fmt.Errorf("read entry %s: %w", name, err)
	}
	data := buf.Bytes()
	if len(data) > MaxEntryBytes {
		return nil, nil, fmt.Errorf("entry %s is over %d bytes", name, MaxEntryBytes)
	}
	return openEnvelope(name, data)
}

// openEnvelope checks an entry's exact layout, as Seal makes it,
// and its checksum, and returns the payload's bytes and the tail's. It reads
// the header line by its fixed layout, not as JSON, and the tail (a 45 KB
// compiled bootstrap) as bytes: JSON would scan it four times on every hit.
func openEnvelope(name string, data []byte) (body, tail []byte, err error) {
	header, tail, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return nil, nil, fmt.Errorf("entry %s is malformed: no header line", name)
	}
	prefix := fmt.Sprintf(`{"format":%d,"sha256":"`, Format)
	const sumLen, mid = 64, `","payload":`
	rest, ok := bytes.CutPrefix(header, []byte(prefix))
	if !ok {
		var e struct {
			Format int `json:"format"`
		}
		if json.Unmarshal(header, &e) == nil && e.Format != Format {
			return nil, nil, fmt.Errorf("entry %s has format %d, want %d", name, e.Format, Format)
		}
		return nil, nil, fmt.Errorf("entry %s is malformed: no envelope of format %d", name, Format)
	}
	if len(rest) < sumLen+len(mid) || !bytes.Equal(rest[sumLen:sumLen+len(mid)], []byte(mid)) {
		return nil, nil, fmt.Errorf("entry %s is malformed: no checksum", name)
	}
	sum, body := string(rest[:sumLen]), rest[sumLen+len(mid):]
	if body, ok = bytes.CutSuffix(body, []byte("}")); !ok {
		return nil, nil, fmt.Errorf("entry %s is malformed: no end", name)
	}
	if got := envelopeSum(body, tail); sum != hex.EncodeToString(got[:]) {
		return nil, nil, fmt.Errorf("entry %s fails its checksum", name)
	}
	return body, tail, nil
}

// envelopeSum is an entry's checksum: SHA-256 over the payload, a line
// break and the tail.
func envelopeSum(body, tail []byte) [32]byte {
	h := sha256.New()
	h.Write(body)
	h.Write([]byte("\n"))
	h.Write(tail)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// Seal is an entry's bytes for body, a JSON value, and tail, any bytes:
// the line {"format":N,"sha256":HEX,"payload":BODY}, then the tail, the
// checksum over BODY's exact bytes, a line break and the tail
// (envelopeSum).
func Seal(body, tail []byte) []byte {
	sum := envelopeSum(body, tail)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"format":%d,"sha256":"%s","payload":`, Format, hex.EncodeToString(sum[:]))
	buf.Write(body)
	buf.WriteString("}\n")
	buf.Write(tail)
	return buf.Bytes()
}

// Write writes body and tail, sealed (Seal), as the entry name in dfd,
// replacing it atomically: a 0600 temporary file beside it, fsync, rename
// over it, fsync of the directory. A symlink or foreign file in its place
// is replaced, never followed; a failed write leaves no temporary file.
func Write(dfd int, name string, body, tail []byte) (retErr error) {
	sealed := Seal(body, tail)
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := name + ".tmp-" + hex.EncodeToString(rnd[:])
	var fd int
	err := eintr.Retry(func() (err error) {
		fd, err = unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, 0o600)
		return err
	})
	if err != nil {
		return fmt.Errorf("create entry %s: %w", tmp, os.NewSyscallError("openat", err))
	}
	file := os.NewFile(uintptr(fd), tmp)
	defer func() {
		if file != nil {
			file.Close()
		}
		if retErr != nil {
			unix.Unlinkat(dfd, tmp, 0)
		}
	}()
	if err := unix.Fchmod(fd, 0o600); err != nil {
		return fmt.Errorf("chmod entry %s: %w", tmp, os.NewSyscallError("fchmod", err))
	}
	if _, err := file.Write(sealed); err != nil {
		return fmt.Errorf("write entry %s: %w", tmp, err)
	}
	if err := file.Sync(); err != nil {
		return fmt.Errorf("sync entry %s: %w", tmp, err)
	}
	err = file.Close()
	file = nil
	if err != nil {
		return fmt.Errorf("close entry %s: %w", tmp, err)
	}
	if err := eintr.Retry(func() error { return unix.Renameat(dfd, tmp, dfd, name) }); err != nil {
		return fmt.Errorf("rename entry %s: %w", name, os.NewSyscallError("renameat", err))
	}
	if err := eintr.Retry(func() error { return unix.Fsync(dfd) }); err != nil {
		return fmt.Errorf("sync cache directory: %w", os.NewSyscallError("fsync", err))
	}
	return nil
}
