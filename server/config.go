package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/sandbox"
)

// Config configures a Server. Runtime and Sandbox are required; every
// other zero field takes the default named beside it.
type Config struct {
	// Runtime is the tool path every run and call goes through: its
	// Registry holds the server's own Go tools, its Policy and Approver
	// decide their calls, its Store is the ledger. Its Sandbox must be
	// Sandbox.
	Runtime *psych.Runtime
	// Sandbox runs the programs (the Runtime's); the server reads its pool
	// and whether it can freeze from it, and closes it at Shutdown.
	Sandbox sandbox.Sandbox
	// Store is the Runtime's Store, read by GET /v1/runs; nil: those
	// routes know only the runs in flight.
	Store psych.Store
	// Info describes the sandbox in GET /v1/info: Backend, Engine,
	// Interpreter, Defaults, EnvAllowlist. Caps, the pool and the
	// admission bounds are filled in by the server.
	Info api.Info
	// Caps are the most a request may ask for, field by field (above is
	// 400, never clamped); a zero field is Info.Defaults'.
	Caps sandbox.Limits
	// Doctor, when set, runs `psych doctor`'s checks at the start of Start,
	// before the self-check: a report that Failed keeps the server unready
	// for good (/readyz and runs answer 503 not_ready naming the failed
	// checks). GET /v1/info serves the report as doctor. Nil: no checks.
	Doctor func(context.Context) *api.Doctor
	// AllowNetwork lets a request ask for the network.
	AllowNetwork bool
	// MaxRuns bounds runs (and direct calls) in flight: default the
	// pool's size, at least 2.
	MaxRuns int
	// Queue bounds requests waiting for a slot, in order (default 64;
	// QueueNone for none); each waits at most QueueTimeout (default 10 s).
	Queue        int
	QueueTimeout time.Duration
	// MaxRequestBytes bounds a request's body (default 16 MiB plus the
	// default files cap, 64 MiB, in base64: DefaultMaxRequestBytes); the bodies
	// of the requests waiting in the queue count together against
	// MaxQueuedBytes (default 4 × MaxRequestBytes).
	MaxRequestBytes int64
	MaxQueuedBytes  int64
	// HeaderTimeout bounds reading a request's header (default 10 s) and
	// IdleTimeout an idle keep-alive connection (default 60 s).
	HeaderTimeout, IdleTimeout time.Duration
	// DrainTimeout is how long Shutdown lets runs in flight finish before
	// it cancels them (default 30 s).
	DrainTimeout time.Duration
	// Keepalive is the silence after which a stream gets a keepalive event
	// (default 15 s).
	Keepalive time.Duration
	// WriteTimeout bounds one write of a response (an event, a Result):
	// a client that reads nothing for that long is gone, and its run is
	// cancelled (default 30 s).
	WriteTimeout time.Duration
	// StreamBufferBytes bounds the events a stream holds that its client
	// has not read yet, as encoded (default 4 MiB: a run's whole output at
	// the backends' default caps, 1 MiB on stdout and on stderr, with the
	// events' framing and room to spare, so a client that reads as fast
	// as it can is never cut off by a burst on a loaded host): a client
	// further behind gets error{slow_consumer} and its run is cancelled.
	// The terminal event is not counted.
	StreamBufferBytes int
	// AllowUIDs and AllowGIDs are the peers a Unix socket serves besides
	// root and the server's own uid (the gid is the peer's primary one, as
	// SO_PEERCRED gives it). Token is the bearer token a TCP or TLS
	// listener requires (Serve refuses such a listener without one).
	AllowUIDs, AllowGIDs []uint32
	Token                string
	// Logger gets a line per run and per refusal (default: JSON on
	// stderr); never code, output, arguments or environment values.
	Logger *slog.Logger
	// Registerer takes the server's collectors and Gatherer is what
	// /metrics serves (default: a registry of the server's own).
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
}

// QueueNone asks for no queue at all (Config.Queue's zero is the default).
const QueueNone = -1
