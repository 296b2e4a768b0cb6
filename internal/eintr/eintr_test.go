package eintr

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// interrupted returns EINTR, bare or wrapped as a call's error, n times and
// then last.
func interrupted(n int, wrap bool, last error) (func() error, *int) {
	calls := 0
	return func() error {
		calls++
		if calls <= n {
			if wrap {
				return os.NewSyscallError("read", syscall.EINTR)
			}
			return syscall.EINTR
		}
		return last
	}, &calls
}

func TestRetry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		wrap  bool
		last  error
		calls int
	}{
		{"success", 0, false, nil, 1},
		{"interrupted twice", 2, false, nil, 3},
		{"wrapped EINTR", 2, true, nil, 3},
		{"other errno returned at once", 0, false, syscall.EAGAIN, 1},
		{"interrupted, then failed", 1, false, syscall.EBADF, 2},
	} {
		fn, calls := interrupted(tc.n, tc.wrap, tc.last)
		if err := Retry(fn); err != tc.last || *calls != tc.calls {
			t.Errorf("%s: Retry = %v after %d calls, want %v after %d", tc.name, err, *calls, tc.last, tc.calls)
		}
	}
}

func TestValue(t *testing.T) {
	fn, calls := interrupted(3, false, nil)
	v, err := Value(func() (int, error) {
		if err := fn(); err != nil {
			return -1, err
		}
		return 7, nil
	})
	if v != 7 || err != nil || *calls != 4 {
		t.Errorf("Value = %d, %v after %d calls, want 7, nil after 4", v, err, *calls)
	}
	fail := errors.New("refused")
	if v, err := Value(func() (string, error) { return "partial", fail }); v != "partial" || err != fail {
		t.Errorf("Value = %q, %v, want the call's own value and error", v, err)
	}
}
