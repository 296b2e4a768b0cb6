package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/psych-runtime/psych/api"
)

// TestDoctor: with Config.Doctor, Start runs the checks first; a report
// with a FAIL keeps the server unready for good (Start returns ErrDoctor,
// /readyz and runs answer 503 not_ready naming the failed check, the
// self-check never runs), one without becomes ready; GET /v1/info serves
// the report as doctor either way, and null without Config.Doctor.
func TestDoctor(t *testing.T) {
	failing := &api.Doctor{Failed: true, Checks: []api.DoctorCheck{
		{Name: "kernel", Status: "OK", Found: "6.1"},
		{Name: "userns", Status: "FAIL", Found: "clone(CLONE_NEWUSER): operation\nnot permitted", Fix: "sysctl"},
	}}
	passing := &api.Doctor{Checks: []api.DoctorCheck{{Name: "kernel", Status: "OK", Found: "6.1"}}}
	for _, tc := range []struct {
		name  string
		rep   *api.Doctor
		ready bool
	}{{"fail", failing, false}, {"ok", passing, true}, {"none", nil, true}} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			ts := newTestServer(t, serverOpts{noStart: true, cfg: func(c *Config) {
				if tc.name != "none" {
					c.Doctor = func(context.Context) *api.Doctor { calls++; return tc.rep }
				}
			}})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := ts.Start(ctx)
			if tc.ready != (err == nil) || (!tc.ready && !errors.Is(err, ErrDoctor)) {
				t.Fatalf("Start: %v, want ready %v", err, tc.ready)
			}
			if tc.name != "none" && calls != 1 {
				t.Errorf("the doctor ran %d times, want once", calls)
			}
			resp, b := ts.do(t, "GET", "/readyz", "", "")
			if tc.ready {
				if resp.StatusCode != 200 {
					t.Fatalf("readyz: %d %s", resp.StatusCode, b)
				}
			} else {
				e := wantError(t, resp, b, http.StatusServiceUnavailable, api.CodeNotReady)
				if !strings.Contains(e.Message, "userns (clone(CLONE_NEWUSER): operation not permitted)") || strings.Contains(e.Message, "kernel") {
					t.Errorf("readyz says %q: want the failed check and what was found, alone", e.Message)
				}
				resp, b = ts.do(t, "POST", "/v1/runs", "", `{"code":"1"}`)
				if e := wantError(t, resp, b, http.StatusServiceUnavailable, api.CodeNotReady); !strings.Contains(e.Message, "userns") {
					t.Errorf("a run is refused with %q, want why", e.Message)
				}
				if ts.self.Load() != nil {
					t.Error("the self-check ran after the doctor failed")
				}
				if err := ts.Start(ctx); !errors.Is(err, ErrNotReady) {
					t.Errorf("a second Start: %v, want ErrNotReady", err)
				}
			}
			resp, b = ts.do(t, "GET", "/v1/info", "", "")
			var info struct {
				Doctor *api.Doctor `json:"doctor"`
			}
			if resp.StatusCode != 200 || json.Unmarshal(b, &info) != nil {
				t.Fatalf("info: %d %s", resp.StatusCode, b)
			}
			if tc.rep == nil {
				if info.Doctor != nil || !strings.Contains(string(b), `"doctor":null`) {
					t.Fatalf("info without Config.Doctor: %s", b)
				}
				return
			}
			if info.Doctor == nil || info.Doctor.Failed != tc.rep.Failed || len(info.Doctor.Checks) != len(tc.rep.Checks) ||
				info.Doctor.Checks[len(tc.rep.Checks)-1] != tc.rep.Checks[len(tc.rep.Checks)-1] {
				t.Fatalf("info's doctor %+v, want %+v", info.Doctor, tc.rep)
			}
		})
	}
}
