package api

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// MaxTokenFile bounds what ReadToken reads of a token file.
const MaxTokenFile = 4 << 10

// ReadToken reads a bearer token file, the one `psych serve --token-file`
// and `psych run --host --token-file` both take: its first line, trimmed,
// which must be at least 16 bytes. A file that is not regular (refused
// without being opened), that its group or others can read or write, or
// that is over MaxTokenFile bytes is refused.
func ReadToken(path string) (string, error) {
	// Nothing but a regular file is opened (opening a device can act, a
	// FIFO would wait for its writer); non-blocking, and what was opened
	// checked again, for a path replaced in between.
	if fi, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("read token: %w", err)
	} else if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("read token %s: not a regular file", path)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("read token %s: not a regular file", path)
	}
	if why := exposed(fi.Mode().Perm()); why != "" {
		return "", fmt.Errorf("read token %s: mode %v: %s (want 0600 or 0400)", path, fi.Mode().Perm(), why)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	if len(b) > MaxTokenFile {
		return "", fmt.Errorf("read token %s: larger than %d bytes", path, MaxTokenFile)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	tok = strings.TrimSpace(tok)
	if len(tok) < 16 {
		return "", fmt.Errorf("read token %s: shorter than 16 bytes", path)
	}
	return tok, nil
}

// exposed says who besides the owner may use a token file of mode perm,
// or "" when nobody may.
func exposed(perm os.FileMode) string {
	var who []string
	if perm&0o070 != 0 {
		who = append(who, "its group")
	}
	if perm&0o007 != 0 {
		who = append(who, "others")
	}
	if who == nil {
		return ""
	}
	return strings.Join(who, " and ") + " may read or write it"
}
