package resources

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

// Outside ids per run. As root, every run takes outside ids of its own from
// a range, as isolate gives each box its own uid, so that the kernel's
// per-uid accounting (pipe buffers, inotify instances and watches, the
// processes RLIMIT_NPROC counts, POSIX message queue bytes, keys) never
// crosses runs. The default range is DefaultIDFirst to
// DefaultIDFirst+DefaultIDCount-1, uids and gids alike (DefaultIDs); IDs.Check
// refuses a range that a user, a group or a subordinate range of the host
// (/etc/passwd, /etc/group, /etc/subuid, /etc/subgid) already uses.
const (
	DefaultIDFirst uint32 = 100000000
	DefaultIDCount uint32 = 65536
)

// IDLockPath is where every psych host on the machine claims outside ids:
// one open file description per claim, holding an OFD write lock on the
// bytes [id, id+span) of this file. The kernel drops the lock when the
// claim is released or its process dies, SIGKILL included, so a crashed
// host leaves no stale claim. Tests may point it elsewhere.
var IDLockPath = "/run/psych/ids.lock"

// IDWait bounds how long Claim waits for a free id when every id of the
// range is claimed, before it fails with sandbox.ErrBusy.
const IDWait = 5 * time.Second

// IDs are outside ids, the one type for them in psych: Count consecutive
// uids from UID and as many gids from GID; Count 0 or 1 is one pair. A
// backend's RunAs is IDs, so is the range runs claim theirs from
// (DefaultIDs), and Claim takes span ids of each kind out of it for a run.
type IDs struct {
	UID, GID uint32
	Count    uint32
}

// DefaultIDs is the range every run of a root host claims its own ids
// from: DefaultIDCount from DefaultIDFirst, uids and gids alike.
func DefaultIDs() IDs { return IDs{UID: DefaultIDFirst, GID: DefaultIDFirst, Count: DefaultIDCount} }

// Size is how many ids of each kind r holds: Count, at least 1.
func (r IDs) Size() uint32 { return max(r.Count, 1) }

// slots is how many runs of span ids the range holds at once.
func (r IDs) slots(span uint32) uint32 { return r.Size() / max(span, 1) }

// Valid reports a range that overflows or includes id 0.
func (r IDs) Valid() error {
	switch {
	case r.UID == 0 || r.GID == 0:
		return fmt.Errorf("outside id range from %d:%d: id 0 is never used", r.UID, r.GID)
	case uint64(r.UID)+uint64(r.Size()) > 1<<32-1 || uint64(r.GID)+uint64(r.Size()) > 1<<32-1:
		return fmt.Errorf("outside id range %d:%d+%d overflows", r.UID, r.GID, r.Size())
	}
	return nil
}

// Check refuses (sandbox.ErrInvalidConfig) a range whose uids overlap a
// uid in /etc/passwd or a range in /etc/subuid, or whose gids overlap a gid
// in /etc/group or a range in /etc/subgid: those ids belong to someone, and
// a run must own nothing of the host's. A file that does not exist has
// nothing to overlap.
func (r IDs) Check() error {
	if err := r.Valid(); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	for _, f := range []struct {
		path  string
		field int    // the id's field, or -1 for a subordinate range
		first uint32 // r.UID or r.GID
	}{{"/etc/passwd", 2, r.UID}, {"/etc/group", 2, r.GID}, {"/etc/subuid", -1, r.UID}, {"/etc/subgid", -1, r.GID}} {
		last := uint64(f.first) + uint64(r.Size()) - 1
		if err := overlap(f.path, f.field, uint64(f.first), last); err != nil {
			return fmt.Errorf("%w: outside id range %d-%d: %w", sandbox.ErrInvalidConfig, f.first, last, err)
		}
	}
	return nil
}

// Mapped reports whether every id of the range, the uids and the gids, is
// mapped in this process's user namespace (/proc/self/uid_map, gid_map): a
// root host inside a container or another user namespace may have only a
// few ids to give.
func (r IDs) Mapped() error {
	for _, f := range []struct {
		path  string
		first uint32
	}{{"/proc/self/uid_map", r.UID}, {"/proc/self/gid_map", r.GID}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		if !covered(string(b), uint64(f.first), uint64(f.first)+uint64(r.Size())) {
			return fmt.Errorf("ids %d-%d are not all mapped in this user namespace (%s: %s)", f.first, uint64(f.first)+uint64(r.Size())-1, f.path, strings.Join(strings.Fields(string(b)), " "))
		}
	}
	return nil
}

// covered reports whether the inside ids [lo, hi) are all in the map's
// lines ("inside outside count").
func covered(idMap string, lo, hi uint64) bool {
	for lo < hi {
		next := lo
		for _, line := range strings.Split(idMap, "\n") {
			f := strings.Fields(line)
			if len(f) != 3 {
				continue
			}
			in, err1 := strconv.ParseUint(f[0], 10, 32)
			n, err2 := strconv.ParseUint(f[2], 10, 64)
			if err1 == nil && err2 == nil && in <= lo && lo < in+n {
				next = in + n
			}
		}
		if next == lo {
			return false
		}
		lo = next
	}
	return true
}

// overlap reports the first line of path whose id (field) or subordinate
// range (name:start:count) meets [first, last].
func overlap(path string, field int, first, last uint64) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		parts := strings.Split(line, ":")
		lo, hi := uint64(0), uint64(0)
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "#"):
			continue
		case field >= 0 && len(parts) > field:
			id, err := strconv.ParseUint(parts[field], 10, 32)
			if err != nil {
				continue
			}
			lo, hi = id, id
		case field < 0 && len(parts) == 3:
			start, err1 := strconv.ParseUint(parts[1], 10, 32)
			count, err2 := strconv.ParseUint(parts[2], 10, 32)
			if err1 != nil || err2 != nil || count == 0 {
				continue
			}
			lo, hi = start, start+count-1
		default:
			continue
		}
		if lo <= last && hi >= first {
			return fmt.Errorf("%s:%d (%q) uses ids in it", path, n, line)
		}
	}
	return sc.Err()
}
