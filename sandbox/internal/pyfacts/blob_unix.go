//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pyfacts

import (
	"encoding/json"
	"fmt"
	"regexp"

	"golang.org/x/sys/unix"
)

// blobPayload is a blob entry's payload: the key it was built for. The
// bytes are the entry's tail.
type blobPayload struct {
	Key string `json:"key"`
}

var blobNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)

func blobEntryName(name string) string { return "blob-" + name + ".json" }

func loadBlob(opts Options, name, key string, build func() ([]byte, error), check func([]byte) error) ([]byte, outcome, error) {
	if !blobNameRE.MatchString(name) {
		return nil, outcome{}, fmt.Errorf("%w: blob name %q", ErrInvalidOptions, name)
	}
	dir := opts.Dir
	switch dir {
	case NoCache:
		b, err := build()
		return b, outcome{bypassed: true, reason: reasonOff}, err
	case "":
		if dir = defaultDir(); dir == "" {
			b, err := build()
			return b, outcome{bypassed: true, reason: reasonNoHome}, err
		}
	}
	dfd, untrusted, err := openDir(dir)
	if err != nil {
		b, berr := build()
		return b, outcome{bypassed: true, unusable: true, untrusted: untrusted, reason: err.Error()}, berr
	}
	defer unix.Close(dfd)
	entry := blobEntryName(name)
	o := outcome{}
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
