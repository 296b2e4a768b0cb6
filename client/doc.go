// Package client is a Go client of psych's HTTP API (package api), as
// `psych serve` (package server) serves it on a Unix socket, TCP or TLS.
//
// New takes an address (unix:///path, tcp://host:port, tls://host:port)
// and Options (a bearer token, a TLS configuration). Info, Runs, Run and
// Cancel are the API's small routes; Stream asks for a run as an event
// stream, and Call for one direct tool call, both handing output, calls
// and approvals to a Handler. Sandbox wraps a Client as a sandbox.Sandbox,
// the `remote` backend: a Request's Bindings become tools the client
// declares, every call event is answered by Bindings.Call with a context
// that carries sandbox.RunContext (so sandbox.Suspend freezes the run on
// the server), and cancelling Run's context cancels the run (DELETE, then
// the connection is closed).
//
// Failures are data, as with any backend: a program that failed is a
// Result. A refusal is an error that errors.As finds as *api.Error, and
// that wraps the sandbox sentinel that fits it: 400 and 413
// sandbox.ErrInvalidRequest, 429 and 503 sandbox.ErrBusy (retry later),
// 500 sandbox.ErrHostFault. A server that cannot be reached, or an event
// stream that ends without its terminal event, is an error wrapping
// sandbox.ErrHostFault, never a success.
//
// Every byte from the server is hostile: bodies and event lines are
// bounded, a stream silent for longer than Options.IdleTimeout (the
// server sends a keepalive after 15 s of silence) is an error, and no
// response makes the client panic or grow without bound.
//
// This package imports sandbox, api and the standard library only: the
// lean psych binary links it.
package client
