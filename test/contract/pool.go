package contract

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

// requestEnv: a request's variables (on the allowlist) take the host's
// place for that run only; a name off the allowlist is refused.
func (s *suite) requestEnv(t *testing.T) {
	setenv(t, "PSYCH_CONTRACT_A", "host-a")
	sb := s.b.New(t, Options{EnvAllowlist: []string{"PSYCH_CONTRACT_A", "PSYCH_CONTRACT_B"}})
	code := "import os\n[os.environ.get('PSYCH_CONTRACT_A'), os.environ.get('PSYCH_CONTRACT_B'), os.getenv('PSYCH_CONTRACT_B')]"
	for _, tc := range []struct {
		env  map[string]string
		want []any
	}{
		{map[string]string{"PSYCH_CONTRACT_A": "req-a", "PSYCH_CONTRACT_B": "req-b"}, []any{"req-a", "req-b", "req-b"}},
		{nil, []any{"host-a", nil, nil}},
		{map[string]string{"PSYCH_CONTRACT_B": ""}, []any{"host-a", "", ""}},
	} {
		res := s.runReq(t, sb, sandbox.Request{Code: code, Env: tc.env})
		wantSuccess(t, res)
		if got := mustJSON(t, res.Value); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("env %v: the program saw %v, want %v", tc.env, got, tc.want)
		}
		keys := []string{}
		for _, k := range res.Isolation.EnvKeys {
			if k == "PSYCH_CONTRACT_A" || k == "PSYCH_CONTRACT_B" {
				keys = append(keys, k)
			}
		}
		want := []string{"PSYCH_CONTRACT_A"}
		if _, ok := tc.env["PSYCH_CONTRACT_B"]; ok {
			want = append(want, "PSYCH_CONTRACT_B")
		}
		sort.Strings(keys)
		if !reflect.DeepEqual(keys, want) {
			t.Errorf("env %v: attested env keys %v, want %v", tc.env, keys, want)
		}
	}
	_, err := sb.Run(context.Background(), sandbox.Request{Code: "1", Env: map[string]string{"PSYCH_CONTRACT_SECRET": "x"}})
	if !errors.Is(err, sandbox.ErrInvalidRequest) {
		t.Errorf("a variable off the allowlist: %v, want ErrInvalidRequest", err)
	}
}

// noStateAcrossRuns: what a run leaves (a /tmp file, the environment,
// sys.modules, builtins, an open fd, a lingering child) is not in the next
// run of the same Sandbox. Its allowlisted name is its own: no test sets it in
// the host, where another suite running in parallel would pass it in.
func (s *suite) noStateAcrossRuns(t *testing.T) {
	sb := s.b.New(t, Options{EnvAllowlist: []string{"PSYCH_CONTRACT_NOSTATE"}})
	leave := `
import os, sys, builtins, subprocess
open('/tmp/psych-marker', 'w').write('x')
os.environ['PSYCH_CONTRACT_LEFT'] = '1'
sys.modules['psych_contract_left'] = sys
builtins.psych_contract_left = 1
fd = os.open('/tmp/psych-marker', os.O_RDONLY)
os.dup2(fd, 50, inheritable=True)
subprocess.Popen(['sleep', '30'], start_new_session=True, pass_fds=(50,))
`
	wantSuccess(t, s.runReq(t, sb, sandbox.Request{Code: leave, Env: map[string]string{"PSYCH_CONTRACT_NOSTATE": "first"}}))
	check := `
import os, sys, builtins
left = []
if os.path.exists('/tmp/psych-marker'): left.append('tmp')
left += ['env ' + k for k in ('PSYCH_CONTRACT_LEFT', 'PSYCH_CONTRACT_NOSTATE') if k in os.environ]
if 'psych_contract_left' in sys.modules: left.append('modules')
if hasattr(builtins, 'psych_contract_left'): left.append('builtins')
try:
    os.fstat(50)
    left.append('fd')
except OSError:
    pass
for p in os.listdir('/proc'):
    if p.isdigit():
        try:
            if b'sleep' in open('/proc/%s/cmdline' % p, 'rb').read(): left.append('child')
        except OSError:
            pass
left
`
	res := s.runReq(t, sb, sandbox.Request{Code: check})
	wantSuccess(t, res)
	if left := mustJSON(t, res.Value); len(left.([]any)) > 0 {
		t.Errorf("the next run found %v left by the one before", left)
	}
}

// pool: a pooled backend's first run of a full pool is warm, with an age;
// one without a pool runs cold and gives no reason.
func (s *suite) pool(t *testing.T) {
	sb := s.b.New(t, Options{})
	res := s.runReq(t, sb, sandbox.Request{Code: "None"})
	wantSuccess(t, res)
	iso := res.Isolation
	if s.b.Warm && (!iso.Warm || iso.AgeSeconds <= 0) {
		t.Errorf("a full pool's first run: warm %v, age %v, cold reason %q; want warm with an age", iso.Warm, iso.AgeSeconds, iso.ColdReason)
	}
	b, _ := json.Marshal(iso)
	var m map[string]any
	json.Unmarshal(b, &m)
	if _, ok := m["warm"]; !ok {
		t.Errorf("the attestation has no warm field: %s", b)
	}
}

// runReq runs req on sb and checks what runWith checks.
func (s *suite) runReq(t *testing.T, sb sandbox.Sandbox, req sandbox.Request) *sandbox.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.scaled(2*time.Minute))
	defer cancel()
	res, err := sb.Run(ctx, req)
	if err != nil {
		t.Fatalf("Run returned a Go error for a program's outcome: %v", err)
	}
	if res == nil {
		t.Fatal("Run returned neither a result nor an error")
	}
	s.checkWarm(t, res)
	return res
}
