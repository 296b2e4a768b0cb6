// Package pyfacts learns what a backend needs to know about an interpreter
// before its first run, with one start of that interpreter, and caches it.
//
// The facts are the interpreter's prefixes (sys.prefix, base_prefix,
// exec_prefix, base_exec_prefix, which the subprocess backend's view binds),
// its version, and the bootstrap compiled by it (what bootstrap.Launcher
// carries). One command learns them all on a miss:
//
//	python -I -S -B -c SCRIPT < bootstrap.Source
//
// prints one JSON object; what it printed is checked (four absolute
// prefixes, a version, a compiled bootstrap that is strict base64 and fits
// one argument) before anything uses or caches it.
//
// # The cache
//
// One file per interpreter path, named by a hash of the path and the format
// version, in the cache directory: Options.Dir, else $XDG_CACHE_HOME/psych
// when that is set and absolute, else /var/cache/psych for euid 0, else
// $HOME/.cache/psych; NoCache turns it off. An entry is one line,
// {"format":2,"sha256":HEX,"payload":{"key":…,"facts":…}}, then the compiled
// bootstrap's bytes; the SHA-256 covers the payload and those bytes. The key is the path as given; the path
// after symlinks; the real file's device, inode, size, mode, mtime and ctime
// (nanoseconds); the same identity of pyvenv.cfg beside the path and one
// level up (absent or not), since a virtualenv's prefixes come from it; and
// bootstrap.SourceHash. A changed interpreter, a recreated virtualenv or a
// changed bootstrap is therefore a miss, never a stale hit. What the key
// cannot see: a shared libpython replaced under an unchanged executable
// (its prefixes do not change, and the marshal format is fixed within a
// Python minor version).
//
// Trust is package trustcache's: the directory is used only if it is owned
// by the effective uid with mode exactly 0700, and an entry only if it is
// that uid's regular 0600 file with one link, at most
// trustcache.MaxEntryBytes, whole and checksummed. A symlink, a wrong owner
// or mode, an oversized or malformed entry, a checksum or key mismatch, or
// facts that fail the checks above: each is a miss, and the facts are
// recomputed and the entry rewritten atomically. A directory that cannot
// be used (missing and uncreatable, not owned by the euid, another mode,
// unwritable) never fails a run: the cache is bypassed and the facts are
// computed, and the reason is logged (Warn for a cache that is not trusted
// or cannot be written, Debug for an ordinary miss). After writing a miss,
// Load removes the valid entries whose interpreter path no longer exists
// (a test's temporary interpreter, a deleted virtualenv) and temporary files
// older than an hour; it leaves everything else, another format's entries
// included.
//
// What the cache never holds: the resolution of python3 on PATH (a pyenv
// shim's answer depends on the directory and the environment), which
// callers do afresh each time. Where there are no owners, modes and
// openat(O_NOFOLLOW) to check (other than Linux, macOS and the BSDs), there
// is no cache: every Load starts the interpreter.
//
// # Files
//
//   - pyfacts.go: Facts, Options, Load and the blobs' entry points, the
//     facts learnt and checked. The cache itself, whatever it holds (the
//     directory and its entries checked, read and written atomically), is
//     package trustcache.
//   - cache_unix.go: the interpreter facts' entries in it (key, load,
//     prune); blob_unix.go: the blobs' entries; _other.go: no cache.
//   - errors.go: the sentinel errors.
package pyfacts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/psych-runtime/psych/bootstrap"
	"github.com/psych-runtime/psych/sandbox/internal/trustcache"
)

// Facts is what one interpreter start tells about an interpreter.
type Facts struct {
	// Prefixes are sys.prefix, sys.base_prefix, sys.exec_prefix and
	// sys.base_exec_prefix, as printed under -I -S.
	Prefixes []string `json:"prefixes"`
	// Version is the interpreter's version, "3.11.2".
	Version string `json:"version"`
	// Bootstrap is how the interpreter prints the compiled bootstrap
	// (base64); Load returns it empty, and Code set.
	Bootstrap string `json:"bootstrap"`
	// Code is bootstrap.Source compiled by this interpreter: its marshal
	// bytes, what bootstrap.NewLauncherCode takes. It is not part of the
	// facts' JSON: a cache entry keeps it as raw bytes after them.
	Code []byte `json:"-"`
}

// NoCache as Options.Dir turns the cache off: every Load starts the
// interpreter.
const NoCache = "-"

// Options configures Load. The zero value uses the default cache directory.
type Options struct {
	// Dir is the cache directory, absolute. Empty: $XDG_CACHE_HOME/psych
	// if XDG_CACHE_HOME is absolute, else /var/cache/psych for euid 0,
	// else $HOME/.cache/psych. NoCache: no cache.
	Dir string
	// Logger receives why the cache was bypassed or an entry refused
	// (Warn) and misses (Debug). Nil: slog.Default().
	Logger *slog.Logger
}

// formatVersion is the entries' (trustcache.Format), which names the facts'
// entries too: another layout, another entry.
const formatVersion = trustcache.Format

// askTimeout bounds the one interpreter start of a miss.
const askTimeout = 30 * time.Second

// outcome is how one Load went, for the log and for tests.
type outcome struct {
	hit bool
	// bypassed: the cache was not used at all (off, no place for it, or
	// unusable).
	bypassed bool
	// unusable: there is a cache directory, but it cannot be used.
	unusable bool
	// untrusted: what was found looked tampered with (owner, mode, symlink).
	untrusted bool
	// reason says why there was no hit, or why the entry was not written.
	reason string
	// writeErr: the entry could not be (re)written.
	writeErr error
}

// Load returns python's facts: from the cache when an entry for this very
// interpreter and bootstrap is there and trusted (hit), else by starting
// python once and caching the answer. A cache that cannot be used is
// bypassed, never an error; the error is for an interpreter that cannot be
// found or asked, or whose answer fails the checks.
func Load(python string, opts Options) (Facts, bool, error) {
	if err := opts.check(); err != nil {
		return Facts{}, false, err
	}
	abs, err := filepath.Abs(python)
	if err != nil {
		return Facts{}, false, fmt.Errorf("resolve interpreter %s: %w", python, err)
	}
	f, o, err := load(abs, opts.Dir)
	if err != nil {
		return Facts{}, false, err
	}
	o.report(opts.logger(), "interpreter facts", "python", abs)
	return f, o.hit, nil
}

// check refuses a relative cache directory.
func (opts Options) check() error {
	if opts.Dir != "" && opts.Dir != NoCache && !filepath.IsAbs(opts.Dir) {
		return fmt.Errorf("%w: cache directory %q is not absolute", ErrInvalidOptions, opts.Dir)
	}
	return nil
}

func (opts Options) logger() *slog.Logger {
	if opts.Logger == nil {
		return slog.Default()
	}
	return opts.Logger
}

// report logs how a load of what (attrs naming it) went: a bypassed or
// refused cache and an entry not written at Warn, the rest at Debug.
func (o outcome) report(log *slog.Logger, what string, attrs ...any) {
	switch {
	case o.hit:
		log.Debug("psych: "+what+" from the cache", attrs...)
	case o.untrusted || o.unusable:
		log.Warn("psych: cache not trusted or not usable; "+what+" made afresh", append(attrs, "reason", o.reason)...)
	default:
		log.Debug("psych: "+what+" made afresh", append(attrs, "reason", o.reason)...)
	}
	if o.writeErr != nil {
		log.Warn("psych: cache entry for "+what+" not written", append(attrs, "err", o.writeErr)...)
	}
}

// LoadBlob returns the bytes cached under name (lower case, digits and
// dashes) for key, in Load's cache directory and under its trust rules: an
// entry is served only if it is trusted, its checksum holds, it was stored
// for this very key and check accepts its bytes. Otherwise build makes
// them, and they are cached (one entry per name, replaced) and returned;
// check is not applied to what build made. hit says the bytes came from the
// cache. As with Load, a cache that cannot be used is bypassed and logged,
// never an error; build's error is returned.
func LoadBlob(opts Options, name, key string, build func() ([]byte, error), check func([]byte) error) ([]byte, bool, error) {
	if err := opts.check(); err != nil {
		return nil, false, err
	}
	b, o, err := loadBlob(opts, name, key, build, check)
	if err != nil {
		return nil, false, err
	}
	o.report(opts.logger(), "blob", "name", name)
	return b, o.hit, nil
}

// LoadExeBlob is LoadBlob for what this executable's own code computes
// (the subprocess backend's compiled seccomp program): one entry per
// executable path, keyed on the executable's identity (SelfID) as well as
// key, so that programs that embed psych do not take each other's entries
// in turns, and a rebuilt executable replaces its own. Writing an entry
// removes the entries of executables whose path is gone. name may be at
// most 47 characters. Where the executable cannot be identified it fails
// with ErrNoExecutable before build or check runs; the caller keys on
// something else.
func LoadExeBlob(opts Options, name, key string, build func() ([]byte, error), check func([]byte) error) ([]byte, bool, error) {
	if err := opts.check(); err != nil {
		return nil, false, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrNoExecutable, err)
	}
	id, err := SelfID()
	if err != nil {
		return nil, false, err
	}
	b, o, err := loadExeBlob(opts, name, exe, id, key, build, check)
	if err != nil {
		return nil, false, err
	}
	o.report(opts.logger(), "blob", "name", name, "executable", exe)
	return b, o.hit, nil
}

const (
	reasonOff    = "cache off"
	reasonNoHome = "no cache directory: XDG_CACHE_HOME and HOME are unset or relative"
)

// MinPython is the oldest Python the bootstrap serves.
const MinPython = "3.8"

// factsScript prints the facts as one JSON object, compiling the Source it
// reads on stdin as Prepare does. An interpreter older than MinPython prints
// its version and no bootstrap (the source would not compile there); the
// script itself runs on any Python that takes -I.
const factsScript = "import sys,json\n" +
	"v='%d.%d.%d'%tuple(sys.version_info[:3])\n" +
	"p=[sys.prefix,getattr(sys,'base_prefix',sys.prefix),sys.exec_prefix,getattr(sys,'base_exec_prefix',sys.exec_prefix)]\n" +
	"c=''\n" +
	"if sys.version_info[:2]>=(3,8):\n" +
	" import marshal,binascii\n" +
	" c=binascii.b2a_base64(marshal.dumps(compile(sys.stdin.buffer.read(),'<psych-bootstrap>','exec')),newline=False).decode()\n" +
	"sys.stdout.write(json.dumps({'prefixes':p,'version':v,'bootstrap':c}))\n"

// compute starts python once and checks its answer.
func compute(python string) (Facts, error) {
	ctx, cancel := context.WithTimeout(context.Background(), askTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-I", "-S", "-B", "-c", factsScript)
	cmd.Stdin = strings.NewReader(bootstrap.Source)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if bytes.Contains(stderr.Bytes(), []byte("Unknown option")) {
			// -I is Python 3.4's: this is a Python 2 or an early 3.
			return Facts{}, fmt.Errorf("%s: %w: it takes no -I (the bootstrap needs Python %s or later)", python, ErrUnsupportedPython, MinPython)
		}
		return Facts{}, fmt.Errorf("ask %s for its prefixes and compile the bootstrap: %w: %s", python, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var f Facts
	if err := decodeStrict(out, &f); err != nil {
		return Facts{}, fmt.Errorf("read %s's facts: %w: %w", python, ErrBadFacts, err)
	}
	if err := f.check(); err != nil {
		return Facts{}, fmt.Errorf("read %s's facts: %w", python, err)
	}
	f.Bootstrap = "" // in Code now
	return f, nil
}

// validVersion: three dot-separated numbers of 1 to 4 digits.
func validVersion(v string) bool {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if len(p) == 0 || len(p) > 4 || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// check is what facts must satisfy to be used or cached, wherever they
// came from.
// check also sets Code from Bootstrap where only the latter is there.
func (f *Facts) check() error {
	if len(f.Prefixes) != 4 {
		return fmt.Errorf("%w: %d prefixes, want 4", ErrBadFacts, len(f.Prefixes))
	}
	for _, p := range f.Prefixes {
		if !filepath.IsAbs(p) || strings.ContainsRune(p, 0) {
			return fmt.Errorf("%w: prefix %q is not an absolute path", ErrBadFacts, p)
		}
	}
	if !validVersion(f.Version) {
		return fmt.Errorf("%w: version %q", ErrBadFacts, f.Version)
	}
	var major, minor int
	fmt.Sscanf(f.Version, "%d.%d", &major, &minor)
	if major < 3 || major == 3 && minor < 8 {
		return fmt.Errorf("%w: Python %s (the bootstrap needs Python %s or later)", ErrUnsupportedPython, f.Version, MinPython)
	}
	if f.Code == nil {
		l, err := bootstrap.NewLauncher(f.Bootstrap)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadFacts, err)
		}
		f.Code = l.Code()
	} else if _, err := bootstrap.NewLauncherCode(f.Code); err != nil {
		return fmt.Errorf("%w: %w", ErrBadFacts, err)
	}
	return nil
}

// decodeStrict decodes exactly one JSON value with no unknown fields and
// nothing after it.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if len(bytes.TrimSpace(data[dec.InputOffset():])) != 0 {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}
