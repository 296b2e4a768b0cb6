package host

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/wire"
)

// Server answers the program's frames on one wire channel. It reads every
// frame as hostile: a malformed, oversized, unexpected or duplicate one is a
// protocol violation, which closes Violation; the caller then ends the run.
//
// It reads on while a binding call runs (after slowCall), so the program's
// result is taken when it arrives, whatever call is in flight (a thread of
// the program may still wait in one): the result cancels that call's context,
// and from then on a call is answered with a BindingError without running
// its binding. A call that fails to be answered does not stop the reading.
type Server struct {
	start     []byte
	dec       *wire.Decoder
	enc       *wire.Encoder
	bindings  sandbox.Bindings
	names     map[string]bool
	violation chan struct{}
	// hostKilled is set when the host itself ended the run: a frame cut
	// short then is not the program's violation.
	hostKilled atomic.Bool

	// Set by Serve's reader; read only after it returned.
	result   *wire.Result
	exit     *wire.Exit
	protoErr error
	lastID   uint64
	anyCall  bool

	mu       sync.Mutex
	finished bool               // the result or a violation arrived: no binding runs from now on
	cancel   context.CancelFunc // cancels the call in flight, if any

	calls   callQueue
	readers sync.WaitGroup // readers that took over, and the calls they left behind

	// slow fires when the call in flight runs past slowCall. One timer,
	// re-armed per call, allocates nothing; inFlight is the call's
	// generation (from gen), 0 when none runs, so a late firing meant for
	// an earlier call hands off at most the one in flight.
	slow     *time.Timer
	gen      atomic.Uint64
	inFlight atomic.Uint64

	// callTime is the host time the run's binding calls took, in ns.
	callTime atomic.Int64
}

// CallTime is the host time the run's binding calls have taken, all
// together (Usage.HostCallSeconds).
func (s *Server) CallTime() time.Duration { return time.Duration(s.callTime.Load()) }

// NewServer serves req on rw with frames of at most maxFrame bytes.
func NewServer(rw io.ReadWriter, req *Request, maxFrame int) *Server {
	s := &Server{
		start:     req.Start,
		dec:       wire.NewDecoder(bufio.NewReaderSize(rw, 64<<10), maxFrame),
		enc:       wire.NewEncoder(rw, maxFrame),
		bindings:  req.Bindings,
		names:     map[string]bool{},
		violation: make(chan struct{}),
	}
	for _, b := range req.Decls {
		s.names[b.Name] = true
	}
	return s
}

// Violation is closed on the program's first protocol violation.
func (s *Server) Violation() <-chan struct{} { return s.violation }

// HostKilled tells the server that the host ended the run.
func (s *Server) HostKilled() { s.hostKilled.Store(true) }

// Result is the program's result frame, nil if none arrived or the run
// broke the protocol; ProtocolError is the violation, if any. Both are valid
// once Serve returned.
func (s *Server) Result() *wire.Result {
	if s.protoErr != nil {
		return nil
	}
	return s.result
}

// Exit is the program's exit frame, nil if none arrived or the run broke
// the protocol; valid once Serve returned.
func (s *Server) Exit() *wire.Exit {
	if s.protoErr != nil {
		return nil
	}
	return s.exit
}

// ProtocolError is the program's protocol violation, nil if none.
func (s *Server) ProtocolError() error { return s.protoErr }

func (s *Server) fail(err error) {
	s.protoErr = err
	close(s.violation)
	s.finish()
}

// finish ends serving calls: the one in flight is cancelled, later ones are
// answered without running.
func (s *Server) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished = true
	if s.cancel != nil {
		s.cancel()
	}
}

// Serve sends the start frame and serves until the channel ends. Calls are
// served one at a time, in order, with a context derived from ctx: what
// Bindings.Call gets. The goroutine that reads a call runs it itself, so a
// round trip crosses no goroutine; a call still running after slowCall
// hands the reading to a new goroutine, so that the program's result is
// taken when it comes. While one runs so, at most one call waits behind
// it; the reader waits while one does.
func (s *Server) Serve(ctx context.Context) {
	// Sent here, not before the host starts watching: a child that does not
	// read it is still bound by the wall limit and the context. A start that
	// cannot be written means the interpreter is gone; its status tells why.
	if err := s.enc.WriteBody(s.start); err != nil {
		return
	}
	s.calls.cond = sync.NewCond(&s.calls.mu)
	s.slow = time.AfterFunc(time.Hour, func() { s.handOff(ctx) })
	s.slow.Stop()
	s.read(ctx)
	s.readers.Wait()
}

// handOff runs when a call is slow: a new reader takes over from the
// goroutine that runs it.
func (s *Server) handOff(ctx context.Context) {
	if g := s.inFlight.Load(); g != 0 && s.inFlight.CompareAndSwap(g, 0) {
		go func() { defer s.readers.Done(); s.read(ctx) }()
	}
}

// slowCall is how long a call runs on the reading goroutine before the
// reading moves to another.
const slowCall = time.Millisecond

// read is the reader: it reads frames until the channel ends, or until a
// call it runs is slow and a new reader has taken over.
func (s *Server) read(ctx context.Context) {
	for {
		m, err := s.dec.Next()
		if err != nil {
			// EOF, or the host closed the channel at teardown: the end. A
			// decoding error is the program's violation.
			if errors.Is(err, wire.ErrFrameTooLarge) || errors.Is(err, wire.ErrMalformed) ||
				errors.Is(err, wire.ErrUnknownType) || errors.Is(err, wire.ErrTruncated) && s.result == nil && !s.hostKilled.Load() {
				s.fail(fmt.Errorf("protocol: %w", err))
			}
			return
		}
		switch m := m.(type) {
		case *wire.Call:
			switch {
			case s.result != nil:
				s.fail(errors.New("protocol: call after result"))
				return
			case s.anyCall && m.ID <= s.lastID:
				s.fail(fmt.Errorf("protocol: call id %d repeats or goes back (last %d)", m.ID, s.lastID))
				return
			case !s.names[m.Name]:
				s.fail(fmt.Errorf("protocol: call to undeclared binding %.64q", m.Name))
				return
			}
			s.anyCall, s.lastID = true, m.ID
			if !s.queueBehind(m) && s.runHere(ctx, m) {
				return // a new reader took over while the call ran
			}
		case *wire.Result:
			if s.result != nil {
				s.fail(errors.New("protocol: second result"))
				return
			}
			s.result = m
			s.finish()
		case *wire.Exit:
			if s.result == nil || s.exit != nil {
				s.fail(errors.New("protocol: an exit frame not right after the result"))
				return
			}
			s.exit = m
		default:
			s.fail(fmt.Errorf("protocol: unexpected %T frame from the program", m))
			return
		}
	}
}

// callQueue orders the calls: one runs at a time, at most one waits.
type callQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	running bool
	next    *wire.Call
	gone    bool // a reply could not be written: the program is gone
}

// queueBehind queues c behind the call that runs (waiting while another
// is queued) and reports true; with none running, it marks c running and
// reports false: the caller runs it.
func (s *Server) queueBehind(c *wire.Call) bool {
	q := &s.calls
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.running {
		q.running = true
		return false
	}
	for q.next != nil {
		q.cond.Wait()
	}
	q.next = c
	return true
}

// runHere runs c on the reading goroutine and answers it. If it runs
// longer than slowCall, a new reader goroutine takes over; runHere then
// also runs what queues behind c, and reports true: this goroutine reads
// no more.
func (s *Server) runHere(ctx context.Context, c *wire.Call) bool {
	s.readers.Add(1) // done here, or by the reader that takes over
	gen := s.gen.Add(1)
	s.inFlight.Store(gen)
	s.slow.Reset(slowCall)
	s.answer(ctx, c)
	s.slow.Stop()
	if s.inFlight.CompareAndSwap(gen, 0) {
		s.readers.Done()
		s.calls.mu.Lock()
		s.calls.running = false // nothing queued: no one read meanwhile
		s.calls.mu.Unlock()
		return false
	}
	q := &s.calls
	for {
		q.mu.Lock()
		c := q.next
		q.next = nil
		if c == nil {
			q.running = false
		}
		q.cond.Broadcast()
		q.mu.Unlock()
		if c == nil {
			return true
		}
		s.answer(ctx, c)
	}
}

// answer runs c and writes its reply; once a reply cannot be written (the
// program is gone), later calls are not run.
func (s *Server) answer(ctx context.Context, c *wire.Call) {
	s.calls.mu.Lock()
	gone := s.calls.gone
	s.calls.mu.Unlock()
	if gone {
		return
	}
	reply := s.run(ctx, c)
	err := s.enc.Encode(reply)
	if errors.Is(err, wire.ErrFrameTooLarge) {
		err = s.enc.Encode(errorReply(c, "the host's reply to "+c.Name+" exceeds the frame cap"))
	}
	if err != nil {
		s.calls.mu.Lock()
		s.calls.gone = true
		s.calls.mu.Unlock()
	}
}

// run runs one call, cancelled by finish; once the program has finished
// it runs no binding.
func (s *Server) run(ctx context.Context, c *wire.Call) *wire.Reply {
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if s.finished {
		s.mu.Unlock()
		return errorReply(c, cancelled(c))
	}
	s.cancel = cancel
	s.mu.Unlock()
	reply := s.call(callCtx, c)
	s.mu.Lock()
	s.cancel = nil
	if s.finished && reply.Error != nil {
		reply = errorReply(c, cancelled(c)+": "+reply.Error.Message)
	}
	s.mu.Unlock()
	return reply
}

func cancelled(c *wire.Call) string {
	return "the program has finished: the call to " + c.Name + " was cancelled"
}

// call runs one binding. Its errors go back to the program as BindingError.
func (s *Server) call(ctx context.Context, c *wire.Call) *wire.Reply {
	start := time.Now()
	out, err := s.bindings.Call(ctx, c.Name, c.Args)
	s.callTime.Add(int64(time.Since(start)))
	if err != nil {
		return errorReply(c, err.Error())
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	if !json.Valid(out) {
		return errorReply(c, "the host's reply to "+c.Name+" is not valid JSON")
	}
	return &wire.Reply{ID: c.ID, Value: out}
}

func errorReply(c *wire.Call, msg string) *wire.Reply {
	return &wire.Reply{ID: c.ID, Error: &wire.ReplyError{Type: "BindingError", Message: msg}}
}
