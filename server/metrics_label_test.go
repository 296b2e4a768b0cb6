package server

import "testing"

// TestColdLabel: each ColdReason the backends give (as the host core words
// them) maps to its own bounded label, the preload's included; a reason no
// case knows is other.
func TestColdLabel(t *testing.T) {
	for why, want := range map[string]string{
		"":                                  "",
		"the request grants the network":    "network",
		"cpu_seconds above the pool's cap":  "limits",
		"stack_bytes other than the pool's": "stack_bytes",
		"env PANDAS_X is read by the preloaded modules at import":                             "preload",
		"env OPENBLAS_NUM_THREADS may be read at import by the preloaded numpy (C libraries)": "preload",
		"env X: the preloaded modules read the whole environment at import":                   "preload",
		"env LD_PRELOAD is read by the loader or libc as the interpreter starts":              "start_env",
		"no pooled sandbox was ready":                                                         "none_ready",
		"a pooled sandbox failed its check at dispatch: x":                                    "dispatch_failed",
		"something new": "other",
	} {
		if got := coldLabel(why); got != want {
			t.Errorf("coldLabel(%q) = %q, want %q", why, got, want)
		}
	}
}
