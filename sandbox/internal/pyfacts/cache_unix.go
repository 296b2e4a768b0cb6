//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pyfacts

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/bootstrap"
	"github.com/psych-runtime/psych/internal/eintr"
)

// fileID is a file's identity: a replaced or rewritten file changes it.
type fileID struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
}

// key is what an entry must match to be served.
type key struct {
	// Path is the interpreter as given (absolute): a virtualenv's link and
	// its target have different prefixes.
	Path string `json:"path"`
	// Real is Path after symlinks; File is its identity.
	Real string `json:"real"`
	File fileID `json:"file"`
	// Venv is the identity of pyvenv.cfg beside Path and one level up
	// (zero where there is none).
	Venv [2]fileID `json:"venv"`
	// Bootstrap is bootstrap.SourceHash.
	Bootstrap string `json:"bootstrap"`
}

// payload is what an entry's checksum covers.
type payload struct {
	Key   key   `json:"key"`
	Facts Facts `json:"facts"`
}

// entry is the file: {"format":1,"sha256":HEX,"payload":{...}}, the
// checksum over the payload's exact bytes.
type entry struct {
	Format  int             `json:"format"`
	SHA256  string          `json:"sha256"`
	Payload json.RawMessage `json:"payload"`
}

func idOf(st *unix.Stat_t) fileID {
	return fileID{
		Dev: uint64(st.Dev), Ino: uint64(st.Ino), Size: st.Size, Mode: uint32(st.Mode),
		MtimeNS: st.Mtim.Nano(), CtimeNS: st.Ctim.Nano(),
	}
}

// SelfID is the identity of the file this process executes (device,
// inode, size, mode, mtime, ctime): rebuilt, replaced or rewritten, it
// changes. What this executable's own code computes, and only that, may be
// cached under it (LoadBlob).
func SelfID() (string, error) {
	var st unix.Stat_t
	if err := eintr.Retry(func() error { return unix.Stat("/proc/self/exe", &st) }); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoExecutable, os.NewSyscallError("stat /proc/self/exe", err))
	}
	id := idOf(&st)
	return fmt.Sprintf("exe %d %d %d %o %d %d", id.Dev, id.Ino, id.Size, id.Mode, id.MtimeNS, id.CtimeNS), nil
}

// identify builds the key of the interpreter at abs.
func identify(abs string) (key, error) {
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return key{}, fmt.Errorf("resolve interpreter %s: %w", abs, err)
	}
	k := key{Path: abs, Real: real, Bootstrap: bootstrap.SourceHash()}
	var st unix.Stat_t
	if err := eintr.Retry(func() error { return unix.Stat(real, &st) }); err != nil {
		return key{}, fmt.Errorf("stat interpreter %s: %w", real, os.NewSyscallError("stat", err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return key{}, fmt.Errorf("interpreter %s is not a regular file", real)
	}
	k.File = idOf(&st)
	for i, cfg := range []string{filepath.Join(filepath.Dir(abs), "pyvenv.cfg"), filepath.Join(filepath.Dir(filepath.Dir(abs)), "pyvenv.cfg")} {
		var vs unix.Stat_t
		if eintr.Retry(func() error { return unix.Stat(cfg, &vs) }) == nil {
			k.Venv[i] = idOf(&vs)
		}
	}
	return k, nil
}

// entryName is the entry's file name: one per interpreter path and format.
func entryName(abs string) string {
	sum := sha256.Sum256([]byte("psych-pyfacts\x00" + strconv.Itoa(formatVersion) + "\x00" + abs))
	return hex.EncodeToString(sum[:16]) + ".json"
}

// defaultDir is the cache directory when Options.Dir is empty, or "" with
// no place for one.
func defaultDir() string {
	if x := os.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "psych")
	}
	if os.Geteuid() == 0 {
		return "/var/cache/psych"
	}
	if h := os.Getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".cache", "psych")
	}
	return ""
}

func load(abs, dir string) (Facts, outcome, error) {
	k, err := identify(abs)
	if err != nil {
		return Facts{}, outcome{}, err
	}
	dfd, o := openCache(dir)
	if o.bypassed {
		f, err := compute(abs)
		return f, o, err
	}
	defer unix.Close(dfd)
	name := entryName(abs)
	f, untrusted, err := readEntry(dfd, name, k)
	if err == nil {
		return f, outcome{hit: true}, nil
	}
	o = outcome{untrusted: untrusted, reason: err.Error()}
	if f, err = compute(abs); err != nil {
		return Facts{}, o, err
	}
	// Store only what the very file in the key answered: if the
	// interpreter changed while it was asked, the next Load asks again.
	if k2, err := identify(abs); err != nil || k2 != k {
		o.writeErr = fmt.Errorf("interpreter %s changed while it was asked", abs)
		return f, o, nil
	}
	if o.writeErr = writeEntry(dfd, name, k, f); o.writeErr == nil {
		prune(dfd, name)
	}
	return f, o, nil
}

// staleTemp is the age past which a temporary file is a crashed writer's.
const staleTemp = time.Hour

// prune removes, after a miss was written, what would otherwise pile up
// in the directory: valid entries whose interpreter path is gone (a test's
// temporary interpreter, a deleted virtualenv) and temporary files a
// crashed writer left. It keeps everything else, entries of other formats
// (another psych's) included, and never fails the Load.
func prune(dfd int, keep string) {
	dup, err := unix.FcntlInt(uintptr(dfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return
	}
	d := os.NewFile(uintptr(dup), "cache")
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return
	}
	for _, de := range ents {
		n := de.Name()
		switch {
		case n == keep || !de.Type().IsRegular():
		case strings.Contains(n, ".tmp-"):
			var st unix.Stat_t
			if unix.Fstatat(dfd, n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && time.Since(time.Unix(0, st.Mtim.Nano())) > staleTemp {
				unix.Unlinkat(dfd, n, 0)
			}
		case strings.HasSuffix(n, ".json"):
			p, err := readPayload(dfd, n)
			if err != nil || entryName(p.Key.Path) != n {
				continue
			}
			var st unix.Stat_t
			if errors.Is(unix.Lstat(p.Key.Path, &st), unix.ENOENT) {
				unix.Unlinkat(dfd, n, 0)
			}
		}
	}
}

// openCache opens the cache directory dir names (Options.Dir), or says in
// a bypassed outcome why there is none to use.
func openCache(dir string) (int, outcome) {
	switch dir {
	case NoCache:
		return -1, outcome{bypassed: true, reason: reasonOff}
	case "":
		if dir = defaultDir(); dir == "" {
			return -1, outcome{bypassed: true, reason: reasonNoHome}
		}
	}
	dfd, untrusted, err := openDir(dir)
	if err != nil {
		return -1, outcome{bypassed: true, unusable: true, untrusted: untrusted, reason: err.Error()}
	}
	return dfd, outcome{}
}

// openDir opens (creating it 0700 if missing) the cache directory and
// checks it: a directory, not a symlink, owned by the euid, mode 0700.
// untrusted says the directory exists but fails those checks.
func openDir(dir string) (fd int, untrusted bool, err error) {
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

// readEntry reads and checks the entry name in the directory dfd against
// k. Any error is a miss; untrusted says the entry looked tampered with.
func readEntry(dfd int, name string, k key) (Facts, bool, error) {
	p, err := readPayload(dfd, name)
	if err != nil {
		var u untrustedError
		return Facts{}, errors.As(err, &u), err
	}
	if p.Key != k {
		return Facts{}, false, fmt.Errorf("entry %s is for another interpreter file or bootstrap", name)
	}
	if err := p.Facts.check(); err != nil {
		return Facts{}, false, fmt.Errorf("entry %s: %w", name, err)
	}
	return p.Facts, false, nil
}

// untrustedError is an entry that looked tampered with: a symlink, a
// foreign owner, another mode, another link count, not a regular file.
type untrustedError struct{ msg string }

func (e untrustedError) Error() string { return e.msg }

func untrustedf(format string, args ...any) error {
	return untrustedError{fmt.Sprintf(format, args...)}
}

// readPayload reads the entry name in the directory dfd (readBody) and
// decodes its payload; the compiled bootstrap is the entry's tail.
func readPayload(dfd int, name string) (payload, error) {
	body, code, err := readBody(dfd, name)
	if err != nil {
		return payload{}, err
	}
	var p payload
	if err := decodeStrict(body, &p); err != nil {
		return payload{}, fmt.Errorf("entry %s has a malformed payload: %w", name, err)
	}
	if p.Facts.Bootstrap != "" {
		return payload{}, fmt.Errorf("entry %s carries its bootstrap in the payload", name)
	}
	p.Facts.Code = code
	return p, nil
}

// readBody opens the entry name in the directory dfd without following a
// symlink, checks the opened file (fstat) and its checksum, and returns the
// payload's bytes and the tail's.
func readBody(dfd int, name string) (body, tail []byte, err error) {
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

// openEnvelope checks an entry's exact layout, as writeEnvelope makes it,
// and its checksum, and returns the payload's bytes and the tail's. It reads
// the header line by its fixed layout, not as JSON, and the tail (a 45 KB
// compiled bootstrap) as bytes: JSON would scan it four times on every hit.
func openEnvelope(name string, data []byte) (body, tail []byte, err error) {
	header, tail, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return nil, nil, fmt.Errorf("entry %s is malformed: no header line", name)
	}
	prefix := fmt.Sprintf(`{"format":%d,"sha256":"`, formatVersion)
	const sumLen, mid = 64, `","payload":`
	rest, ok := bytes.CutPrefix(header, []byte(prefix))
	if !ok {
		var e struct {
			Format int `json:"format"`
		}
		if json.Unmarshal(header, &e) == nil && e.Format != formatVersion {
			return nil, nil, fmt.Errorf("entry %s has format %d, want %d", name, e.Format, formatVersion)
		}
		return nil, nil, fmt.Errorf("entry %s is malformed: no envelope of format %d", name, formatVersion)
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

// writeEntry replaces the entry name in dfd atomically: a 0600 temporary
// file beside it, fsync, rename over it, fsync of the directory. A symlink
// or foreign file in its place is replaced, never followed.
func writeEntry(dfd int, name string, k key, f Facts) error {
	code := f.Code
	if code == nil {
		var err error
		if code, err = base64.StdEncoding.Strict().DecodeString(f.Bootstrap); err != nil {
			return fmt.Errorf("encode entry: %w", err)
		}
	}
	f.Bootstrap = ""
	body, err := json.Marshal(payload{Key: k, Facts: f})
	if err != nil {
		return fmt.Errorf("encode entry: %w", err)
	}
	return writeEnvelope(dfd, name, body, code)
}

// writeEnvelope writes body, a JSON value, and tail, any bytes, as the entry
// name in dfd: the line {"format":N,"sha256":HEX,"payload":BODY}, then the
// tail, the checksum over BODY's exact bytes, a line break and the tail
// (envelopeSum); replaced atomically as writeEntry says.
func writeEnvelope(dfd int, name string, body, tail []byte) (retErr error) {
	sum := envelopeSum(body, tail)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"format":%d,"sha256":"%s","payload":`, formatVersion, hex.EncodeToString(sum[:]))
	buf.Write(body)
	buf.WriteString("}\n")
	buf.Write(tail)

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
	if _, err := file.Write(buf.Bytes()); err != nil {
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
