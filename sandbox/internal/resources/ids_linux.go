package resources

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/eintr"
	"github.com/psych-runtime/psych/sandbox"
)

// claimTurn spreads where this process's claims start looking.
var claimTurn atomic.Uint32

// Claim takes a free slot of span ids of the range for one run: it returns
// the slot's first uid (its gids are as far from r.GID) and the function
// that releases it. Slots are locked by uid. When every slot is claimed,
// by this process or another psych host, it waits until one is released,
// until ctx is done or for IDWait at most, and then fails with an error
// wrapping sandbox.ErrBusy (retry later).
func (r IDs) Claim(ctx context.Context, span uint32) (uint32, func(), error) {
	if err := r.Valid(); err != nil {
		return 0, nil, fmt.Errorf("%w: %w", sandbox.ErrInvalidConfig, err)
	}
	if span == 0 || r.slots(span) == 0 {
		return 0, nil, fmt.Errorf("%w: outside id range of %d ids holds no run of %d", sandbox.ErrInvalidConfig, r.Size(), span)
	}
	if err := os.MkdirAll(filepath.Dir(IDLockPath), 0o700); err != nil {
		return 0, nil, fmt.Errorf("%w: claim an outside id: %w", sandbox.ErrHostFault, err)
	}
	fd, err := unix.Open(IDLockPath, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: claim an outside id: open %s: %w", sandbox.ErrHostFault, IDLockPath, err)
	}
	slots := r.slots(span)
	start := (claimTurn.Add(1) + uint32(os.Getpid())*7919) % slots
	deadline := time.Now().Add(IDWait)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		for i := uint32(0); i < slots; i++ {
			base := r.UID + ((start+i)%slots)*span
			lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: int64(base), Len: int64(span)}
			err := eintr.Retry(func() error { return unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk) })
			if err == nil {
				return base, func() { unix.Close(fd) }, nil
			}
			if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES) {
				unix.Close(fd)
				return 0, nil, fmt.Errorf("%w: claim outside id %d: %w", sandbox.ErrHostFault, base, err)
			}
		}
		if err := ctx.Err(); err != nil {
			unix.Close(fd)
			return 0, nil, err
		}
		if time.Now().After(deadline) {
			unix.Close(fd)
			return 0, nil, fmt.Errorf("%w: all %d outside id slots from %d are in use (waited %s)", sandbox.ErrBusy, slots, r.UID, IDWait)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}
