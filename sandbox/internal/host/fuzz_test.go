//go:build linux

package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/wire"
	"github.com/psych-runtime/psych/test/contract"
)

// FuzzServe drives the host core (Begin, Supervise, Finish, Result) with a
// fake child: a goroutine at the other end of a real socketpair, with real
// pipes for its stdout and stderr, that plays a script decoded from the
// fuzz input. A script is any sequence of well-formed calls, calls with
// arbitrary ids and names, results, frames of arbitrary bodies, raw
// garbage, bad length prefixes (zero, over the cap, 2^32-1, a cap-sized
// frame never sent), truncated frames, output, frames of the wrong type,
// and an end: the program exits, or the run's context is cancelled.
//
// An oracle decodes the same byte stream with wire's decoder and the
// wire protocol's rules (a call after the result, an id that
// repeats or goes back, an undeclared binding, a second result, a frame
// of another type, any decoding error, a frame cut short before any
// result), and says how the run must end. Every exec checks:
//   - Supervise and Finish return within a bound that means "hang";
//   - a run the oracle calls a violation is killed by the host and its
//     Result is a ProtocolError failure with no value; any other run is
//     not, and its Result carries the program's result frame (value or
//     failure) or, with none, an Exit failure; a cancelled run's Supervise
//     returns context.Canceled;
//   - every binding reply reaches the child as the binding answered it
//     (echo's value, BindingError for an error, invalid JSON or a reply
//     over the frame cap);
//   - stdout and stderr come back as written, capped, and Request.Output
//     was handed exactly that, every call before Finish returned;
//   - a suspended run is thawed again;
//   - nothing is left: the goroutine count and the open fds come back to
//     what they were before the exec, and nothing panics.
func FuzzServe(f *testing.F) {
	// The seeds are testdata/fuzz/FuzzServe, one file per scenario, named
	// for it: a call and a result, each binding's answer, a suspension, a
	// call that blocks until the run ends, each protocol rule broken, each
	// bad length prefix, truncation before and after the result, output
	// over the cap, a cancel.
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzServeOne(t, data)
	})
}

// Script operations: an input is a config byte, then operations, each an
// opcode byte (modulo opCount) and its operands.
const (
	opCall      = iota // a well-formed call to a declared binding, the next id
	opCallRaw          // a call frame with an arbitrary id, name and args
	opResult           // a result frame: a value, a failure, or a malformed one
	opGarbage          // raw bytes, no framing
	opFrame            // a length prefix and an arbitrary body
	opBadHeader        // a length prefix of 0, the cap+1, 2^32-1, or the cap (never sent)
	opOutput           // bytes on stdout or stderr
	opOtherType        // a frame of a type the child may not send, or of none
	opExit             // the program exits: every fd closes
	opCancel           // the caller cancels the run's context
	opTruncate         // a frame cut short, then the program exits
	opCount
)

// The bindings the fake run declares, and what each does (fzBindings).
var fzDeclared = []string{"echo", "fail", "bad", "huge", "null", "suspend", "slow"}

// Names a raw call may use: the declared ones and some that are not.
var fzNames = append(append([]string(nil), fzDeclared...), "run_code", "", "ech", "echo ", "__import__", "\u00e9", strings.Repeat("n", 70))

// fzReader reads operands; past the end it reads zeros.
type fzReader struct {
	b []byte
	i int
}

func (r *fzReader) more() bool { return r.i < len(r.b) }
func (r *fzReader) byte() byte {
	if r.i >= len(r.b) {
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}
func (r *fzReader) bytes(n int) []byte {
	end := min(r.i+n, len(r.b))
	out := r.b[r.i:end]
	r.i = end
	return out
}

// fzScript is a decoded input.
type fzScript struct {
	maxFrame int
	freeze   bool
	meter    bool
	exitCode int
	stream   []byte // everything the child writes on the wire, in order
	outputs  []fzOutput
	end      int // opExit or opCancel
}

// fzOutput is output written after the first at bytes of the wire stream.
type fzOutput struct {
	at     int
	stderr bool
	data   []byte
}

func fzFrame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func fzMarshal(m any) []byte {
	b, err := wire.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// parseScript decodes an input. Any input is a script.
func parseScript(data []byte) *fzScript {
	r := &fzReader{b: data}
	cfg := r.byte()
	s := &fzScript{maxFrame: 4096, freeze: cfg&0x04 != 0, meter: cfg&0x08 != 0, exitCode: int(cfg>>5) & 1, end: opExit}
	if cfg&0x03 == 2 {
		s.maxFrame = 1 << 16
	}
	var lastID uint64
	for r.more() {
		switch r.byte() % opCount {
		case opCall:
			name := fzDeclared[int(r.byte())%len(fzDeclared)]
			// Mostly the next id or one after it; now and then the same
			// id again, or the one before.
			switch d := r.byte() % 8; d {
			case 0:
			case 1:
				lastID--
			default:
				lastID += uint64(d+1) / 4
				lastID++
			}
			args, _ := json.Marshal(map[string]string{"s": string(r.bytes(int(r.byte() % 32)))})
			s.stream = append(s.stream, fzFrame(fzMarshal(&wire.Call{ID: lastID, Name: name, Args: args}))...)
		case opCallRaw:
			id := binary.BigEndian.Uint64(append(r.bytes(8), make([]byte, 8)...))
			name := fzNames[int(r.byte())%len(fzNames)]
			nb, _ := json.Marshal(name)
			args := []string{`{}`, `null`, `[1]`, `{"a":`, `"x"`, `{"a":{"b":[true,null,1e308]}}`}[int(r.byte())%6]
			s.stream = append(s.stream, fzFrame([]byte(fmt.Sprintf(`{"type":"call","id":%d,"name":%s,"args":%s}`, id, nb, args)))...)
		case opResult:
			var body []byte
			switch r.byte() % 5 {
			case 0:
				body = fzMarshal(&wire.Result{Value: json.RawMessage(fmt.Sprint(r.byte()))})
			case 1:
				typ := []string{"ValueError", "MemoryError", "SystemExit"}[int(r.byte())%3]
				body = fzMarshal(&wire.Result{Failure: &wire.Failure{Type: typ, Message: "m", Traceback: "t", Errno: int(r.byte() % 30)}})
			case 2:
				body = []byte(`{"type":"result","failure":{"message":"no type"}}`) // malformed
			case 3:
				body = fzMarshal(&wire.Result{})
			case 4:
				v, _ := json.Marshal(string(r.bytes(int(r.byte() % 32))))
				body = fzMarshal(&wire.Result{Value: v})
			}
			s.stream = append(s.stream, fzFrame(body)...)
		case opGarbage:
			s.stream = append(s.stream, r.bytes(int(r.byte()%32))...)
		case opFrame:
			n := int(r.byte() % 64)
			body := r.bytes(n)
			s.stream = append(s.stream, binary.BigEndian.AppendUint32(nil, uint32(n))...)
			s.stream = append(s.stream, body...)
		case opBadHeader:
			n := []uint32{0, uint32(s.maxFrame) + 1, 0xffffffff, uint32(s.maxFrame)}[r.byte()%4]
			s.stream = binary.BigEndian.AppendUint32(s.stream, n)
		case opOutput:
			stderr := r.byte()&1 != 0
			n := int(r.byte())
			s.outputs = append(s.outputs, fzOutput{at: len(s.stream), stderr: stderr, data: bytes.Repeat([]byte{'o'}, n)})
		case opOtherType:
			body := [][]byte{
				fzMarshal(&wire.Reply{ID: 1, Value: json.RawMessage(`1`)}),
				fzMarshal(&wire.Start{V: 1, Code: "x"}),
				[]byte(`{"type":"exec","code":"x"}`),
				[]byte(`{"id":1}`),
			}[r.byte()%4]
			s.stream = append(s.stream, fzFrame(body)...)
		case opExit:
			return s
		case opCancel:
			s.end = opCancel
			return s
		case opTruncate:
			n := int(r.byte()%32) + 1
			body := r.bytes(n)
			s.stream = binary.BigEndian.AppendUint32(s.stream, uint32(len(body)+1+int(r.byte()%8)))
			s.stream = append(s.stream, body...)
			return s
		}
	}
	return s
}

// fzEvent is a frame the host reads from the stream, as the oracle sees it.
type fzEvent struct {
	end       int // offset just past the frame (or header) in the stream
	call      *wire.Call
	violation bool
	// atEOF: the violation is a frame cut short, which the host sees only
	// at the end of the stream, when the program exits.
	atEOF bool
}

// fzVerdict is how the run must end, by the oracle.
type fzVerdict struct {
	events    []fzEvent
	violation bool // the host must see a protocol violation
	result    *wire.Result
	// slow: a call to the blocking binding; the host reads nothing past it.
	slow bool
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// oracle applies the decoder and the protocol rules to the stream.
func oracle(s *fzScript) fzVerdict {
	var v fzVerdict
	cr := &countingReader{r: bytes.NewReader(s.stream)}
	dec := wire.NewDecoder(cr, s.maxFrame)
	declared := map[string]bool{}
	for _, n := range fzDeclared {
		declared[n] = true
	}
	var lastID uint64
	anyCall := false
	for {
		m, err := dec.Next()
		if err != nil {
			ev := fzEvent{end: len(s.stream)}
			switch {
			case err == io.EOF:
			case errors.Is(err, wire.ErrTruncated):
				// A frame cut short is the program's violation only when
				// no result came before it and the host did not end the
				// run itself (a cancelled run is cut short by the kill).
				ev.violation, ev.atEOF = v.result == nil && s.end != opCancel, true
			default:
				ev.violation = true
			}
			v.violation = ev.violation
			v.events = append(v.events, ev)
			return v
		}
		ev := fzEvent{end: cr.n}
		switch m := m.(type) {
		case *wire.Call:
			switch {
			case v.result != nil, anyCall && m.ID <= lastID, !declared[m.Name]:
				ev.violation = true
			default:
				anyCall, lastID = true, m.ID
				ev.call = m
			}
		case *wire.Result:
			if v.result != nil {
				ev.violation = true
			} else {
				v.result = m
			}
		default:
			ev.violation = true
		}
		v.events = append(v.events, ev)
		if ev.violation {
			v.violation = true
			return v
		}
		if ev.call != nil && ev.call.Name == "slow" {
			v.slow = true
			return v
		}
	}
}

// fzBindings answer the declared names.
type fzBindings struct{ maxFrame int }

func (fzBindings) List() []sandbox.Binding {
	out := make([]sandbox.Binding, len(fzDeclared))
	for i, n := range fzDeclared {
		out[i] = sandbox.Binding{Name: n, Params: []string{"s"}}
	}
	return out
}

func (b fzBindings) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	switch name {
	case "echo":
		return args, nil
	case "fail":
		return nil, errors.New("the binding failed")
	case "bad":
		return json.RawMessage(`{"unclosed":`), nil
	case "huge":
		return json.RawMessage(`"` + strings.Repeat("h", b.maxFrame) + `"`), nil
	case "null":
		return nil, nil
	case "suspend":
		resume, err := sandbox.Suspend(ctx)
		if err != nil {
			return json.RawMessage(`"not suspended"`), nil
		}
		resume()
		return json.RawMessage(`"suspended"`), nil
	case "slow":
		<-ctx.Done() // the run's end cancels it
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("no binding %q", name)
}

// fzFreezer is a freezer that records the run's state.
type fzFreezer struct {
	mu     sync.Mutex
	frozen bool
}

func (z *fzFreezer) freeze(frozen bool) error {
	z.mu.Lock()
	z.frozen = frozen
	z.mu.Unlock()
	return nil
}

// fzRun is the fake run's processes: its fds, and Exited.
type fzRun struct {
	conn           *net.UnixConn
	stdout, stderr *os.File
	exited         chan struct{}
	once           sync.Once
	killed         chan struct{}
	killOnce       sync.Once
}

// exit is the run's processes ending: every fd they held closes, then the
// host's wait returns.
func (r *fzRun) exit() {
	r.once.Do(func() {
		r.conn.Close()
		r.stdout.Close()
		r.stderr.Close()
		close(r.exited)
	})
}

func (r *fzRun) kill() {
	r.killOnce.Do(func() { close(r.killed) })
	r.exit()
}

func fuzzServeOne(t *testing.T, data []byte) {
	s := parseScript(data)
	want := oracle(s)
	bound := time.Duration(float64(10*time.Second) * contract.TimeScale())
	goroutines, fds := runtime.NumGoroutine(), testutil.CountFDs()

	// What Request.Output was handed, per stream; a call once Finish has
	// returned is an error.
	var outMu sync.Mutex
	var streamed [3]strings.Builder
	var outLate bool
	finishedOut := false
	output := func(st sandbox.Stream, data string) {
		outMu.Lock()
		defer outMu.Unlock()
		outLate = outLate || finishedOut
		streamed[st].WriteString(data)
	}
	req, err := Prepare(sandbox.Request{Code: "x", Bindings: fzBindings{maxFrame: s.maxFrame}, Limits: sandbox.Limits{WallSeconds: 3600}, Output: output},
		sandbox.DefaultLimits(), s.maxFrame, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The host's end as the subprocess backend has it: a blocking file.
	hostEnd := os.NewFile(uintptr(pair[0]), "wire-host")
	childFile := os.NewFile(uintptr(pair[1]), "wire-child")
	fc, err := net.FileConn(childFile)
	childFile.Close()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	run := &fzRun{conn: fc.(*net.UnixConn), stdout: outW, stderr: errW, exited: make(chan struct{}), killed: make(chan struct{})}
	const maxOutput = 300
	setup := Setup{
		Request: req, Wire: hostEnd, MaxFrame: s.maxFrame, MaxOutput: maxOutput,
		Stdout: outR, Stderr: errR, Exited: run.exited, Kill: run.kill, Started: time.Now(),
	}
	z := &fzFreezer{}
	if s.freeze {
		setup.Freeze = z.freeze
	}
	if s.meter {
		setup.Meter = fzStatsMeter{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := Begin(ctx, setup)

	childErr := make(chan error, 1)
	var wrote [2]bytes.Buffer
	go func() { childErr <- fzChild(s, want, run, cancel, bound, &wrote) }()

	supervised := make(chan error, 1)
	go func() { supervised <- e.Supervise(ctx) }()
	// The child's own checks fail first (within bound), and say why.
	var supErr error
	var cerr error
	childDone := false
	for waiting := true; waiting; {
		select {
		case supErr = <-supervised:
			waiting = false
		case cerr = <-childErr:
			childDone = true
			childErr = nil
			if cerr != nil {
				t.Fatal(cerr)
			}
		case <-time.After(2 * bound):
			t.Fatalf("Supervise did not return within %v (stream %q)\n%s", 2*bound, s.stream, fzStacks())
		}
	}
	// The backend's teardown: the processes are gone; the host closes its
	// ends once the server and the drains are done.
	finished := make(chan struct{})
	go func() {
		e.Finish()
		outMu.Lock()
		finishedOut = true
		outMu.Unlock()
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(bound):
		t.Fatalf("Finish did not return within %v (stream %q)\n%s", bound, s.stream, fzStacks())
	}
	if !childDone {
		select {
		case cerr = <-childErr:
		case <-time.After(bound):
			t.Fatalf("the fake child did not end within %v\n%s", bound, fzStacks())
		}
	}
	hostEnd.Close()
	outR.Close()
	errR.Close()
	if cerr != nil {
		t.Fatal(cerr)
	}
	killed := false
	select {
	case <-run.killed:
		killed = true
	default:
	}
	status := ExitStatus{Code: s.exitCode}
	if killed {
		status = ExitStatus{Signal: syscall.SIGKILL}
	}
	res := e.Result(Outcome{Status: status})
	srv := e.srv
	for i, c := range []*Capture{&e.stdout, &e.stderr} {
		w := wrote[i].Bytes()
		if exp := w[:min(len(w), maxOutput)]; c.Text() != string(exp) || c.Truncated() != (len(w) > maxOutput) {
			t.Fatalf("stream %d: kept %d bytes (truncated %v) of %d written", i+1, len(c.Text()), c.Truncated(), len(w))
		}
		outMu.Lock()
		got := streamed[i+1].String()
		outMu.Unlock()
		if got != c.Text() {
			t.Fatalf("stream %d: Output was handed %d bytes, the Result keeps %d", i+1, len(got), len(c.Text()))
		}
	}
	outMu.Lock()
	late := outLate
	outMu.Unlock()
	if late {
		t.Fatal("an Output call after Finish returned")
	}

	switch {
	case s.end == opCancel && !want.violation:
		if !errors.Is(supErr, context.Canceled) || !killed {
			t.Fatalf("cancelled run: Supervise %v, killed %v; want context.Canceled and a kill", supErr, killed)
		}
	case supErr != nil:
		t.Fatalf("Supervise: %v, with no cancel", supErr)
	}
	if got := srv.ProtocolError() != nil; got != want.violation {
		t.Fatalf("protocol error %v, oracle says violation=%v\nstream %q", srv.ProtocolError(), want.violation, s.stream)
	}
	if want.violation {
		if res.Failure == nil || res.Failure.Type != sandbox.FailureProtocol || res.Value != nil || res.LimitHit != "" {
			t.Fatalf("a violation's result: %+v, failure %+v; want a ProtocolError and no value", res, res.Failure)
		}
		if !killed && !want.events[len(want.events)-1].atEOF {
			// (A frame cut short shows only once the program is gone.)
			t.Fatal("the host did not kill a run that broke the protocol")
		}
	}
	if want.violation || s.end == opCancel {
		fzCheckLeaks(t, goroutines, fds, bound)
		return
	}
	if killed {
		t.Fatal("the host killed a run that kept to the protocol")
	}
	switch r := want.result; {
	case r == nil:
		if res.Failure == nil || res.Failure.Type != sandbox.FailureExit {
			t.Fatalf("no result frame: failure %+v, want an Exit failure", res.Failure)
		}
	case r.Failure != nil:
		if res.Failure == nil || res.Failure.Type != r.Failure.Type || res.Value != nil {
			t.Fatalf("the program's failure %+v came back as %+v, value %s", r.Failure, res.Failure, res.Value)
		}
	default:
		if !fzSameJSON(res.Value, r.Value) {
			t.Fatalf("value %s, the program sent %s", res.Value, r.Value)
		}
		if (s.exitCode == 0) != (res.Failure == nil) {
			t.Fatalf("exit %d after a result: failure %+v", s.exitCode, res.Failure)
		}
	}
	z.mu.Lock()
	frozen := z.frozen
	z.mu.Unlock()
	if frozen {
		t.Fatal("the run was left frozen")
	}
	fzCheckLeaks(t, goroutines, fds, bound)
}

// fzStatsMeter is a meter with nothing used.
type fzStatsMeter struct{}

func (fzStatsMeter) Stats() (cgroups.Stats, error) {
	return cgroups.Stats{CPUKnown: true, PidsCurrent: 1}, nil
}

// fzChild plays the script. It writes the stream frame by frame as the
// oracle split it, reads the reply to each call it must wait for and
// checks it, and ends as the script says.
func fzChild(s *fzScript, want fzVerdict, run *fzRun, cancel context.CancelFunc, bound time.Duration, wrote *[2]bytes.Buffer) error {
	dec := wire.NewDecoder(run.conn, 0)
	// The bootstrap reads the start frame before the program runs. (A
	// child that left it unread would make the host's last read fail with
	// ECONNRESET rather than EOF.)
	run.conn.SetReadDeadline(time.Now().Add(bound))
	m, err := dec.Next()
	if st, ok := m.(*wire.Start); err != nil || !ok || st.Code != "x" || len(st.Bindings) != len(fzDeclared) {
		return fmt.Errorf("the first frame: %#v, %v; want the start frame", m, err)
	}
	pos, out := 0, 0
	output := func(o fzOutput) {
		w := run.stdout
		if o.stderr {
			w = run.stderr
		}
		if _, err := w.Write(o.data); err == nil {
			wrote[btoi(o.stderr)].Write(o.data)
		}
	}
	// write sends the stream up to upTo, with the output due on the way.
	write := func(upTo int) error {
		for pos < upTo || out < len(s.outputs) && s.outputs[out].at <= pos {
			if out < len(s.outputs) && s.outputs[out].at <= pos {
				output(s.outputs[out])
				out++
				continue
			}
			next := upTo
			if out < len(s.outputs) && s.outputs[out].at < next {
				next = s.outputs[out].at
			}
			if _, err := run.conn.Write(s.stream[pos:next]); err != nil {
				return err
			}
			pos = next
		}
		return nil
	}
	for _, ev := range want.events {
		if ev.violation && !ev.atEOF {
			// The host ends the run on its own, as soon as it read this.
			write(len(s.stream))
			select {
			case <-run.killed:
				return nil
			case <-time.After(bound):
				return fmt.Errorf("the host did not end the run within %v of a violation (stream %q)", bound, s.stream)
			}
		}
		if err := write(ev.end); err != nil {
			return fmt.Errorf("write the stream: %w", err)
		}
		if ev.call == nil || ev.call.Name == "slow" {
			continue
		}
		run.conn.SetReadDeadline(time.Now().Add(bound))
		m, err := dec.Next()
		if err != nil {
			return fmt.Errorf("the reply to call %d (%s): %w", ev.call.ID, ev.call.Name, err)
		}
		rep, ok := m.(*wire.Reply)
		if !ok || rep.ID != ev.call.ID {
			return fmt.Errorf("the reply to call %d: %#v", ev.call.ID, m)
		}
		if err := checkReply(ev.call, rep); err != nil {
			return err
		}
	}
	if !want.slow {
		// Past a blocking call the host reads nothing more: stop there.
		if err := write(len(s.stream)); err != nil {
			return fmt.Errorf("write the stream: %w", err)
		}
		for _, o := range s.outputs[out:] {
			output(o)
		}
	}
	if s.end == opCancel {
		cancel()
		select {
		case <-run.killed:
			return nil
		case <-time.After(bound):
			return fmt.Errorf("the host did not kill a cancelled run within %v", bound)
		}
	}
	run.exit()
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkReply checks a binding's reply against what fzBindings answers.
func checkReply(c *wire.Call, r *wire.Reply) error {
	wantErr := map[string]bool{"fail": true, "bad": true, "huge": true}[c.Name]
	switch {
	case wantErr:
		if r.Error == nil || r.Error.Type != "BindingError" || r.Value != nil {
			return fmt.Errorf("%s's reply %+v: want a BindingError", c.Name, r)
		}
	case r.Error != nil:
		return fmt.Errorf("%s's reply is an error: %+v", c.Name, r.Error)
	case c.Name == "echo":
		if !fzSameJSON(r.Value, c.Args) {
			return fmt.Errorf("echo's reply %s, its args %s", r.Value, c.Args)
		}
	case c.Name == "null":
		if r.Value != nil {
			return fmt.Errorf("null's reply %s", r.Value)
		}
	case c.Name == "suspend":
		if s := string(r.Value); s != `"suspended"` && s != `"not suspended"` {
			return fmt.Errorf("suspend's reply %s", s)
		}
	}
	return nil
}

func fzSameJSON(a, b json.RawMessage) bool {
	var x, y any
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b) || string(a)+string(b) == "null"
	}
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// fzCheckLeaks waits, within bound, for the goroutines and fds to come back
// to what they were before the exec.
func fzCheckLeaks(t *testing.T, goroutines, fds int, bound time.Duration) {
	t.Helper()
	end := time.Now().Add(bound)
	for {
		g, f := runtime.NumGoroutine(), testutil.CountFDs()
		if g <= goroutines && f <= fds {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("leaked: %d goroutines (before %d), %d fds (before %d)\n%s", g, goroutines, f, fds, fzStacks())
		}
		time.Sleep(time.Millisecond)
	}
}

func fzStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
