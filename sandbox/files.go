package sandbox

import (
	"fmt"
	"path"
	"strings"
	"time"
	"unicode/utf8"
)

// WorkDir is the program's working directory: its own directory on the
// run's tmpfs (beside HOME and TMPDIR, which are /tmp), where Request.Files
// are written and the only place Result.Files are collected from.
const WorkDir = "/work"

// File is one file handed to a run (Request.Files), written into WorkDir
// before the program's first line, owned by the run's user.
type File struct {
	// Path is relative to WorkDir and already clean (see CheckFiles).
	Path string `json:"path"`
	// Data is the content; base64 in JSON.
	Data []byte `json:"data"`
	// Mode holds permission bits only (at most 0o777); zero means 0o644.
	Mode uint32 `json:"mode,omitempty"`
}

// OutFile is one regular file of WorkDir that the run created, or whose
// content differs (by SHA-256) from what came in (Result.Files).
type OutFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Mode is the file's permission bits as the run left them.
	Mode uint32 `json:"mode"`
	Data []byte `json:"data"`
}

// Omitted is an entry of WorkDir a cap or its kind kept out of
// Result.Files, with why (Result.FilesOmitted).
type Omitted struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Reason string `json:"reason"`
}

// Reasons an entry is omitted (Omitted.Reason).
const (
	// OmitTooLarge: the file is larger than the per-file cap; never read.
	OmitTooLarge = "too_large"
	// OmitTotalCap: the file would take the files past the total cap.
	OmitTotalCap = "total_cap"
	// OmitCountCap: the files already reached the count cap.
	OmitCountCap = "count_cap"
	// OmitNotRegular: a symlink, FIFO, socket or device; never followed
	// nor read.
	OmitNotRegular = "not_regular"
	// OmitUnreadable: the host could not open or read it, or its name is
	// not UTF-8 (Path then holds it with U+FFFD in place of bad bytes),
	// or it lies deeper than MaxOutDepth directories.
	OmitUnreadable = "unreadable"
	// OmitTimeCap: collection ran out of time (FileCaps.CollectTime); a
	// directory not yet walked is listed as one entry.
	OmitTimeCap = "time_cap"
	// OmitInvalid: an artifact that is not what it claims: a name not of
	// the figures' form, or not a valid PNG (signature, IHDR, size).
	OmitInvalid = "invalid"
)

// MaxOutDepth is how deep below WorkDir the host walks; a directory
// deeper is listed as unreadable, not walked.
const MaxOutDepth = 32

// FileCaps bound the files of a run both ways. A zero field is its
// default (DefaultFileCaps).
type FileCaps struct {
	// InCount and InBytes cap Request.Files: how many, how many bytes in
	// all (which must also fit the backend's TmpBytes).
	InCount int   `json:"in_count,omitempty"`
	InBytes int64 `json:"in_bytes,omitempty"`
	// OutCount, OutFileBytes and OutBytes cap Result.Files: how many, the
	// largest file, how many bytes in all.
	OutCount     int   `json:"out_count,omitempty"`
	OutFileBytes int64 `json:"out_file_bytes,omitempty"`
	OutBytes     int64 `json:"out_bytes,omitempty"`
	// CollectTime bounds the host's walk of WorkDir after the run.
	CollectTime time.Duration `json:"collect_time,omitempty"`
	// ArtifactCount, ArtifactFileBytes and ArtifactBytes cap
	// Result.Artifacts: how many, the largest, how many bytes in all.
	ArtifactCount     int   `json:"artifact_count,omitempty"`
	ArtifactFileBytes int64 `json:"artifact_file_bytes,omitempty"`
	ArtifactBytes     int64 `json:"artifact_bytes,omitempty"`
}

// DefaultFileCaps are FileCaps' defaults.
var DefaultFileCaps = FileCaps{
	InCount: 100, InBytes: 64 << 20,
	OutCount: 100, OutFileBytes: 10 << 20, OutBytes: 32 << 20,
	CollectTime:   5 * time.Second,
	ArtifactCount: 32, ArtifactFileBytes: 8 << 20, ArtifactBytes: 16 << 20,
}

// Merge fills c's zero fields from DefaultFileCaps.
func (c FileCaps) Merge() FileCaps {
	d := DefaultFileCaps
	if c.InCount == 0 {
		c.InCount = d.InCount
	}
	if c.InBytes == 0 {
		c.InBytes = d.InBytes
	}
	if c.OutCount == 0 {
		c.OutCount = d.OutCount
	}
	if c.OutFileBytes == 0 {
		c.OutFileBytes = d.OutFileBytes
	}
	if c.OutBytes == 0 {
		c.OutBytes = d.OutBytes
	}
	if c.CollectTime == 0 {
		c.CollectTime = d.CollectTime
	}
	if c.ArtifactCount == 0 {
		c.ArtifactCount = d.ArtifactCount
	}
	if c.ArtifactFileBytes == 0 {
		c.ArtifactFileBytes = d.ArtifactFileBytes
	}
	if c.ArtifactBytes == 0 {
		c.ArtifactBytes = d.ArtifactBytes
	}
	return c
}

// Validate refuses a negative cap.
func (c FileCaps) Validate() error {
	if c.InCount < 0 || c.InBytes < 0 || c.OutCount < 0 || c.OutFileBytes < 0 || c.OutBytes < 0 || c.CollectTime < 0 ||
		c.ArtifactCount < 0 || c.ArtifactFileBytes < 0 || c.ArtifactBytes < 0 {
		return fmt.Errorf("file caps: a cap is negative: %w", ErrInvalidConfig)
	}
	return nil
}

// Path rules of Request.Files.
const (
	MaxPathComponent = 255
	MaxPathDepth     = 16
)

// CheckFiles returns why files cannot be handed to a run under caps
// (merged) and a tmpfs of tmpBytes, or nil. A path must be relative,
// UTF-8 without NUL, already clean (path.Clean leaves it as it is; no
// "." or ".." component), at most MaxPathComponent bytes a component and
// MaxPathDepth components deep, and no path may be another's or lie
// below another's ("a" and "a/b" collide). A mode holds permission bits
// only. Past a cap, the error names it. Every error wraps
// ErrInvalidRequest.
func CheckFiles(files []File, caps FileCaps, tmpBytes int64) error {
	if len(files) == 0 {
		return nil
	}
	if len(files) > caps.InCount {
		return fmt.Errorf("files: %d files, past the cap of %d (files in_count): %w", len(files), caps.InCount, ErrInvalidRequest)
	}
	var total int64
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		if err := checkPath(f.Path); err != nil {
			return fmt.Errorf("files: path %.80q: %w: %w", f.Path, err, ErrInvalidRequest)
		}
		if f.Mode&^0o777 != 0 {
			return fmt.Errorf("files: %q: mode %#o is more than permission bits: %w", f.Path, f.Mode, ErrInvalidRequest)
		}
		if seen[f.Path] {
			return fmt.Errorf("files: %q is given twice: %w", f.Path, ErrInvalidRequest)
		}
		seen[f.Path] = true
		total += int64(len(f.Data))
	}
	for p := range seen {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if seen[d] {
				return fmt.Errorf("files: %q lies below %q, which is a file: %w", p, d, ErrInvalidRequest)
			}
		}
	}
	switch {
	case total > caps.InBytes:
		return fmt.Errorf("files: %d bytes, past the cap of %d (files in_bytes): %w", total, caps.InBytes, ErrInvalidRequest)
	case tmpBytes > 0 && total > tmpBytes:
		return fmt.Errorf("files: %d bytes, past the run's tmpfs of %d (tmp_bytes): %w", total, tmpBytes, ErrInvalidRequest)
	}
	return nil
}

func checkPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty")
	case !utf8.ValidString(p):
		return fmt.Errorf("not UTF-8")
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("holds a NUL")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("absolute")
	case path.Clean(p) != p:
		return fmt.Errorf("not clean (path.Clean gives %q)", path.Clean(p))
	}
	parts := strings.Split(p, "/")
	if len(parts) > MaxPathDepth {
		return fmt.Errorf("%d components deep, past %d", len(parts), MaxPathDepth)
	}
	for _, c := range parts {
		switch {
		case c == "." || c == "..":
			return fmt.Errorf("has a %q component", c)
		case len(c) > MaxPathComponent:
			return fmt.Errorf("a component of %d bytes, past %d", len(c), MaxPathComponent)
		}
	}
	return nil
}
