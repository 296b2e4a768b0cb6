package pool

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/psych-runtime/psych/sandbox/internal/host"
)

// A pooled sandbox with modules to preload (PoolConfig.Preload) sends one
// frame before it blocks on its start frame, in the wire's framing (a
// 4-byte big-endian length, then one JSON object):
//
//	{"type": "preloaded", "env": [NAME...], "all": false, "modules": [TOP...]}
//	{"type": "preloaded", "error": "import x: ModuleNotFoundError: ..."}
//
// env are the variables the imports read through os.environ (os.getenv
// too), all says they iterated over the whole environment, modules are the
// top-level packages the imports loaded. The frame comes from the pool's
// own interpreter before any program runs, and is read as hostile all the
// same: bounded, strict, names checked.

// Bounds on the preloaded frame.
const (
	maxPreloadedFrame = 1 << 20
	maxPreloadedNames = 4096
	maxPreloadedName  = 256
)

// Preloaded is what a pooled sandbox's preload reported.
type Preloaded struct {
	Env     []string `json:"env"`
	All     bool     `json:"all"`
	Modules []string `json:"modules"`
}

// ReadPreloaded reads the preloaded frame from r, exactly its bytes (r
// unbuffered: what follows on the wire is the run's). A frame that says the
// imports failed is an error wrapping ErrPreload.
func ReadPreloaded(r io.Reader) (*Preloaded, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, fmt.Errorf("read the preloaded frame: %w", err)
	}
	n := binary.BigEndian.Uint32(head[:])
	if n == 0 || n > maxPreloadedFrame {
		return nil, fmt.Errorf("read the preloaded frame: length %d outside 1 to %d", n, maxPreloadedFrame)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("read the preloaded frame: %w", err)
	}
	var f struct {
		Type  string  `json:"type"`
		Error *string `json:"error"`
		Preloaded
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil || dec.More() || f.Type != "preloaded" {
		return nil, fmt.Errorf("read the preloaded frame: not a preloaded frame (%v)", err)
	}
	if f.Error != nil {
		msg := *f.Error
		if len(msg) > 1024 {
			msg = msg[:1024] + "…"
		}
		return nil, fmt.Errorf("%w: %s", ErrPreload, strings.ToValidUTF8(msg, "\uFFFD"))
	}
	if len(f.Env) > maxPreloadedNames || len(f.Modules) > maxPreloadedNames {
		return nil, fmt.Errorf("read the preloaded frame: more than %d names", maxPreloadedNames)
	}
	for _, name := range slices.Concat(f.Env, f.Modules) {
		if name == "" || len(name) > maxPreloadedName || !utf8.ValidString(name) || strings.ContainsAny(name, "=\x00") {
			return nil, fmt.Errorf("read the preloaded frame: bad name %.64q", name)
		}
	}
	return &f.Preloaded, nil
}

// PreloadEnv is the table of variables that libraries read at import
// where no Python-level record can see it (C code calling getenv), by the
// top-level package whose import loads them. A name ending in '*' is a
// prefix. The pool goes by what its imports loaded, not by the names it
// was asked for: preloading pandas loads numpy, and numpy's row applies.
var PreloadEnv = map[string][]string{
	// OpenBLAS (GOTO names too), OpenMP runtimes, MKL, BLIS and Accelerate
	// size their thread pools and pick kernels as numpy loads them; NPY_
	// and NUMPY_ are numpy's own switches.
	"numpy": {"OPENBLAS_*", "GOTO_*", "GOTOBLAS_*", "OMP_*", "KMP_*", "GOMP_*", "MKL_*", "BLIS_*", "VECLIB_*", "ACCELERATE_*", "NPY_*", "NUMPY_*"},
	"scipy": {"SCIPY_*", "OPENBLAS_*", "OMP_*", "KMP_*", "GOMP_*", "MKL_*"},
	// numexpr sizes its pool at import; pandas loads it when present.
	"numexpr": {"NUMEXPR_*", "OMP_*", "MKL_*"},
	"pandas":  {"PANDAS_*"},
	// matplotlib finds its config, cache and default backend at import.
	"matplotlib": {"MPL*", "MATPLOTLIBRC", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "DISPLAY", "WAYLAND_DISPLAY", "FONTCONFIG_*"},
	"PIL":        {"PILLOW_*"},
	"sklearn":    {"SKLEARN_*", "JOBLIB_*", "LOKY_*", "OMP_*"},
}

// ImportEnv gathers what a pool's preloads read from the environment, as
// each fill reports it, and decides which requests must run cold. It only
// grows; a request is checked against it before and after a sandbox is
// taken, so the sandbox it gets was reported before the check. Safe for
// concurrent use.
type ImportEnv struct {
	mu      sync.Mutex
	env     map[string]bool
	all     bool
	modules map[string]bool
}

// NewImportEnv is an empty ImportEnv.
func NewImportEnv() *ImportEnv {
	return &ImportEnv{env: map[string]bool{}, modules: map[string]bool{}}
}

// Add records one fill's report. What it keeps is bounded: past
// maxPreloadedNames variables or packages in all, it takes the imports for
// readers of the whole environment (every request with a variable of its
// own runs cold) and keeps no more names.
func (e *ImportEnv) Add(p *Preloaded) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = e.all || p.All
	for _, n := range p.Env {
		if len(e.env) >= maxPreloadedNames {
			e.all = true
			break
		}
		e.env[n] = true
	}
	for _, m := range p.Modules {
		if len(e.modules) >= maxPreloadedNames {
			e.all = true
			break
		}
		e.modules[m] = true
	}
}

// ColdReason says why a request whose program gets the variables names
// (besides the sandbox's own) cannot be served by a sandbox whose imports
// ran without them; "" when none of them is read at import. A nil
// ImportEnv (no preload) never says anything.
func (e *ImportEnv) ColdReason(names []string) string {
	if e == nil || len(names) == 0 {
		return ""
	}
	own := host.SandboxEnv()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range names {
		switch {
		case slices.Contains(own, n):
		case e.all:
			return fmt.Sprintf("env %s: the preloaded modules read the whole environment at import", n)
		case e.env[n]:
			return fmt.Sprintf("env %s is read by the preloaded modules at import", n)
		default:
			if m := e.tableLocked(n); m != "" {
				return fmt.Sprintf("env %s may be read at import by the preloaded %s (C libraries)", n, m)
			}
		}
	}
	return ""
}

// tableLocked names a loaded package whose PreloadEnv row matches name.
func (e *ImportEnv) tableLocked(name string) string {
	for _, m := range slices.Sorted(maps.Keys(PreloadEnv)) {
		if e.modules[m] && matchesAny(name, PreloadEnv[m]) {
			return m
		}
	}
	return ""
}

// EnvNames are the names of the variables a program gets beyond the
// sandbox's own, as Env builds them: each allowlisted one the request sets
// or the host has set.
func EnvNames(allowlist []string, req map[string]string) []string {
	var names []string
	for _, name := range allowlist {
		if _, ok := req[name]; ok {
			names = append(names, name)
		} else if _, ok := os.LookupEnv(name); ok {
			names = append(names, name)
		}
	}
	return names
}
