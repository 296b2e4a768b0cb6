package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/sandbox"
)

// Sandbox is a sandbox.Sandbox whose runs a server makes (the `remote`
// backend): Run streams each run (Client.Stream) and answers its calls with
// the Request's Bindings.
//
// A Request's Bindings become tools the client declares, each taking any
// object (the server's schema check passes everything; Bindings.Call
// checks its own arguments), with its Doc as its description; none is
// destructive, so the server asks the client for no approval (a Binding
// that wants a person's word suspends its run with sandbox.Suspend, which
// freezes the run on the server). The Request's Started is called as the
// started event comes (once, however many the server sends), and its
// Output gets the stream's stdout and stderr events as they come. Each call is answered by Bindings.Call
// with a context that carries sandbox.RunContext: the run's id, and
// Suspend (POST .../suspend, its resume POST .../resume).
type Sandbox struct {
	c *Client

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
	freeze   *bool // from /v1/info, once read
}

// Sandbox returns a Sandbox whose runs c's server makes.
func (c *Client) Sandbox() *Sandbox { return &Sandbox{c: c} }

// NewSandbox returns the Sandbox of the server at addr (New's arguments),
// having checked that it answers and speaks this client's API version.
func NewSandbox(ctx context.Context, addr string, opts Options) (*Sandbox, error) {
	c, err := New(addr, opts)
	if err != nil {
		return nil, fmt.Errorf("remote sandbox: %w: %w", sandbox.ErrInvalidConfig, err)
	}
	s := c.Sandbox()
	info, err := c.Info(ctx)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("remote sandbox: %w", sandboxError(err))
	}
	s.setFreeze(info)
	return s, nil
}

// Client returns the Client s runs through.
func (s *Sandbox) Client() *Client { return s.c }

func (s *Sandbox) setFreeze(info *api.Info) {
	f := info.SelfCheck != nil && info.SelfCheck.Freezable
	s.mu.Lock()
	s.freeze = &f
	s.mu.Unlock()
}

// CanFreeze reports whether the server's runs can be frozen, as its
// self-check attests (GET /v1/info, read once): false when the server
// cannot be asked.
func (s *Sandbox) CanFreeze() bool {
	s.mu.Lock()
	f := s.freeze
	s.mu.Unlock()
	if f != nil {
		return *f
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := s.c.Info(ctx)
	if err != nil {
		return false
	}
	s.setFreeze(info)
	return s.CanFreeze()
}

// Run asks the server for req's run and returns its Result. Errors are
// as Client.Stream's, each also wrapping the sandbox sentinel that fits
// (see the package doc); after Close, sandbox.ErrClosed.
func (s *Sandbox) Run(ctx context.Context, req sandbox.Request) (*sandbox.Result, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("remote run: %w", sandbox.ErrClosed)
	}
	s.inflight.Add(1)
	s.mu.Unlock()
	defer s.inflight.Done()

	areq := api.RunRequest{ID: req.ID, Code: req.Code, Limits: req.Limits, Env: req.Env, Network: req.Network, Files: req.Files}
	if req.Bindings != nil {
		list := req.Bindings.List()
		if err := sandbox.ValidateBindings(list); err != nil {
			return nil, fmt.Errorf("remote run: %w", err)
		}
		for _, b := range list {
			areq.Bindings = append(areq.Bindings, api.Tool{Name: b.Name, Description: b.Doc, Params: b.Params})
		}
	}
	started := false      // a server that sends started twice is told once
	outputBroken := false // an Output that panicked is called no more (sandbox.Output)
	h := Handler{
		Started: func(_ string, warm bool) {
			if req.Started == nil || started {
				return
			}
			started = true
			defer func() { recover() }() // sandbox.Started: the run goes on
			req.Started(warm)
		},
		Output: func(stream, data string) {
			if req.Output == nil || outputBroken {
				return
			}
			defer func() {
				if recover() != nil {
					outputBroken = true
				}
			}()
			switch stream {
			case api.EventStdout:
				req.Output(sandbox.Stdout, data)
			case api.EventStderr:
				req.Output(sandbox.Stderr, data)
			}
		},
		Call: func(ctx context.Context, ce CallEvent) (json.RawMessage, error) {
			if req.Bindings == nil {
				return nil, fmt.Errorf("no binding %q", ce.Tool)
			}
			rc := sandbox.RunContext{ID: ce.RunID, Suspend: func() (func(), error) {
				if err := s.c.Suspend(ctx, ce.RunID, ce.CallID); err != nil {
					return nil, err
				}
				var once sync.Once
				return func() {
					once.Do(func() {
						rctx, cancel := context.WithTimeout(context.Background(), smallTimeout)
						defer cancel()
						s.c.Resume(rctx, ce.RunID, ce.CallID)
					})
				}, nil
			}}
			return req.Bindings.Call(sandbox.WithRun(ctx, rc), ce.Tool, ce.Args)
		},
	}
	res, err := s.c.Stream(ctx, areq, h)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("remote %w", sandboxError(err))
	}
	return res, nil
}

// Close refuses new runs, waits for those in flight, and closes the
// Client's idle connections. Calling it again is a no-op.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.inflight.Wait()
	return s.c.Close()
}
