package contract

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/demotools"
)

// ChannelPrelude is Python that finds the wire channel from inside the
// program (the first socket among its fds) and defines send(obj) and
// send_raw(bytes) on it, for hostile programs.
const ChannelPrelude = `import json, os, stat, sys, time
def _is_socket(fd):
    try:
        return stat.S_ISSOCK(os.fstat(fd).st_mode)
    except OSError:
        return False
CH = next(fd for fd in range(3, 256) if _is_socket(fd))
def send_raw(b):
    os.write(CH, b)
def send(obj):
    body = json.dumps(obj).encode()
    send_raw(len(body).to_bytes(4, 'big') + body)
`

// hostile runs a program that abuses the channel; the run must end with a
// ProtocolError failure (no Go error), promptly, leaving the host whole.
func (s *suite) hostile(t *testing.T) {
	cases := []struct {
		name, code string
	}{
		{"oversized length", "send_raw(b'\\xff\\xff\\xff\\xff')\ntime.sleep(30)"},
		{"not json", "send_raw(b'\\x00\\x00\\x00\\x05hello')\ntime.sleep(30)"},
		{"unknown type", "send({'type': 'exec', 'code': 'x'})\ntime.sleep(30)"},
		{"reply from child", "send({'type': 'reply', 'id': 1, 'value': 1})\ntime.sleep(30)"},
		{"undeclared binding", "send({'type': 'call', 'id': 1, 'name': 'run_code', 'args': {}})\ntime.sleep(30)"},
		{"repeated id", "send({'type': 'call', 'id': 9, 'name': 'echo', 'args': {}})\n" +
			"send({'type': 'call', 'id': 9, 'name': 'echo', 'args': {}})\ntime.sleep(30)"},
		{"second result", "send({'type': 'result', 'value': 1, 'failure': None})\n'the real result'"},
		{"truncated frame", "send_raw(b'\\x00\\x00\\x00\\x64{\"type\"')\nos._exit(0)"},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			res := s.run(t, ChannelPrelude+c.code, sandbox.Limits{WallSeconds: 20}, demotools.Bindings{})
			wantFailure(t, res, sandbox.FailureProtocol)
			if res.LimitHit != "" || res.Value != nil {
				t.Errorf("protocol violation: limit_hit %q, value %s", res.LimitHit, res.Value)
			}
			if res.Duration > s.scaled(10*time.Second) {
				t.Errorf("the violation took %v to end the run", res.Duration)
			}
		})
	}
}

// forgedResult: a result frame cannot set what the host measures.
func (s *suite) forgedResult(t *testing.T) {
	code := ChannelPrelude + "send({'type': 'result', 'value': 7, 'failure': None, 'limit_hit': 'wall_seconds', " +
		"'limit_source': 'kernel', 'network_denied': True, 'duration_seconds': 999, 'isolation': {'seccomp': 2}})\n" +
		"sys.stdout.flush()\nos._exit(0)"
	sb := s.b.New(t, Options{})
	clean := s.runWith(t, sb, "7", sandbox.Limits{}, nil)
	res := s.runWith(t, sb, code, sandbox.Limits{}, nil)
	wantSuccess(t, res)
	if string(res.Value) != "7" || res.NetworkDenied != clean.NetworkDenied || res.LimitHit != "" || res.LimitSource != "" || res.Duration > s.scaled(30*time.Second) {
		t.Fatalf("a forged result changed host-measured fields: %+v", res)
	}
	forged, _ := json.Marshal(withoutOutsideIDs(res.Isolation))
	honest, _ := json.Marshal(withoutOutsideIDs(clean.Isolation))
	if string(forged) != string(honest) {
		t.Fatalf("a forged result changed the attestation:\n%s\nwant\n%s", forged, honest)
	}
}

// withoutOutsideIDs is iso without the outside ids, which every run has of
// its own (OwnOutsideIDs), and a pooled sandbox's age: what two runs'
// attestations may differ in.
func withoutOutsideIDs(iso *sandbox.Isolation) *sandbox.Isolation {
	if iso == nil {
		return nil
	}
	c := *iso
	c.UIDMap, c.GIDMap = "", ""
	c.Init.UID, c.Init.GID, c.Interpreter.UID, c.Interpreter.GID = nil, nil, nil, nil
	c.AgeSeconds = 0
	return &c
}

// callFlood: a program that sends calls and never reads its replies cannot
// hang the host; the wall limit ends it.
func (s *suite) callFlood(t *testing.T) {
	code := ChannelPrelude + "for i in range(1, 20001):\n" +
		"    send({'type': 'call', 'id': i, 'name': 'echo', 'args': {'pad': 'x' * 100}})\ntime.sleep(60)"
	res := s.run(t, code, sandbox.Limits{WallSeconds: 3}, demotools.Bindings{})
	wantFailure(t, res, "")
	wantLimit(t, res, sandbox.LimitWallSeconds, sandbox.SourceHost)
	if res.Duration > s.scaled(15*time.Second) {
		t.Errorf("call flood ran %v past a 3 s wall limit", res.Duration)
	}
}
