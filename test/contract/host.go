package contract

import (
	"os"
	"testing"

	"github.com/psych-runtime/psych/sandbox"
)

// host: every result names the node that ran it (isolation.host, uname's
// nodename of the host process), a failed run's as a clean one's.
func (s *suite) host(t *testing.T) {
	want := s.b.Host
	if want == "" {
		var err error
		if want, err = os.Hostname(); err != nil {
			t.Fatalf("this host's name: %v", err)
		}
	}
	sb := s.b.New(t, Options{})
	for _, code := range []string{"1", "raise ValueError"} {
		res := s.runWith(t, sb, code, sandbox.Limits{}, nil)
		if res.Isolation == nil {
			t.Fatalf("%q: a result without an attestation", code)
		}
		if got := res.Isolation.Host; got != want {
			t.Errorf("%q: isolation.host %q, want %q", code, got, want)
		}
	}
}
