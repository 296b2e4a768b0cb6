// Package server is the resident host behind `psych serve`: psych's HTTP
// API (package api, api/openapi.yaml) over one psych.Runtime, whose
// Sandbox (either backend, usually with a warm pool) runs the programs.
//
// A server changes where a run is asked for, never what it is: a run has
// the same contract, Result and attestation as through the library, and
// the tools a client declares go through the Runtime's tool path (schema,
// Policy, approval, recording with via "client") like Go tools. The server
// never runs a program in its own process, never pulls an image, and never
// grants a run network unless the request asks and Config.AllowNetwork is
// set.
//
// Everything a client can make it hold is bounded: connections, header
// and idle time, body bytes, runs in flight (MaxRuns), runs waiting
// (Queue, QueueTimeout, and the bytes of their bodies), and a stream's
// unread output. A request it cannot take now is refused at once with a
// typed, retryable error (429 or 503 with Retry-After) and runs nothing.
//
// Files (each owns one concern):
//
//	config.go     Config and its defaults
//	server.go     New, Start (the self-check, the pool's first fill), the
//	              route table, Serve, ServeMetrics, Shutdown (drain)
//	errors.go     the sentinel errors and the API's error body
//	listen.go     listeners (unix, tcp, tls), the socket's lock and mode
//	auth.go       peers: SO_PEERCRED on a Unix socket, a bearer token on TCP
//	admission.go  runs in flight, the queue, Retry-After, body bytes
//	metrics.go    the Prometheus collectors
//	runs.go       POST/GET/DELETE /v1/runs: a run, as JSON or as events
//	calls.go      client tools: call and approval events and their answers,
//	              suspend and resume, POST /v1/calls
//	stream.go     the NDJSON event writer: keepalive, slow consumers
package server
