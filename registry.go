package psych

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/psych-runtime/psych/sandbox"
)

// Registry holds the tools a Runtime offers. It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]*tool
	order []string
}

// tool is a registered Spec with its compiled schema, and for a client's
// tool (spec.Client) the Approver of its asks.
type tool struct {
	spec     Spec
	schema   *jsonschema.Resolved
	approver Approver
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{tools: map[string]*tool{}} }

// emptySchema is what nil Parameters mean.
var emptySchema = json.RawMessage(`{"type":"object"}`)

// Register adds spec. It checks the name first: a reserved name (run_code,
// BindingError, __dunder__ names) is ErrReservedName, a taken one
// ErrDuplicate, one that is no Python identifier or is a keyword ErrBadName
// (the rule of sandbox.CheckName: a tool's name becomes a binding's
// function name). Then the Spec: a Parameters that is not a JSON Schema
// (draft 2020-12, checked by github.com/google/jsonschema-go, with every
// "type" checked to name a JSON type) object for an object, a bad Params
// list or a nil Handler is ErrBadSchema. A schema cannot load anything ($ref
// to a URL or file is refused). A Spec with Client set is ErrBadSchema: only
// Runtime.WithTools makes a client's tools.
func (r *Registry) Register(spec Spec) error {
	if err := checkName(spec.Name); err != nil {
		return fmt.Errorf("register %.64q: %w", spec.Name, err)
	}
	if spec.Client {
		return fmt.Errorf("register %q: %w: Client is set by Runtime.WithTools only", spec.Name, ErrBadSchema)
	}
	r.mu.RLock()
	_, dup := r.tools[spec.Name]
	r.mu.RUnlock()
	if dup {
		return fmt.Errorf("register %q: %w", spec.Name, ErrDuplicate)
	}
	t, err := compile(spec)
	if err != nil {
		return fmt.Errorf("register %q: %w", spec.Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[spec.Name]; dup {
		return fmt.Errorf("register %q: %w", spec.Name, ErrDuplicate)
	}
	r.tools[spec.Name] = t
	r.order = append(r.order, spec.Name)
	return nil
}

// checkName returns why name cannot be a tool's: ErrReservedName or
// ErrBadName.
func checkName(name string) error {
	switch {
	case sandbox.IsReservedName(name):
		return ErrReservedName
	case !sandbox.IsIdentifier(name):
		return fmt.Errorf("%w: a tool's name must be a Python identifier, not a keyword", ErrBadName)
	}
	return nil
}

// compile checks spec and compiles its schema.
func compile(spec Spec) (*tool, error) {
	if spec.Handler == nil {
		return nil, fmt.Errorf("%w: no handler", ErrBadSchema)
	}
	raw := spec.Parameters
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = emptySchema
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%w: parameters must be a JSON object (a schema)", ErrBadSchema)
	}
	if typ, ok := obj["type"]; ok && typ != "object" {
		return nil, fmt.Errorf("%w: parameters must describe an object, not %v", ErrBadSchema, typ)
	}
	if err := checkTypes(obj); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSchema, err)
	}
	var doc jsonschema.Schema
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSchema, err)
	}
	// No loader: a $ref to a file or a URL cannot load anything.
	sch, err := doc.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSchema, err)
	}
	if spec.Params == nil {
		props, _ := obj["properties"].(map[string]any)
		for name := range props {
			spec.Params = append(spec.Params, name)
		}
		sort.Strings(spec.Params)
	}
	if spec.MaxArgsBytes < 0 {
		return nil, fmt.Errorf("%w: a negative MaxArgsBytes", ErrBadSchema)
	}
	seen := map[string]bool{}
	for _, p := range spec.Params {
		if !sandbox.IsIdentifier(p) || seen[p] {
			return nil, fmt.Errorf("%w: parameter %q is no identifier, or repeats", ErrBadSchema, p)
		}
		seen[p] = true
	}
	spec.Parameters = slices.Clone(raw)
	spec.Params = slices.Clone(spec.Params)
	return &tool{spec: spec, schema: sch}, nil
}

// Lookup returns the registered Spec named name.
func (r *Registry) Lookup(name string) (Spec, bool) {
	t := r.lookup(name)
	if t == nil {
		return Spec{}, false
	}
	return t.spec, true
}

func (r *Registry) lookup(name string) *tool {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.tools[name]
}

// Specs lists the registered Specs in the order they were registered.
func (r *Registry) Specs() []Spec {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Spec, 0, len(r.order))
	for _, name := range r.order {
		out = append(out, r.tools[name].spec)
	}
	return out
}

// validate checks decoded arguments (canonicalArgs's) against the tool's
// schema; the error says why, for the caller (a model, a program) to read.
func (t *tool) validate(v map[string]any) error {
	if err := t.schema.Validate(v); err != nil {
		return fmt.Errorf("arguments do not match the schema: %s", strings.TrimSpace(err.Error()))
	}
	return nil
}

// jsonTypes are the names "type" may give.
var jsonTypes = map[string]bool{"null": true, "boolean": true, "object": true, "array": true, "number": true, "string": true, "integer": true}

// Keywords whose value is a schema, a list of schemas, or a map of them.
var (
	oneSchema  = []string{"additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems", "items"}
	listSchema = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	mapSchema  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)

// checkTypes walks a schema and refuses a "type" that names no JSON type,
// which the validator itself would let pass as matching nothing.
func checkTypes(s map[string]any) error {
	switch t := s["type"].(type) {
	case nil:
	case string:
		if !jsonTypes[t] {
			return fmt.Errorf("type %q is not a JSON type", t)
		}
	case []any:
		for _, x := range t {
			if name, ok := x.(string); !ok || !jsonTypes[name] {
				return fmt.Errorf("type %v is not a list of JSON types", t)
			}
		}
	default:
		return fmt.Errorf("type %v is neither a name nor a list", t)
	}
	var subs []map[string]any
	for _, k := range oneSchema {
		if m, ok := s[k].(map[string]any); ok {
			subs = append(subs, m)
		}
	}
	for _, k := range listSchema {
		if l, ok := s[k].([]any); ok {
			for _, x := range l {
				if m, ok := x.(map[string]any); ok {
					subs = append(subs, m)
				}
			}
		}
	}
	for _, k := range mapSchema {
		if m, ok := s[k].(map[string]any); ok {
			for _, x := range m {
				if sub, ok := x.(map[string]any); ok {
					subs = append(subs, sub)
				}
			}
		}
	}
	for _, sub := range subs {
		if err := checkTypes(sub); err != nil {
			return err
		}
	}
	return nil
}
