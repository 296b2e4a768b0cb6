package setup

import "errors"

// Undo is what a setup acquired so far, each as the function that gives it
// back. The zero value is empty and ready. It is not safe for concurrent
// use: one goroutine sets up, and the same or a later one unwinds.
type Undo struct{ fns []func() error }

// Push adds f, undone before everything pushed earlier.
func (u *Undo) Push(f func() error) { u.fns = append(u.fns, f) }

// PushClose adds an undo that cannot fail.
func (u *Undo) PushClose(f func()) { u.Push(func() error { f(); return nil }) }

// Unwind runs every undo, newest first, even past a failing one, and
// empties u: a second Unwind does nothing. It returns the failures joined.
func (u *Undo) Unwind() error {
	var errs []error
	for i := len(u.fns) - 1; i >= 0; i-- {
		if err := u.fns[i](); err != nil {
			errs = append(errs, err)
		}
	}
	u.fns = nil
	return errors.Join(errs...)
}

// OnError unwinds u if *err is set, joining what failed to *err (which is
// left as it is where nothing failed): a function that acquires in phases
// defers it on its named error.
func (u *Undo) OnError(err *error) {
	if *err == nil {
		return
	}
	if uerr := u.Unwind(); uerr != nil {
		*err = errors.Join(*err, uerr)
	}
}
