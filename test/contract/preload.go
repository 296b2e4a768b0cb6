package contract

import (
	"fmt"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
)

// preloadProgram imports pandas and describes a 1,000-row frame; its value
// says whether pandas was in sys.modules before its import, and the mean.
const preloadProgram = `import sys
before = 'pandas' in sys.modules
import pandas as pd
d = pd.DataFrame({'v': range(1000)}).describe()
[before, float(d.loc['mean', 'v'])]`

// preload: a pool that preloads pandas serves a program's import of it
// warm, pandas already in sys.modules (what a program can tell); a request
// whose environment holds a variable the preload reads at import
// (OPENBLAS_NUM_THREADS, which OpenBLAS reads through C's getenv, and
// PANDAS_COPY_ON_WRITE, which pandas reads through os.environ) runs cold
// and says why, while one holding a variable nobody reads stays warm; and
// what one run does to the preloaded modules is not in the next. A backend
// without a pool runs the program cold, with the same value, and has no
// more to check.
func (s *suite) preload(t *testing.T) {
	// Whether the interpreter has pandas, asked of a sandbox that does not
	// preload it: a pool that does would fail every fill without it.
	res := s.runReq(t, s.b.New(t, Options{}), sandbox.Request{Code: "import importlib.util\nimportlib.util.find_spec('pandas') is None"})
	wantSuccess(t, res)
	if string(res.Value) == "true" {
		if testutil.InCI() {
			t.Fatal("CI's interpreter lacks pandas (scripts/deps.sh and image.sh install it)")
		}
		if testutil.HostLaneOnly(t, "the VM's rootfs has no pandas") {
			return
		}
		t.Skip("the interpreter has no pandas")
	}
	sb := s.b.New(t, Options{
		EnvAllowlist: []string{"OPENBLAS_NUM_THREADS", "PANDAS_COPY_ON_WRITE", "PSYCH_CONTRACT_PRELOAD"},
		Preload:      []string{"pandas"},
	})

	res = s.runReq(t, sb, sandbox.Request{Code: preloadProgram, Env: map[string]string{"PSYCH_CONTRACT_PRELOAD": "x"}})
	wantSuccess(t, res)
	want := fmt.Sprintf("[%v,499.5]", s.b.Warm)
	if got := string(res.Value); got != want || res.Isolation.Warm != s.b.Warm {
		t.Errorf("import pandas with a variable nobody reads: value %s, warm %v (%q); want %s, warm %v",
			got, res.Isolation.Warm, res.Isolation.ColdReason, want, s.b.Warm)
	}

	if !s.b.Warm {
		return // the rest is about a pool: without one every run is cold and fresh (NoStateAcrossRuns)
	}
	for name, value := range map[string]string{"OPENBLAS_NUM_THREADS": "1", "PANDAS_COPY_ON_WRITE": "0"} {
		res = s.runReq(t, sb, sandbox.Request{Code: preloadProgram + "+ [__import__('os').environ['" + name + "']]", Env: map[string]string{name: value}})
		wantSuccess(t, res)
		if got, want := string(res.Value), `[false,499.5,"`+value+`"]`; got != want {
			t.Errorf("env %s: value %s, want %s (a cold run: pandas imported by the program)", name, got, want)
		}
		if res.Isolation.Warm || !strings.Contains(res.Isolation.ColdReason, name) {
			t.Errorf("env %s: warm %v, cold reason %q; want cold, naming it", name, res.Isolation.Warm, res.Isolation.ColdReason)
		}
	}

	// Two runs of the same pool: the first changes pandas, numpy and the
	// environment; the second finds none of it.
	leave := `import os, pandas as pd, numpy as np
pd.set_option('display.max_rows', 7)
pd.psych_left = np.psych_left = 1
os.environ['PSYCH_CONTRACT_PRELOAD_LEFT'] = '1'
np.random.seed(7)
float(np.random.random())`
	check := `import os, pandas as pd, numpy as np
left = []
if pd.get_option('display.max_rows') == 7: left.append('option')
if hasattr(pd, 'psych_left') or hasattr(np, 'psych_left'): left.append('attribute')
if 'PSYCH_CONTRACT_PRELOAD_LEFT' in os.environ: left.append('env')
left`
	first := s.runReq(t, sb, sandbox.Request{Code: leave})
	wantSuccess(t, first)
	res = s.runReq(t, sb, sandbox.Request{Code: check})
	wantSuccess(t, res)
	if got := string(res.Value); got != "[]" {
		t.Errorf("the next run of the pool found %s left by the one before", got)
	}
	if !first.Isolation.Warm || !res.Isolation.Warm {
		t.Errorf("the two runs: warm %v and %v (%q, %q); want both warm", first.Isolation.Warm, res.Isolation.Warm, first.Isolation.ColdReason, res.Isolation.ColdReason)
	}
}
