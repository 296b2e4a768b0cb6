package server

import (
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/sandbox"
)

// openAPI is api/openapi.yaml, parsed.
type openAPI struct {
	Paths      map[string]map[string]any `yaml:"paths"`
	Components struct {
		Responses map[string]any            `yaml:"responses"`
		Schemas   map[string]map[string]any `yaml:"schemas"`
		Params    map[string]map[string]any `yaml:"parameters"`
	} `yaml:"components"`
}

func loadOpenAPI(t testing.TB) *openAPI {
	t.Helper()
	doc, err := parseOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func parseOpenAPI() (*openAPI, error) {
	var doc openAPI
	if err := yaml.Unmarshal(api.OpenAPI, &doc); err != nil {
		return nil, fmt.Errorf("api/openapi.yaml: %w", err)
	}
	return &doc, nil
}

// operation returns a path's method's responses, nil when undocumented.
func (d *openAPI) responses(pattern, method string) map[string]any {
	op, ok := d.Paths[pattern][strings.ToLower(method)].(map[string]any)
	if !ok {
		return nil
	}
	r, _ := op["responses"].(map[string]any)
	return r
}

// TestOpenAPIRoutes: every route the server serves is in the document,
// and every operation of the document is a route the server serves.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	s := &Server{}
	served := map[string]bool{}
	for _, rt := range s.routeTable() {
		key := rt.method + " " + rt.pattern
		served[key] = true
		if doc.responses(rt.pattern, rt.method) == nil {
			t.Errorf("%s is served but not in api/openapi.yaml", key)
		}
	}
	for path, ops := range doc.Paths {
		for m := range ops {
			if m == "parameters" {
				continue
			}
			if key := strings.ToUpper(m) + " " + path; !served[key] {
				t.Errorf("%s is in api/openapi.yaml but not served", key)
			}
		}
	}
}

// TestOpenAPIFields: the fields of the API's Go types are the properties
// of their schemas, both ways; the error codes and event names are the
// schemas' enums.
func TestOpenAPIFields(t *testing.T) {
	doc := loadOpenAPI(t)
	for _, tc := range []struct {
		schema string
		v      any
		extra  []string // fields a MarshalJSON adds
	}{
		{"RunRequest", api.RunRequest{}, nil},
		{"Tool", api.Tool{}, nil},
		{"CallRequest", api.CallRequest{}, nil},
		{"CallAnswer", api.CallAnswer{}, nil},
		{"ApprovalAnswer", api.ApprovalAnswer{}, nil},
		{"Decision", api.Decision{}, nil},
		{"Outcome", api.Outcome{}, nil},
		{"Run", api.Run{}, nil},
		{"RunList", api.RunList{}, nil},
		{"Info", api.Info{}, nil},
		{"Pool", api.Pool{}, nil},
		{"Doctor", api.Doctor{}, nil},
		{"DoctorCheck", api.DoctorCheck{}, nil},
		{"Error", api.Error{}, nil},
		{"ErrorBody", api.ErrorBody{}, nil},
		{"Event", api.Event{}, nil},
		{"Binding", sandbox.Binding{}, nil},
		{"Limits", sandbox.Limits{}, nil},
		{"Result", sandbox.Result{}, []string{"duration_seconds", "suspended_seconds"}},
		{"Failure", sandbox.Failure{}, nil},
		{"Usage", sandbox.Usage{}, nil},
		{"Isolation", sandbox.Isolation{}, nil},
		{"Image", sandbox.Image{}, nil},
		{"ProcessStatus", sandbox.ProcessStatus{}, nil},
		{"NetworkCheck", sandbox.NetworkCheck{}, nil},
	} {
		sch := doc.Components.Schemas[tc.schema]
		if sch == nil {
			t.Errorf("no schema %s", tc.schema)
			continue
		}
		props, _ := sch["properties"].(map[string]any)
		want := append(jsonFields(reflect.TypeOf(tc.v)), tc.extra...)
		sort.Strings(want)
		got := slices.Sorted(maps.Keys(props))
		if !slices.Equal(got, want) {
			t.Errorf("schema %s has %v; the Go type %T has %v", tc.schema, got, tc.v, want)
		}
	}
	codes := []string{api.CodeInvalidRequest, api.CodeUnauthorized, api.CodeForbidden, api.CodeNotFound, api.CodeConflict,
		api.CodeTooLarge, api.CodeCapacityExhausted, api.CodeDraining, api.CodeNotReady, api.CodeHostFault,
		api.CodeCancelled, api.CodeSlowConsumer}
	events := []string{api.EventStarted, api.EventStdout, api.EventStderr, api.EventCall, api.EventApproval,
		api.EventKeepalive, api.EventResult, api.EventOutcome, api.EventError}
	for _, tc := range []struct {
		schema, prop string
		want         []string
	}{{"Error", "code", codes}, {"Event", "event", events}} {
		p := doc.Components.Schemas[tc.schema]["properties"].(map[string]any)[tc.prop].(map[string]any)
		var got []string
		for _, v := range p["enum"].([]any) {
			got = append(got, fmt.Sprint(v))
		}
		sort.Strings(got)
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s.%s enum %v, want %v", tc.schema, tc.prop, got, want)
		}
	}
}

// jsonFields are the JSON names encoding/json gives t's fields.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-":
			continue
		case f.Anonymous && name == "":
			out = append(out, jsonFields(f.Type)...)
			continue
		case !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// statuses records what the API's handlers answered in this package's
// tests (every testServer's): method, route pattern and status.
var statuses = struct {
	sync.Mutex
	seen map[string]bool
}{seen: map[string]bool{}}

// recordStatuses wraps the API's mux to record each response's status.
func recordStatuses(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		m := r.Method
		if m == "HEAD" {
			m = "GET"
		}
		statuses.Lock()
		statuses.seen[m+" "+r.Pattern+" "+strconv.Itoa(sw.status)] = true
		statuses.Unlock()
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// undocumentedStatuses lists the statuses the tests saw a handler answer
// that api/openapi.yaml does not document for its route.
func undocumentedStatuses(doc *openAPI) []string {
	statuses.Lock()
	defer statuses.Unlock()
	var bad []string
	for key := range statuses.seen {
		f := strings.Fields(key)
		method, pattern, status := f[0], f[1], f[2]
		switch {
		case pattern == "/" && status == "404":
			if doc.Components.Responses["NotFound"] != nil {
				continue
			}
		case status == "405":
			if doc.Paths[pattern] != nil && doc.Components.Responses["MethodNotAllowed"] != nil {
				continue
			}
		default:
			if doc.responses(pattern, method)[status] != nil {
				continue
			}
		}
		bad = append(bad, key)
	}
	sort.Strings(bad)
	return bad
}

// TestOpenAPIStatuses: the statuses this test's requests make the
// handlers answer (and those of every test before it in this package)
// are documented for their routes; TestMain checks the whole package's
// at its end.
func TestOpenAPIStatuses(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: func(c *Config) { c.MaxRequestBytes = 1 << 10 }})
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/info", ""}, {"GET", "/healthz", ""}, {"GET", "/readyz", ""}, {"GET", "/metrics", ""},
		{"GET", "/v1/runs", ""}, {"GET", "/v1/runs/nope", ""}, {"DELETE", "/v1/runs/nope", ""},
		{"POST", "/v1/runs", `{"code":"1"}`}, {"POST", "/v1/runs", `{"x":1}`}, {"POST", "/v1/runs", strings.Repeat(" ", 2<<10)},
		{"POST", "/v1/calls", `{"tool":"nope"}`}, {"POST", "/v1/calls", `{}`},
		{"POST", "/v1/runs/nope/calls/c", `{"value":1}`}, {"POST", "/v1/runs/nope/approvals/c", `{"approve":true}`},
		{"POST", "/v1/runs/nope/calls/c/suspend", ""}, {"POST", "/v1/runs/nope/calls/c/resume", ""},
		{"PATCH", "/v1/info", ""}, {"GET", "/v2/x", ""},
	} {
		ts.do(t, tc.method, tc.path, "", tc.body)
	}
	if bad := undocumentedStatuses(loadOpenAPI(t)); len(bad) > 0 {
		t.Fatalf("statuses the handlers answered that api/openapi.yaml does not document: %v", bad)
	}
}
