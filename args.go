package psych

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/psych-runtime/psych/internal/jsonfold"
)

// The bounds on one call's arguments, besides Spec.MaxArgsBytes. They are
// checked by a scan of the text before anything is decoded, so arguments
// past them cost the host one pass over their bytes and nothing more.
const (
	// DefaultMaxArgsBytes is Spec.MaxArgsBytes when a Spec sets none.
	DefaultMaxArgsBytes = 1 << 20
	// MaxArgsDepth is how deeply arrays and objects may nest.
	MaxArgsDepth = 64
	// MaxArgsElements is how many arrays, objects and members of them the
	// arguments may hold in all.
	MaxArgsElements = 1 << 17
)

// canonicalArgs checks the arguments of a call and returns their one
// canonical form, which the schema, the Policy, the Approver, the recorder
// and the handler all see, and the decoded value the schema checks. It
// refuses text past max bytes, past MaxArgsDepth or MaxArgsElements (before
// decoding it), text that is not one JSON object, an object with a key
// twice, and an object with two keys that are equal under the case folding
// by which encoding/json matches a struct's fields (Go's EqualFold). The
// canonical form is compact JSON, keys sorted, strings as encoding/json
// writes them (invalid UTF-8 replaced), numbers as they were written.
func canonicalArgs(raw []byte, max int) (json.RawMessage, map[string]any, error) {
	if len(raw) > max {
		return nil, nil, fmt.Errorf("arguments are %d bytes, more than the tool takes (%d)", len(raw), max)
	}
	if err := scanBudget(raw); err != nil {
		return nil, nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("arguments are not JSON: text after the object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, nil, errors.New("arguments must be a JSON object")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, nil, fmt.Errorf("arguments are not JSON: %v", err)
	}
	canon := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	if err := toFloats(obj); err != nil {
		return nil, nil, err
	}
	return canon, obj, nil
}

// scanBudget refuses text nested deeper than MaxArgsDepth or holding more
// than MaxArgsElements containers and members, in one pass that allocates
// nothing. It does not check the text is JSON: the decoder does.
func scanBudget(b []byte) error {
	depth, elems := 0, 0
	inStr, esc := false, false
	for _, c := range b {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			if depth++; depth > MaxArgsDepth {
				return fmt.Errorf("arguments nest deeper than %d", MaxArgsDepth)
			}
			elems++
		case '}', ']':
			depth--
		case ',':
			elems++
		}
		if elems > MaxArgsElements {
			return fmt.Errorf("arguments hold more than %d elements", MaxArgsElements)
		}
	}
	return nil
}

// decodeValue reads one value from dec, refusing duplicate and colliding
// keys in every object.
func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, errors.New("arguments are not JSON")
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			out := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, errors.New("arguments are not JSON")
			}
			return out, nil
		case '{':
			out := map[string]any{}
			folded := map[string]string{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, errors.New("arguments are not JSON")
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("arguments are not JSON")
				}
				if _, dup := out[k]; dup {
					return nil, fmt.Errorf("arguments repeat the key %.64q", k)
				}
				f := jsonfold.Key(k)
				if other, ok := folded[f]; ok {
					return nil, fmt.Errorf("arguments have the keys %.64q and %.64q, which differ only in case", other, k)
				}
				folded[f] = k
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				out[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, errors.New("arguments are not JSON")
			}
			return out, nil
		}
		return nil, errors.New("arguments are not JSON")
	default:
		return t, nil // string, json.Number, bool, nil
	}
}

// toFloats replaces the json.Numbers in v with float64s, as the schema
// validator reads numbers; a number no float64 holds is refused.
func toFloats(v any) error {
	conv := func(x any) (any, error) {
		if n, ok := x.(json.Number); ok {
			f, err := n.Float64()
			if err != nil {
				return nil, fmt.Errorf("arguments hold the number %.32s, out of range", n)
			}
			return f, nil
		}
		return x, toFloats(x)
	}
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			y, err := conv(x)
			if err != nil {
				return err
			}
			t[k] = y
		}
	case []any:
		for i, x := range t {
			y, err := conv(x)
			if err != nil {
				return err
			}
			t[i] = y
		}
	}
	return nil
}
