package psych_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/psych-runtime/psych"
)

func noop(context.Context, psych.Call) (any, error) { return nil, nil }

func TestRegister(t *testing.T) {
	r := psych.NewRegistry()
	if err := r.Register(psych.Spec{Name: "search", Handler: noop, Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}}}`)}); err != nil {
		t.Fatal(err)
	}
	if s, ok := r.Lookup("search"); !ok || strings.Join(s.Params, ",") != "limit,query" {
		t.Fatalf("Lookup: %+v %v; want Params from the schema, sorted", s, ok)
	}
	for _, tc := range []struct {
		spec psych.Spec
		want error
	}{
		{psych.Spec{Name: "run_code", Handler: noop}, psych.ErrReservedName},
		{psych.Spec{Name: "BindingError", Handler: noop}, psych.ErrReservedName},
		{psych.Spec{Name: "__import__", Handler: noop}, psych.ErrReservedName},
		{psych.Spec{Name: "search", Handler: noop}, psych.ErrDuplicate},
		{psych.Spec{Name: "class", Handler: noop}, psych.ErrBadName},
		{psych.Spec{Name: "a-b", Handler: noop}, psych.ErrBadName},
		{psych.Spec{Name: "", Handler: noop}, psych.ErrBadName},
		// The name is checked before the schema.
		{psych.Spec{Name: "run_code", Parameters: json.RawMessage(`[`)}, psych.ErrReservedName},
		{psych.Spec{Name: "x"}, psych.ErrBadSchema},
		{psych.Spec{Name: "x", Handler: noop, Parameters: json.RawMessage(`[1]`)}, psych.ErrBadSchema},
		{psych.Spec{Name: "x", Handler: noop, Parameters: json.RawMessage(`{"type":"string"}`)}, psych.ErrBadSchema},
		{psych.Spec{Name: "x", Handler: noop, Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"nonsense"}}}`)}, psych.ErrBadSchema},
		{psych.Spec{Name: "x", Handler: noop, Parameters: json.RawMessage(`{"$ref":"file:///etc/passwd"}`)}, psych.ErrBadSchema},
		{psych.Spec{Name: "x", Handler: noop, Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"items":[{"type":["string","bogus"]}]}}}`)}, psych.ErrBadSchema},
		{psych.Spec{Name: "x", Handler: noop, Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"minimum":"x"}}}`)}, psych.ErrBadSchema},
		{psych.Spec{Name: "x", Handler: noop, Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"pattern":"("}}}`)}, psych.ErrBadSchema},
		{psych.Spec{Name: "x", Handler: noop, Params: []string{"a", "a"}}, psych.ErrBadSchema},
		{psych.Spec{Name: "x", Handler: noop, Params: []string{"lambda"}}, psych.ErrBadSchema},
	} {
		if err := r.Register(tc.spec); !errors.Is(err, tc.want) {
			t.Errorf("Register(%q, %s): %v, want %v", tc.spec.Name, tc.spec.Parameters, err, tc.want)
		}
	}
	if n := len(r.Specs()); n != 1 {
		t.Fatalf("%d specs after refusals, want 1", n)
	}
}
