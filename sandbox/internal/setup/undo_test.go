package setup

import (
	"errors"
	"slices"
	"testing"
)

func TestUndoOrder(t *testing.T) {
	var u Undo
	var got []int
	fail := errors.New("fail")
	u.Push(func() error { got = append(got, 1); return nil })
	u.Push(func() error { got = append(got, 2); return fail })
	u.PushClose(func() { got = append(got, 3) })
	err := u.Unwind()
	if want := []int{3, 2, 1}; !slices.Equal(got, want) {
		t.Errorf("undone %v, want %v (newest first, past a failure)", got, want)
	}
	if !errors.Is(err, fail) {
		t.Errorf("Unwind = %v, want the failure", err)
	}
	if err := u.Unwind(); err != nil || len(got) != 3 {
		t.Errorf("a second Unwind = %v and undid %v, want nothing", err, got)
	}
}

func TestUndoOnError(t *testing.T) {
	undone := 0
	setup := func(failAt int) (retErr error) {
		var u Undo
		defer u.OnError(&retErr)
		for i := range 3 {
			if i == failAt {
				return errors.New("phase failed")
			}
			u.Push(func() error { undone++; return errors.New("undo failed") })
		}
		return nil
	}
	err := setup(2)
	if undone != 2 {
		t.Errorf("a setup failing at its third phase undid %d, want its first two", undone)
	}
	if err == nil || err.Error() != "phase failed\nundo failed\nundo failed" {
		t.Errorf("setup = %q, want the phase's failure and the undos'", err)
	}
	phase := errors.New("alone")
	var u Undo
	u.PushClose(func() {})
	if err := phase; func() error { u.OnError(&err); return err }() != phase {
		t.Error("OnError changed an error whose undo did not fail")
	}
	undone = 0
	if err := setup(-1); err != nil || undone != 0 {
		t.Errorf("a setup that succeeded returned %v and undid %d, want nothing undone", err, undone)
	}
}
