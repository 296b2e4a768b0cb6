//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pyfacts

import (
	"encoding/json"
	"fmt"

	"golang.org/x/sys/unix"
)

// blobPayload is a blob entry's payload: the key it was built for. The
// bytes are the entry's tail.
type blobPayload struct {
	Key string `json:"key"`
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
	body, tail, err := readBody(dfd, entry)
	if err == nil {
		var p blobPayload
		switch err = decodeStrict(body, &p); {
		case err != nil:
			err = fmt.Errorf("entry %s has a malformed payload: %w", entry, err)
		case p.Key != key:
			err = fmt.Errorf("entry %s is for another key", entry)
		default:
			if err = check(tail); err == nil {
				return tail, outcome{hit: true}, nil
			}
			err = fmt.Errorf("entry %s: %w", entry, err)
		}
	} else {
		_, o.untrusted = err.(untrustedError)
	}
	o.reason = err.Error()
	b, err := build()
	if err != nil {
		return nil, o, err
	}
	raw, err := json.Marshal(blobPayload{Key: key})
	if err == nil {
		err = writeEnvelope(dfd, entry, raw, b)
	}
	o.writeErr = err
	return b, o, nil
}
