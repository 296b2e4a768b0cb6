package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/sandbox"
)

// Defaults of Config's zero fields.
const (
	DefaultQueue             = 64
	DefaultQueueTimeout      = 10 * time.Second
	DefaultMaxRequestBytes   = 16<<20 + (64<<20+2)/3*4 // 16 MiB and the files cap (sandbox.DefaultFileCaps.InBytes) in base64
	DefaultHeaderTimeout     = 10 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultDrainTimeout      = 30 * time.Second
	DefaultKeepalive         = 15 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultStreamBufferBytes = 4 << 20
	// minMaxRuns is MaxRuns' least default, whatever the pool's size.
	minMaxRuns = 2
)

// Server is psych's HTTP API over one Runtime. Make one with New, call
// Start (the self-check and the pool's first fill: until then runs get 503
// not_ready), Serve each listener, and Shutdown to drain.
type Server struct {
	cfg  Config
	auth authConfig
	adm  *admission
	met  *metrics
	log  *slog.Logger
	api  http.Handler // the routes, behind authenticate

	started  sync.Once
	ready    atomic.Bool
	draining atomic.Bool
	self     atomic.Pointer[sandbox.Isolation]
	doctor   atomic.Pointer[api.Doctor]
	// unready says why the server will never be ready (a doctor's FAIL).
	unready atomic.Pointer[string]

	// stop ends when the drain runs out: it cancels what is in flight.
	stop       context.Context
	cancelStop context.CancelFunc

	mu      sync.Mutex
	servers []*http.Server
	active  map[string]*activeRun // runs and direct calls in flight, by id
	owners  owners                // who started the runs this server ran
	running int                   // requests holding a slot
	changed chan struct{}         // closed and replaced when running drops
	closed  bool
}

// New checks cfg and returns a Server over it. It starts nothing: Start
// makes the self-check run and waits for the pool.
func New(cfg Config) (*Server, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}
	s := &Server{cfg: cfg, auth: newAuthConfig(&cfg), log: cfg.Logger,
		active: map[string]*activeRun{}, owners: newOwners(maxOwners), changed: make(chan struct{})}
	s.stop, s.cancelStop = context.WithCancel(context.Background())
	met, err := newMetrics(cfg.Registerer, func() sandbox.PoolStatus { return sandbox.PoolStatusOf(cfg.Sandbox) })
	if err != nil {
		return nil, fmt.Errorf("new server: register metrics: %w", err)
	}
	s.met = met
	s.adm = newAdmission(cfg.MaxRuns, cfg.Queue, cfg.QueueTimeout, cfg.MaxQueuedBytes, met)
	s.api = s.routes()
	return s, nil
}

// setDefaults fills the zero fields and checks the rest, the first
// failure wins.
func (c *Config) setDefaults() error {
	switch {
	case c.Runtime == nil:
		return fmt.Errorf("%w: Runtime is required", ErrInvalidConfig)
	case c.Sandbox == nil:
		return fmt.Errorf("%w: Sandbox is required", ErrInvalidConfig)
	case c.MaxRuns < 0, c.Queue < QueueNone, c.QueueTimeout < 0, c.MaxRequestBytes < 0, c.MaxQueuedBytes < 0,
		c.HeaderTimeout < 0, c.IdleTimeout < 0, c.DrainTimeout < 0, c.Keepalive < 0, c.WriteTimeout < 0,
		c.StreamBufferBytes < 0:
		return fmt.Errorf("%w: a negative bound", ErrInvalidConfig)
	case c.Token != "" && len(c.Token) < 16:
		return fmt.Errorf("%w: a token shorter than 16 bytes", ErrInvalidConfig)
	}
	if c.MaxRuns == 0 {
		c.MaxRuns = max(sandbox.PoolStatusOf(c.Sandbox).Size, minMaxRuns)
	}
	switch c.Queue {
	case 0:
		c.Queue = DefaultQueue
	case QueueNone:
		c.Queue = 0
	}
	c.QueueTimeout = or(c.QueueTimeout, DefaultQueueTimeout)
	c.MaxRequestBytes = or(c.MaxRequestBytes, DefaultMaxRequestBytes)
	c.MaxQueuedBytes = or(c.MaxQueuedBytes, 4*c.MaxRequestBytes)
	c.HeaderTimeout = or(c.HeaderTimeout, DefaultHeaderTimeout)
	c.IdleTimeout = or(c.IdleTimeout, DefaultIdleTimeout)
	c.DrainTimeout = or(c.DrainTimeout, DefaultDrainTimeout)
	c.Keepalive = or(c.Keepalive, DefaultKeepalive)
	c.WriteTimeout = or(c.WriteTimeout, DefaultWriteTimeout)
	c.StreamBufferBytes = or(c.StreamBufferBytes, DefaultStreamBufferBytes)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if c.Registerer == nil && c.Gatherer == nil {
		reg := prometheus.NewRegistry()
		c.Registerer, c.Gatherer = reg, reg
	} else if c.Registerer == nil || c.Gatherer == nil {
		return fmt.Errorf("%w: Registerer and Gatherer are set together", ErrInvalidConfig)
	}
	c.Info.Defaults = c.Info.Defaults.Merge(sandbox.DefaultLimits())
	if err := c.Info.Defaults.Validate(); err != nil {
		return fmt.Errorf("%w: Info.Defaults: %w", ErrInvalidConfig, err)
	}
	c.Caps = c.Caps.Merge(c.Info.Defaults)
	if err := c.Caps.Validate(); err != nil {
		return fmt.Errorf("%w: Caps: %w", ErrInvalidConfig, err)
	}
	if e := checkLimits(c.Info.Defaults, limitsCheck{defaults: c.Info.Defaults, caps: c.Caps}); e != nil {
		return fmt.Errorf("%w: the defaults against the caps: %s", ErrInvalidConfig, e.Message)
	}
	c.Info.EnvAllowlist = slices.Clone(c.Info.EnvAllowlist)
	return nil
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Start makes the self-check run (the program "1", whose attestation
// GET /v1/info shows; its network must be verified denied, or refused by
// the fallback's filter) and waits for the pool to fill once. Then the
// server is ready: /readyz answers 200 and runs are taken. It returns the
// error that keeps it from being ready; calling it again is a no-op.
func (s *Server) Start(ctx context.Context) error {
	var err error
	ran := false
	s.started.Do(func() { ran, err = true, s.start(ctx) })
	if !ran && !s.ready.Load() {
		return fmt.Errorf("start server: %w: an earlier Start failed", ErrNotReady)
	}
	return err
}

func (s *Server) start(ctx context.Context) error {
	if s.cfg.Doctor != nil {
		if err := s.runDoctor(ctx); err != nil {
			return err
		}
	}
	res, err := s.cfg.Sandbox.Run(ctx, sandbox.Request{Code: "1"})
	if err != nil {
		return fmt.Errorf("start server: self-check run: %w", err)
	}
	if err := checkSelf(res); err != nil {
		return fmt.Errorf("start server: self-check run: %w", err)
	}
	s.self.Store(res.Isolation)
	if w, ok := s.cfg.Sandbox.(interface{ WaitWarm(context.Context) error }); ok {
		if err := w.WaitWarm(ctx); err != nil {
			return fmt.Errorf("start server: wait for the pool: %w", err)
		}
	}
	s.ready.Store(true)
	s.log.Info("ready", "pool_size", sandbox.PoolStatusOf(s.cfg.Sandbox).Size, "max_runs", s.cfg.MaxRuns, "queue", s.cfg.Queue)
	return nil
}

// runDoctor runs Config.Doctor; a report that Failed (or none) keeps the
// server unready, saying why.
func (s *Server) runDoctor(ctx context.Context) error {
	rep := s.cfg.Doctor(ctx)
	if ctx.Err() != nil {
		return fmt.Errorf("start server: doctor: %w", ctx.Err())
	}
	if rep == nil {
		rep = &api.Doctor{Failed: true, Checks: []api.DoctorCheck{{Name: "doctor", Status: "FAIL", Found: "no report"}}}
	}
	s.doctor.Store(rep)
	if !rep.Failed {
		s.log.Info("doctor", "failed", false, "checks", len(rep.Checks))
		return nil
	}
	var failed []string
	for _, c := range rep.Checks {
		if c.Status == "FAIL" {
			failed = append(failed, fmt.Sprintf("%s (%s)", c.Name, cut(strings.Join(strings.Fields(c.Found), " "), 200)))
		}
	}
	if len(failed) == 0 {
		failed = []string{"a check"}
	}
	why := "psych doctor: FAIL: " + strings.Join(failed, "; ")
	s.unready.Store(&why)
	s.log.Error("doctor", "failed", true, "why", why)
	return fmt.Errorf("start server: %w: %s", ErrDoctor, why)
}

// notReady is the message of a 503 not_ready: why the server will never
// be ready, or that it is starting.
func (s *Server) notReady() string {
	if why := s.unready.Load(); why != nil {
		return *why
	}
	return "the server is starting"
}

// checkSelf holds the self-check's Result to what a run must be.
func checkSelf(res *sandbox.Result) error {
	iso := res.Isolation
	switch {
	case res.Failure != nil:
		return fmt.Errorf("%w: it failed: %s: %s", ErrSelfCheck, res.Failure.Type, res.Failure.Message)
	case string(res.Value) != "1":
		return fmt.Errorf("%w: its value is %.64q, want 1", ErrSelfCheck, res.Value)
	case iso == nil:
		return fmt.Errorf("%w: no attestation", ErrSelfCheck)
	case !res.NetworkDenied && !(iso.Mode == "fallback" && iso.InetRefused):
		return fmt.Errorf("%w: its network was not verified denied", ErrSelfCheck)
	}
	return nil
}

// Serve answers the API on l until Shutdown (nil then) or l fails. A TCP
// or TLS listener without Config.Token is refused. Serve owns l: Shutdown
// closes it (a Unix socket is removed).
func (s *Server) Serve(l *Listener) error {
	if err := s.auth.checkListener(l); err != nil {
		l.Close()
		return err
	}
	srv := &http.Server{
		Handler:           s.authenticated(l),
		ReadHeaderTimeout: s.cfg.HeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ConnContext:       connContext(l),
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return s.serve(srv, l)
}

// authenticated is the API behind l's authentication, whose refusals
// (401, 403) are counted and logged like the handlers'.
func (s *Server) authenticated(l *Listener) http.Handler {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if aw, ok := w.(*authWatch); ok {
			aw.passed = true
		}
		s.api.ServeHTTP(w, r)
	})
	outer := s.auth.authenticate(l, inner)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		aw := &authWatch{ResponseWriter: w}
		outer.ServeHTTP(aw, r)
		if !aw.passed {
			code := api.CodeForbidden
			if aw.status == http.StatusUnauthorized {
				code = api.CodeUnauthorized
			}
			s.met.rejected.WithLabelValues(code).Inc()
			s.log.Info("refused", "method", r.Method, "path", cut(r.URL.Path, 128), "listener", l.Kind, "status", aw.status, "code", code)
		}
	})
}

// authWatch tells whether a request passed authentication, and the
// status of one that did not.
type authWatch struct {
	http.ResponseWriter
	passed bool
	status int
}

func (w *authWatch) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *authWatch) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// cut bounds a string a client chose before it is logged.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// ServeMetrics answers /healthz, /readyz and /metrics on ln, without
// authentication (for probes and scrapers); every other path is 404.
func (s *Server) ServeMetrics(ln net.Listener) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", s.metricsHandler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &api.Error{Code: api.CodeNotFound, Message: "no such route"})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: s.cfg.HeaderTimeout, IdleTimeout: s.cfg.IdleTimeout,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	return s.serve(srv, ln)
}

func (s *Server) serve(srv *http.Server, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return fmt.Errorf("serve: %w", ErrClosed)
	}
	s.servers = append(s.servers, srv)
	s.mu.Unlock()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// Shutdown drains the server: /readyz answers 503, new runs get 503
// draining, the runs in flight have DrainTimeout (or until ctx ends) to
// finish and are cancelled after; then the listeners are closed (a Unix
// socket removed) once their responses are written, and the Sandbox is
// closed. Calling it again is a no-op.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	servers := s.servers
	s.mu.Unlock()
	s.draining.Store(true)
	s.adm.drain()
	s.log.Info("draining", "drain_timeout_seconds", s.cfg.DrainTimeout.Seconds())

	dctx, cancel := context.WithTimeout(ctx, s.cfg.DrainTimeout)
	drained := s.waitRuns(dctx) == nil
	cancel()
	s.cancelStop() // what is left is cancelled
	var errs []error
	if !drained {
		if err := s.waitRuns(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shutdown: runs in flight: %w", err))
		}
	}
	for _, srv := range servers {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shutdown: %w", err))
			srv.Close()
		}
	}
	if err := s.cfg.Sandbox.Close(); err != nil {
		errs = append(errs, fmt.Errorf("shutdown: close the sandbox: %w", err))
	}
	s.log.Info("stopped", "drained", drained)
	return errors.Join(errs...)
}

// hold counts a request holding a slot until its release.
func (s *Server) hold() (release func()) {
	s.mu.Lock()
	s.running++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.running--
			close(s.changed)
			s.changed = make(chan struct{})
			s.mu.Unlock()
		})
	}
}

// waitRuns waits until no request holds a slot, or ctx ends.
func (s *Server) waitRuns(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, ch := s.running, s.changed
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Info is what GET /v1/info answers now.
func (s *Server) Info() api.Info {
	in := s.cfg.Info
	in.APIVersion = api.Version
	if in.Version == "" {
		in.Version = buildVersion()
	}
	in.Caps = s.cfg.Caps
	st := sandbox.PoolStatusOf(s.cfg.Sandbox)
	in.Pool = api.Pool{Size: st.Size, Ready: st.Ready}
	in.MaxRuns, in.Queue = s.cfg.MaxRuns, s.cfg.Queue
	in.AllowNetwork = s.cfg.AllowNetwork
	in.EnvAllowlist = slices.Clone(s.cfg.Info.EnvAllowlist)
	if in.EnvAllowlist == nil {
		in.EnvAllowlist = []string{}
	}
	in.Tools = []api.Tool{}
	for _, t := range s.cfg.Runtime.Tools() {
		if t.Name == psych.RunCode {
			continue
		}
		in.Tools = append(in.Tools, api.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters,
			Params: t.Params, Destructive: t.Destructive})
	}
	in.SelfCheck = s.self.Load()
	in.Doctor = s.doctor.Load()
	if in.SelfCheck != nil && in.Backend == "" {
		in.Backend, in.Engine, in.Interpreter = in.SelfCheck.Backend, in.SelfCheck.Engine, in.SelfCheck.PythonPath
	}
	in.Draining = s.draining.Load()
	return in
}

// route is one entry of the API's route table: api/openapi.yaml holds the
// same (TestOpenAPIRoutes).
type route struct {
	method, pattern string
	handle          http.HandlerFunc
}

func (s *Server) routeTable() []route {
	return []route{
		{"POST", "/v1/runs", s.postRun},
		{"GET", "/v1/runs", s.listRuns},
		{"GET", "/v1/runs/{id}", s.getRun},
		{"DELETE", "/v1/runs/{id}", s.deleteRun},
		{"POST", "/v1/runs/{id}/calls/{call_id}", s.answerCall},
		{"POST", "/v1/runs/{id}/calls/{call_id}/suspend", s.suspendCall},
		{"POST", "/v1/runs/{id}/calls/{call_id}/resume", s.resumeCall},
		{"POST", "/v1/runs/{id}/approvals/{call_id}", s.answerApproval},
		{"POST", "/v1/calls", s.postCall},
		{"GET", "/v1/info", s.info},
		{"GET", "/healthz", s.healthz},
		{"GET", "/readyz", s.readyz},
		{"GET", "/metrics", s.metricsHandler().ServeHTTP},
	}
}

// routes is the API's mux: a method a path does not take is 405 and a path
// it does not know 404, both in the API's error shape.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	byPath := map[string][]route{}
	var order []string
	for _, rt := range s.routeTable() {
		if byPath[rt.pattern] == nil {
			order = append(order, rt.pattern)
		}
		byPath[rt.pattern] = append(byPath[rt.pattern], rt)
	}
	for _, p := range order {
		rs := byPath[p]
		var allow []string
		for _, rt := range rs {
			allow = append(allow, rt.method)
		}
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			for _, rt := range rs {
				if r.Method == rt.method || (rt.method == "GET" && r.Method == "HEAD") {
					rt.handle(w, r)
					return
				}
			}
			w.Header().Set("Allow", strings.Join(allow, ", "))
			s.refuse(w, r, &api.Error{Code: api.CodeInvalidRequest, Status: http.StatusMethodNotAllowed,
				Message: fmt.Sprintf("%s takes %s", p, strings.Join(allow, ", "))})
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.refuse(w, r, &api.Error{Code: api.CodeNotFound, Message: "no such route"})
	})
	return mux
}

// refuse writes e, counts it (psych_rejected_total) and logs it: the
// code, never the request's content.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, e *api.Error) {
	if api.Retryable(e.Code) && e.RetryAfter < 1 {
		e.RetryAfter = 1
	}
	s.met.rejected.WithLabelValues(reasonLabel(e.Code)).Inc()
	s.log.Info("refused", "method", r.Method, "route", r.Pattern, "peer", peerOf(r.Context()).Key,
		"status", statusOf(e), "code", e.Code)
	writeError(w, e)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if e := s.unavailable(); e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// unavailable is the 503 a run asked for now gets (draining, or not
// ready), or nil when the server takes runs.
func (s *Server) unavailable() *api.Error {
	switch {
	case s.draining.Load():
		return &api.Error{Code: api.CodeDraining, Message: "the server is draining", RetryAfter: 1}
	case !s.ready.Load():
		return &api.Error{Code: api.CodeNotReady, Message: s.notReady(), RetryAfter: 1}
	}
	return nil
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Info())
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{MaxRequestsInFlight: 4})
}
