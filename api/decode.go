package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/psych-runtime/psych/internal/jsonfold"
	"github.com/psych-runtime/psych/sandbox"
)

// ErrBadRequest is what DecodeStrict's errors wrap.
var ErrBadRequest = errors.New("bad request body")

// MaxDepth bounds how deeply a request body may nest.
const MaxDepth = 64

// DecodeStrict decodes one JSON value from data into v, refusing what
// encoding/json would let through: invalid UTF-8 (it would become U+FFFD
// without a word), a key given twice in one object, or two keys equal but
// for case (encoding/json matches field names without case, so which one
// wins would be a guess), nesting deeper than MaxDepth, a field v does not
// have, and anything after the value. Its errors wrap ErrBadRequest.
func DecodeStrict(data []byte, v any) error {
	if !utf8.Valid(data) {
		return fmt.Errorf("%w: not valid UTF-8", ErrBadRequest)
	}
	if err := checkKeys(data); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the JSON value", ErrBadRequest)
	}
	return nil
}

// DecodeRunRequest decodes a run's body strictly (DecodeStrict) and
// checks what needs no server: its id, if it has one (sandbox.CheckID),
// and its bindings (CheckTools), as psych serve and the embedded transport
// both do. Its limits, env and network are the server's to check. Every
// refusal is an invalid_request naming what is wrong.
func DecodeRunRequest(body []byte) (*RunRequest, *Error) {
	var req RunRequest
	if e := decodeRequest(body, &req, &req.ID, &req.Bindings); e != nil {
		return nil, e
	}
	return &req, nil
}

// DecodeCallRequest decodes a direct call's body as DecodeRunRequest does
// a run's, and refuses one that names no tool, as POST /v1/calls and
// psych call --events both do. An empty id is the caller's to assign.
func DecodeCallRequest(body []byte) (*CallRequest, *Error) {
	var req CallRequest
	if e := decodeRequest(body, &req, &req.ID, &req.Bindings); e != nil {
		return nil, e
	}
	if req.Tool == "" {
		return nil, invalid("tool: required")
	}
	return &req, nil
}

// decodeRequest decodes body strictly into v, then checks the id and the
// bindings v holds (id and tools point into v).
func decodeRequest(body []byte, v any, id *string, tools *[]Tool) *Error {
	if err := DecodeStrict(body, v); err != nil {
		return invalid("%v", err)
	}
	if *id != "" {
		if err := sandbox.CheckID(*id); err != nil {
			return invalid("id: %v", err)
		}
	}
	return CheckTools(*tools)
}

func invalid(format string, args ...any) *Error {
	return &Error{Code: CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

// checkKeys walks data's tokens, refusing a repeated or case-fold-equal
// key in one object and nesting past MaxDepth.
func checkKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object  bool
		keys    map[string]string // folded → as given
		wantKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if len(stack) == MaxDepth {
					return fmt.Errorf("nested deeper than %d", MaxDepth)
				}
				if top != nil && top.object {
					top.wantKey = true
				}
				stack = append(stack, &frame{object: d == '{', keys: map[string]string{}, wantKey: d == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if top == nil || !top.object {
			continue
		}
		if !top.wantKey {
			top.wantKey = true // that was a value
			continue
		}
		key := tok.(string)
		folded := jsonfold.Key(key)
		if prev, ok := top.keys[folded]; ok {
			if prev == key {
				return fmt.Errorf("key %.64q given twice", key)
			}
			return fmt.Errorf("keys %.64q and %.64q differ only in case", prev, key)
		}
		top.keys[folded] = key
		top.wantKey = false
	}
}
