//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pyfacts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/sandbox/internal/trustcache"
)

// blobPayload is a blob entry's payload: the key it was built for and, for
// an executable's own blob (LoadExeBlob), the executable's path. The bytes
// are the entry's tail.
type blobPayload struct {
	Key   string `json:"key"`
	Owner string `json:"owner,omitempty"`
}

// validBlobName: 1 to 64 of a-z 0-9 and -, starting with a letter.
func validBlobName(n string) bool {
	if len(n) == 0 || len(n) > 64 || n[0] < 'a' || n[0] > 'z' {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func blobEntryName(name string) string { return "blob-" + name + ".json" }

func loadBlob(opts Options, name, key string, build func() ([]byte, error), check func([]byte) error) ([]byte, outcome, error) {
	return loadBlobAs(opts, name, "", key, build, check)
}

// exeBlobName is the entry name of owner's blob of family name.
func exeBlobName(name, owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return name + "-" + hex.EncodeToString(sum[:8])
}

// loadExeBlob is LoadExeBlob for the executable at exe with identity id.
func loadExeBlob(opts Options, name, exe, id, key string, build func() ([]byte, error), check func([]byte) error) ([]byte, outcome, error) {
	if !validBlobName(name) || len(name) > 64-17 {
		return nil, outcome{}, fmt.Errorf("%w: blob name %q", ErrInvalidOptions, name)
	}
	b, o, err := loadBlobAs(opts, exeBlobName(name, exe), exe, id+"; "+key, build, check)
	if err == nil && !o.hit && !o.bypassed && o.writeErr == nil {
		pruneExeBlobs(opts.Dir, name, exe)
	}
	return b, o, err
}

// pruneExeBlobs removes, after owner's blob of family name was written,
// the family's entries whose executable path is gone (a test binary, an
// uninstalled build). A rebuilt executable at the same path has the same
// entry, replaced. It never fails the load.
func pruneExeBlobs(dir, name, owner string) {
	dfd, o := openCache(dir)
	if o.bypassed {
		return
	}
	defer unix.Close(dfd)
	ents, err := trustcache.Entries(dfd)
	if err != nil {
		return
	}
	prefix, keep := "blob-"+name+"-", blobEntryName(exeBlobName(name, owner))
	for _, de := range ents {
		n := de.Name()
		if n == keep || !de.Type().IsRegular() || !strings.HasPrefix(n, prefix) || !strings.HasSuffix(n, ".json") {
			continue
		}
		body, _, err := trustcache.Read(dfd, n)
		if err != nil {
			continue
		}
		var p blobPayload
		if decodeStrict(body, &p) != nil || p.Owner == "" || blobEntryName(exeBlobName(name, p.Owner)) != n {
			continue
		}
		var st unix.Stat_t
		if errors.Is(unix.Lstat(p.Owner, &st), unix.ENOENT) {
			unix.Unlinkat(dfd, n, 0)
		}
	}
}

func loadBlobAs(opts Options, name, owner, key string, build func() ([]byte, error), check func([]byte) error) ([]byte, outcome, error) {
	if !validBlobName(name) {
		return nil, outcome{}, fmt.Errorf("%w: blob name %q", ErrInvalidOptions, name)
	}
	dfd, o := openCache(opts.Dir)
	if o.bypassed {
		b, err := build()
		return b, o, err
	}
	defer unix.Close(dfd)
	entry := blobEntryName(name)
	body, tail, err := trustcache.Read(dfd, entry)
	if err == nil {
		var p blobPayload
		switch err = decodeStrict(body, &p); {
		case err != nil:
			err = fmt.Errorf("entry %s has a malformed payload: %w", entry, err)
		case p.Key != key || p.Owner != owner:
			err = fmt.Errorf("entry %s is for another key", entry)
		default:
			if err = check(tail); err == nil {
				return tail, outcome{hit: true}, nil
			}
			err = fmt.Errorf("entry %s: %w", entry, err)
		}
	} else {
		o.untrusted = errors.Is(err, trustcache.ErrUntrusted)
	}
	o.reason = err.Error()
	b, err := build()
	if err != nil {
		return nil, o, err
	}
	raw, err := json.Marshal(blobPayload{Key: key, Owner: owner})
	if err == nil {
		err = trustcache.Write(dfd, entry, raw, b)
	}
	o.writeErr = err
	return b, o, nil
}
