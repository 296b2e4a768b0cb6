// Package api is psych's client protocol: the Go types of the HTTP API that
// `psych serve` serves under /v1 (server) and that the Go client speaks
// (client), with the OpenAPI 3.1 document that describes them
// (openapi.yaml, embedded as OpenAPI).
//
// A run is asked for with one JSON body (RunRequest). The answer is the
// sandbox.Result exactly as `psych run --json` prints it, or, when the
// client sends `Accept: application/x-ndjson`, a stream of Events, one JSON
// object a line, ending in exactly one terminal event (result, outcome or
// error). A stream that ends without one is a fault the client reports,
// never a success. A refusal is an ErrorBody with an HTTP status a client
// can act on; a refused request ran nothing.
//
// Decoding is strict both ways a request can go wrong: the server refuses
// unknown fields, duplicate keys, invalid UTF-8 and trailing data
// (DecodeStrict); a client reading events bounds each line (EventReader)
// and ignores fields it does not know, so that a newer server's additions
// do not break it.
//
// The same events reach a client over stdio from psych run --events and
// psych call --events, the embedded transport (events.md describes both;
// Answer is stdio's answer line).
//
// This package imports only sandbox: the lean psych binary and every
// client link it.
package api
