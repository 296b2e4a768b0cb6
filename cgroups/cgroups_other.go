//go:build !linux

package cgroups

import (
	"fmt"
	"os"
	"time"
)

// Cgroups are Linux's: elsewhere every entry point fails with
// ErrUnavailable, and a Run cannot exist.

type manager struct {
	mode   string
	layout Layout
}

type run struct {
	name      string
	swapGuard string
	mode      string
}

func detectLayout() (Layout, error) { return LayoutNone, nil }

func (m *manager) init(Config) error {
	return fmt.Errorf("detect cgroups: %w: not Linux", ErrUnavailable)
}

func (m *manager) parents() map[string]string { return nil }

func (m *manager) newRun(*run, string, Limits) error {
	return fmt.Errorf("new run cgroup: %w: not Linux", ErrUnavailable)
}

func (r *run) paths() map[string]string       { return nil }
func (r *run) cloneFD() int                   { return -1 }
func (r *run) attach(int) error               { return ErrUnavailable }
func (r *run) openTasks() ([]*os.File, error) { return nil, ErrUnavailable }
func (r *run) cpu() (time.Duration, error)    { return 0, ErrUnavailable }
func (r *run) stats() (Stats, error)          { return Stats{}, ErrUnavailable }
func (r *run) kill() error                    { return ErrUnavailable }
func (r *run) freeze() error                  { return ErrUnavailable }
func (r *run) thaw() error                    { return ErrUnavailable }
func (r *run) remove() error                  { return nil }
func (r *run) setLimitsLive(Limits) error     { return ErrUnavailable }
func (r *run) resetPeaks() error              { return ErrUnavailable }
func (r *run) events() (int64, int64, error)  { return 0, 0, ErrUnavailable }

func open(int) (*Run, error) { return nil, ErrUnavailable }
