package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

// startedLog records a run's Request.Started calls, and what breaks their
// promises: a call after Run returned, an Output call or a binding call
// before Started.
type startedLog struct {
	returned atomic.Bool // Run has returned
	panics   bool        // Started panics after recording

	mu       sync.Mutex
	calls    int
	warm     bool
	problems []string
}

func (l *startedLog) started(warm bool) {
	if l.returned.Load() {
		l.problem("Started(%v) after Run returned", warm)
	}
	l.mu.Lock()
	l.calls++
	l.warm = warm
	l.mu.Unlock()
	if l.panics {
		panic("a Started that panics")
	}
}

// before notes what happened, failing unless Started came first.
func (l *startedLog) before(what string) {
	l.mu.Lock()
	n := l.calls
	l.mu.Unlock()
	if n == 0 {
		l.problem("%s before Started", what)
	}
}

func (l *startedLog) problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.problems) < 10 {
		l.problems = append(l.problems, fmt.Sprintf(format, args...))
	}
}

// check fails t on a broken promise, after a pause in which a late call
// would show, and unless Started was called want times.
func (l *startedLog) check(t *testing.T, s *suite, want int) {
	t.Helper()
	time.Sleep(s.scaled(200 * time.Millisecond))
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.problems {
		t.Error(p)
	}
	if l.calls != want {
		t.Errorf("Started was called %d times; want %d", l.calls, want)
	}
}

// startedBindings is one binding, first, that notes its call in a
// startedLog.
type startedBindings struct{ l *startedLog }

func (b startedBindings) List() []sandbox.Binding { return []sandbox.Binding{{Name: "first"}} }

func (b startedBindings) Call(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	b.l.before("a binding call")
	return json.RawMessage(`"called"`), nil
}

// started: Request.Started is called once per run that starts, before its
// first binding call and its first Output call, with warm equal to the
// Result's Isolation.Warm (a full pool's first run: true); a Started that
// panics changes nothing of the run; a run refused before it starts (a bad
// request, a context already ended) never calls it; a run cancelled while
// its program runs called it once, and never after Run returned.
func (s *suite) started(t *testing.T) {
	sb := s.b.New(t, Options{})
	const code = "import sys\nv = first()\nsys.stderr.write('err\\n'); sys.stderr.flush()\nprint('out', flush=True)\nv"
	for _, panics := range []bool{false, true} {
		name := "Started"
		if panics {
			name = "Panics"
		}
		t.Run(name, func(t *testing.T) {
			l := &startedLog{panics: panics}
			output := func(st sandbox.Stream, data string) { l.before("an Output call for " + st.String()) }
			ctx, cancel := context.WithTimeout(context.Background(), s.scaled(2*time.Minute))
			defer cancel()
			res, err := sb.Run(ctx, sandbox.Request{Code: code, Bindings: startedBindings{l}, Output: output, Started: l.started})
			l.returned.Store(true)
			if err != nil {
				t.Fatalf("Run returned a Go error for a program's outcome: %v", err)
			}
			s.checkWarm(t, res)
			wantSuccess(t, res)
			if string(res.Value) != `"called"` || res.Stdout != "out\n" || res.Stderr != "err\n" {
				t.Errorf("value %s, stdout %q, stderr %q; want \"called\", \"out\\n\", \"err\\n\"", res.Value, res.Stdout, res.Stderr)
			}
			l.check(t, s, 1)
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.warm != res.Isolation.Warm {
				t.Errorf("Started(warm %v), the Result's isolation.warm %v", l.warm, res.Isolation.Warm)
			}
			if s.b.Warm && !panics && !l.warm {
				t.Errorf("a full pool's first run: Started(warm false), cold reason %q", res.Isolation.ColdReason)
			}
		})
	}
	t.Run("Refused", func(t *testing.T) {
		l := &startedLog{}
		res, err := sb.Run(context.Background(), sandbox.Request{Code: "None", Bindings: namedBindings{"run_code"}, Started: l.started})
		if !errors.Is(err, sandbox.ErrInvalidRequest) || res != nil {
			t.Errorf("a reserved binding name: %+v, %v; want ErrInvalidRequest", res, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, err = sb.Run(ctx, sandbox.Request{Code: "None", Started: l.started})
		if !errors.Is(err, context.Canceled) || res != nil {
			t.Errorf("an ended context: %+v, %v; want context.Canceled", res, err)
		}
		l.returned.Store(true)
		l.check(t, s, 0)
	})
	t.Run("Cancelled", func(t *testing.T) {
		l := &startedLog{}
		ctx, cancel := context.WithTimeout(context.Background(), s.scaled(2*time.Minute))
		defer cancel()
		var once sync.Once
		output := func(st sandbox.Stream, data string) {
			l.before("an Output call")
			if strings.Contains(data, "go") {
				once.Do(cancel)
			}
		}
		res, err := sb.Run(ctx, sandbox.Request{Code: "import time\nprint('go', flush=True)\ntime.sleep(100)", Output: output, Started: l.started})
		l.returned.Store(true)
		if !errors.Is(err, context.Canceled) || res != nil {
			t.Fatalf("Run cancelled as its program ran: %+v, %v; want context.Canceled", res, err)
		}
		l.check(t, s, 1)
	})
}
