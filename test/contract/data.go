package contract

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
)

// dataProgram uses numpy (its BLAS and LAPACK), pandas and matplotlib as a
// data-analysis program does, writing its chart to TMPDIR (the Landlock
// fallback's /tmp is the host's, out of its reach); its value names the
// libraries it could not find instead.
const dataProgram = `import importlib.util, os, tempfile
missing = [m for m in ('numpy', 'pandas', 'matplotlib') if importlib.util.find_spec(m) is None]
if missing:
    out = {'missing': missing}
else:
    import numpy as np, pandas as pd, matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    a = np.array([[3.0, 1.0], [1.0, 2.0]])
    df = pd.DataFrame({'k': ['a', 'b', 'a'], 'v': [1, 2, 3]})
    fig, ax = plt.subplots()
    ax.plot(df['v'])
    png = os.path.join(tempfile.gettempdir(), 'plot.png')
    fig.savefig(png)
    out = {'solve': np.linalg.solve(a, np.array([9.0, 8.0])).round(6).tolist(),
           'product': (a @ a).tolist(),
           'sums': df.groupby('k')['v'].sum().to_dict(),
           'png': open(png, 'rb').read(8) == b'\x89PNG\r\n\x1a\n',
           'rc': os.access(matplotlib.matplotlib_fname(), os.R_OK)}
out`

// dataLibraries: numpy, pandas and matplotlib import and work under the
// default limits where the interpreter has them (psych's image and CI's
// host do): on Debian, BLAS and LAPACK are reached through
// /etc/alternatives and matplotlib's settings are /etc/matplotlibrc.
func (s *suite) dataLibraries(t *testing.T) {
	var got map[string]any
	s.value(t, dataProgram, &got)
	if m, ok := got["missing"]; ok {
		if testutil.InCI() {
			t.Fatalf("CI's interpreter lacks %v (scripts/deps.sh and image.sh install them)", m)
		}
		if testutil.HostLaneOnly(t, fmt.Sprintf("the VM's rootfs has no %v", m)) {
			return
		}
		t.Skipf("the interpreter has no %v", m)
	}
	want := map[string]any{
		"solve":   []any{2.0, 3.0},
		"product": []any{[]any{10.0, 5.0}, []any{5.0, 5.0}},
		"sums":    map[string]any{"a": 4.0, "b": 2.0},
		"png":     true,
		"rc":      true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("data work: got %v, want %v", got, want)
	}
}
