package contract

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

// pinPipes fills the run's per-uid pipe-buffer quota (fs.pipe-user-pages-
// soft, 64 MiB by default) with 1 MiB pipes until the kernel refuses one,
// then calls other(), which runs growPipe on the same Sandbox meanwhile.
const pinPipes = `import errno, fcntl, os
F_SETPIPE_SZ = 1031
pipes, refused = [], None
while len(pipes) < 400:
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, F_SETPIPE_SZ, 1 << 20)
    except OSError as e:
        refused = errno.errorcode.get(e.errno, e.errno)
        os.close(r)
        os.close(w)
        break
    pipes.append((r, w))
[len(pipes), refused, other()]`

// growPipe asks for one 1 MiB pipe.
const growPipe = `import errno, fcntl, os
r, w = os.pipe()
try:
    fcntl.fcntl(w, 1031, 1 << 20)
    got = 'ok'
except OSError as e:
    got = errno.errorcode.get(e.errno, e.errno)
got`

// otherRun is other(): it runs a program on the same Sandbox, to its end,
// while the calling run waits in the call, and keeps its result.
type otherRun struct {
	sb      sandbox.Sandbox
	code    string
	timeout time.Duration
	res     chan *sandbox.Result
}

func (b otherRun) List() []sandbox.Binding { return []sandbox.Binding{{Name: "other"}} }
func (b otherRun) Call(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	res, err := b.sb.Run(ctx, sandbox.Request{Code: b.code})
	if err != nil {
		return nil, err
	}
	b.res <- res
	if res.Failure != nil {
		return nil, fmt.Errorf("the other run failed: %+v\nstderr: %s", *res.Failure, res.Stderr)
	}
	return res.Value, nil
}

// outsideUID is the run's uid outside, as the host read it.
func outsideUID(t *testing.T, res *sandbox.Result) int {
	t.Helper()
	if res.Isolation == nil || len(res.Isolation.Interpreter.UID) == 0 {
		t.Fatalf("no interpreter ids attested: %+v", res.Isolation)
	}
	return res.Isolation.Interpreter.UID[0]
}

// ownOutsideIDs (defect 12): concurrent runs have outside ids of their own,
// so the kernel's per-uid quotas do not cross them: while one run holds its
// whole pipe-buffer quota, another still gets a 1 MiB pipe.
func (s *suite) ownOutsideIDs(t *testing.T) {
	sb := s.b.New(t, Options{})
	other := otherRun{sb: sb, code: growPipe, timeout: s.scaled(time.Minute), res: make(chan *sandbox.Result, 1)}
	res := s.runWith(t, sb, pinPipes, sandbox.Limits{WallSeconds: 90, OpenFiles: 1024}, other)
	wantSuccess(t, res)
	var got []json.RawMessage
	if err := json.Unmarshal(res.Value, &got); err != nil || len(got) != 3 {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	var pinned int
	var refused, grown string
	json.Unmarshal(got[0], &pinned)
	json.Unmarshal(got[1], &refused)
	json.Unmarshal(got[2], &grown)
	if refused != "EPERM" || pinned == 0 {
		t.Fatalf("the pinning run held %d pipes of 1 MiB and then got %q: the quota was never reached", pinned, refused)
	}
	b := <-other.res
	if why := s.b.OneOutsideID; why != "" {
		if a, b := outsideUID(t, res), outsideUID(t, b); a != b {
			t.Errorf("one outside uid was declared (%s), but the runs had %d and %d", why, a, b)
		}
		t.Skipf("every run here has the same outside uid (%s): the kernel's per-uid quotas cross runs (the other's pipe: %s)", why, grown)
	}
	if grown != "ok" {
		t.Errorf("with the first run at its pipe quota (%d MiB), the other run's 1 MiB pipe: %s (outside uids %d and %d)",
			pinned, grown, outsideUID(t, res), outsideUID(t, b))
	}
	if a, b := outsideUID(t, res), outsideUID(t, b); a == b {
		t.Errorf("two concurrent runs share the outside uid %d", a)
	}
}
