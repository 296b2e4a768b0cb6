package server

import (
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/sandbox"
)

// metrics are the server's collectors. Every label takes a value from a
// fixed set (see the label functions below), never one a client or a
// program chose.
type metrics struct {
	runs        *prometheus.CounterVec // outcome, limit_hit, warm
	runDuration prometheus.Histogram
	queueWait   prometheus.Histogram
	inFlight    prometheus.Gauge
	queueDepth  prometheus.Gauge
	rejected    *prometheus.CounterVec // reason
	poolCold    *prometheus.CounterVec // reason
	toolCalls   *prometheus.CounterVec // via, decision
	toolCallDur prometheus.Histogram
}

// Run outcomes, psych_runs_total's outcome label.
const (
	outcomeOK           = "ok"            // a Result without a failure
	outcomeFailed       = "failed"        // a Result with a failure (a limit, an exception)
	outcomeCancelled    = "cancelled"     // DELETE, the client went away, the drain ran out
	outcomeSlowConsumer = "slow_consumer" // the client fell behind
	outcomeHostFault    = "host_fault"    // the sandbox could not run it
	outcomeRefused      = "refused"       // the request was refused once read (a bad id, a clash)
)

func newMetrics(reg prometheus.Registerer, pool func() sandbox.PoolStatus) (*metrics, error) {
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "psych_runs_total", Help: "Runs ended, by outcome, the limit that ended them and whether a pooled sandbox served them.",
		}, []string{"outcome", "limit_hit", "warm"}),
		runDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "psych_run_duration_seconds", Help: "Wall time of a run, from its slot to its end.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 12),
		}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "psych_run_queue_seconds", Help: "Time a run or call waited in the queue for a slot.",
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 11),
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "psych_runs_in_flight", Help: "Runs and direct calls holding a slot.",
		}),
		queueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "psych_queue_depth", Help: "Requests waiting for a slot.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "psych_rejected_total", Help: "Requests refused, by the error code they got.",
		}, []string{"reason"}),
		poolCold: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "psych_pool_cold_total", Help: "Runs a server with a pool ran cold, by why.",
		}, []string{"reason"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "psych_tool_calls_total", Help: "Tool calls that ended, by how they came (model: a direct call; run_code or client: a program's call of a server's or a client's tool) and how they ended.",
		}, []string{"via", "decision"}),
		toolCallDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "psych_tool_call_duration_seconds", Help: "Duration of the tool calls psych_tool_calls_total counts.",
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 11),
		}),
	}
	poolReady := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "psych_pool_ready", Help: "Pooled sandboxes ready now.",
	}, func() float64 { return float64(pool().Ready) })
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "psych_build_info", Help: "The server's build: psych's version and Go's.",
		ConstLabels: prometheus.Labels{"version": buildVersion(), "goversion": runtime.Version()},
	})
	build.Set(1)
	for _, c := range []prometheus.Collector{m.runs, m.runDuration, m.queueWait, m.inFlight, m.queueDepth,
		m.rejected, m.poolCold, m.toolCalls, m.toolCallDur, poolReady, build} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// buildVersion is psych's module version as the binary records it.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/psych-runtime/psych" {
				return d.Version
			}
		}
		if bi.Main.Path == "github.com/psych-runtime/psych" && bi.Main.Version != "" {
			return bi.Main.Version
		}
	}
	return "(devel)"
}

// limitLabel bounds limit_hit to the contract's names ("" for none).
func limitLabel(n sandbox.LimitName) string {
	switch n {
	case "", sandbox.LimitCPUSeconds, sandbox.LimitAddressSpaceBytes, sandbox.LimitFileSizeBytes,
		sandbox.LimitProcessCount, sandbox.LimitWallSeconds, sandbox.LimitMemoryBytes,
		sandbox.LimitTmpBytes, sandbox.LimitApprovalSeconds:
		return string(n)
	}
	return "other"
}

// coldLabel bounds a ColdReason to a few words.
func coldLabel(why string) string {
	switch {
	case why == "":
		return ""
	case strings.Contains(why, "network"):
		return "network"
	case strings.Contains(why, "stack_bytes"):
		return "stack_bytes"
	case strings.Contains(why, "above the pool's cap"):
		return "limits"
	case strings.Contains(why, "preloaded"):
		return "preload"
	case strings.Contains(why, "as the interpreter starts"):
		return "start_env"
	case strings.Contains(why, "no pooled sandbox"):
		return "none_ready"
	case strings.Contains(why, "dispatch"):
		return "dispatch_failed"
	}
	return "other"
}

// reasonLabel bounds a refusal's reason to the API's codes.
func reasonLabel(code string) string {
	switch code {
	case api.CodeInvalidRequest, api.CodeUnauthorized, api.CodeForbidden, api.CodeNotFound,
		api.CodeConflict, api.CodeTooLarge, api.CodeCapacityExhausted, api.CodeDraining,
		api.CodeNotReady, api.CodeHostFault:
		return code
	}
	return "other"
}

// decisionLabel bounds a call's end to the Outcome kinds.
// observeCall counts one call's end: every call a run or a direct call
// made through the server, the server's own tools' and the client's.
func (m *metrics) observeCall(rec psych.CallRecord) {
	m.toolCalls.WithLabelValues(viaLabel(rec.Via), decisionLabel(rec.Outcome)).Inc()
	m.toolCallDur.Observe(rec.Duration.Seconds())
}

// viaLabel bounds the via label to the Runtime's own values.
func viaLabel(v psych.Via) string {
	switch v {
	case psych.ViaModel, psych.ViaRunCode, psych.ViaClient:
		return string(v)
	}
	return "other"
}

func decisionLabel(kind string) string {
	switch kind {
	case "ok", "error", "denied", "invalid":
		return kind
	}
	return "other"
}
