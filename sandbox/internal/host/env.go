package host

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SandboxEnv are the variables every backend sets itself: HOME, TMPDIR and
// the working directory are the run's own tmpfs; PATH leads to the
// interpreter; PYTHONDONTWRITEBYTECODE=1 writes no bytecode; MALLOC_ARENA_MAX=2
// keeps threads that allocate from each getting a 64 MiB malloc arena,
// which would exhaust RLIMIT_AS before process_count; LC_ALL=C.UTF-8
// makes the interpreter's encoding UTF-8 without CPython's locale coercion
// adding a variable of its own. An allowlist may not name them.
var sandboxEnv = []string{"HOME", "TMPDIR", "PATH", "PYTHONDONTWRITEBYTECODE", "MALLOC_ARENA_MAX", "LC_ALL"}

// SandboxEnv returns the names of the variables the sandbox sets itself.
func SandboxEnv() []string { return slices.Clone(sandboxEnv) }

// CheckAllowlist refuses an allowlist that names a variable the sandbox sets
// itself, an empty name, or a name with '=' or NUL in it.
func CheckAllowlist(names []string) error {
	for _, name := range names {
		switch {
		case name == "":
			return fmt.Errorf("env allowlist: a variable's name is empty")
		case strings.ContainsAny(name, "=\x00"):
			return fmt.Errorf("env allowlist: bad name %q: it holds '=' or NUL", name)
		case slices.Contains(sandboxEnv, name):
			return fmt.Errorf("env allowlist: %q is set by the sandbox itself", name)
		}
	}
	return nil
}

// Env is the child's environment, built from nothing: the sandbox's own
// variables (PATH leads to python's directory, then the usual ones), then
// each allowlisted variable the request sets (req) or, failing that, the
// host has set, with the host's value now.
func Env(home, python string, allowlist []string, req map[string]string) []string {
	env := []string{
		"HOME=" + home,
		"TMPDIR=" + home,
		"PATH=" + filepath.Dir(python) + ":/usr/local/bin:/usr/bin:/bin",
		"PYTHONDONTWRITEBYTECODE=1",
		"MALLOC_ARENA_MAX=2",
		"LC_ALL=C.UTF-8",
	}
	for _, name := range allowlist {
		if v, ok := req[name]; ok {
			env = append(env, name+"="+v)
		} else if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// EnvKeys are env's names, sorted: what an attestation may show of an
// environment (never its values).
func EnvKeys(env []string) []string {
	keys := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
