//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pyfacts

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/bootstrap"
	"github.com/psych-runtime/psych/internal/eintr"
	"github.com/psych-runtime/psych/sandbox/internal/trustcache"
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
	ents, err := trustcache.Entries(dfd)
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
	dfd, untrusted, err := trustcache.OpenDir(dir)
	if err != nil {
		return -1, outcome{bypassed: true, unusable: true, untrusted: untrusted, reason: err.Error()}
	}
	return dfd, outcome{}
}

// readEntry reads and checks the entry name in the directory dfd against
// k. Any error is a miss; untrusted says the entry looked tampered with.
func readEntry(dfd int, name string, k key) (Facts, bool, error) {
	p, err := readPayload(dfd, name)
	if err != nil {
		return Facts{}, errors.Is(err, trustcache.ErrUntrusted), err
	}
	if p.Key != k {
		return Facts{}, false, fmt.Errorf("entry %s is for another interpreter file or bootstrap", name)
	}
	if err := p.Facts.check(); err != nil {
		return Facts{}, false, fmt.Errorf("entry %s: %w", name, err)
	}
	return p.Facts, false, nil
}

// readPayload reads the entry name in the directory dfd (trustcache.Read)
// and decodes its payload; the compiled bootstrap is the entry's tail.
func readPayload(dfd int, name string) (payload, error) {
	body, code, err := trustcache.Read(dfd, name)
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

// writeEntry replaces the entry name in dfd atomically (trustcache.Write):
// a symlink or foreign file in its place is replaced, never followed.
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
	return trustcache.Write(dfd, name, body, code)
}
