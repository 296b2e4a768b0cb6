// Package wire is the framed protocol between the host and the bootstrap.
//
// A frame is a 4-byte big-endian length followed by that many bytes of one
// UTF-8 JSON object with a "type": start (host → child), call (child → host),
// reply (host → child) or result (child → host). A frame longer than the
// decoder's cap is refused before it is read; the default cap is 16 MiB.
//
// The decoder is written for hostile input: any byte sequence yields a frame
// or an error wrapping one of the sentinel errors below, never a panic, and
// never an allocation beyond the cap.
package wire

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/psych-runtime/psych/sandbox"
)

// Version is the protocol version carried in the start frame.
const Version = 1

// DefaultMaxFrame is the default frame cap, in bytes of JSON.
const DefaultMaxFrame = 16 << 20

// Frame types.
const (
	TypeStart  = "start"
	TypeCall   = "call"
	TypeReply  = "reply"
	TypeResult = "result"
)

// Decoding errors. Every error from Decoder.Next other than io.EOF wraps one.
var (
	// ErrFrameTooLarge: the length prefix exceeds the cap (or is zero).
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrTruncated: the stream ended inside a frame.
	ErrTruncated = errors.New("truncated frame")
	// ErrMalformed: the body is not a JSON object of the declared type's shape.
	ErrMalformed = errors.New("malformed frame")
	// ErrUnknownType: the body's type is not one of the four.
	ErrUnknownType = errors.New("unknown frame type")
)

// Start opens an execution.
type Start struct {
	V        int               `json:"v"`
	Code     string            `json:"code"`
	Bindings []sandbox.Binding `json:"bindings"`
	// MaxFrame tells the bootstrap the cap, so an oversized result value
	// becomes a clear failure on the child's side.
	MaxFrame int `json:"max_frame"`
}

// Call is a binding call from the program.
type Call struct {
	ID   uint64          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// ReplyError is a host-side binding error.
type ReplyError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Reply answers one Call: Error, or else Value (nil means None).
type Reply struct {
	ID    uint64          `json:"id"`
	Value json.RawMessage `json:"value"`
	Error *ReplyError     `json:"error,omitempty"`
}

// Failure is the program's own account of how it failed.
type Failure struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
	// Errno is the errno of an uncaught OSError, when there was one.
	Errno int `json:"errno,omitempty"`
}

// Result ends an execution: Failure, or else Value (nil means None).
type Result struct {
	Value   json.RawMessage `json:"value"`
	Failure *Failure        `json:"failure"`
}

// typeOf names the frame type of a message value.
func typeOf(m any) (string, error) {
	switch m.(type) {
	case *Start:
		return TypeStart, nil
	case *Call:
		return TypeCall, nil
	case *Reply:
		return TypeReply, nil
	case *Result:
		return TypeResult, nil
	}
	return "", fmt.Errorf("encode frame: unsupported message %T", m)
}

// Encoder writes frames. It is not safe for concurrent use.
type Encoder struct {
	w        io.Writer
	maxFrame int
	buf      []byte
}

// NewEncoder writes frames of at most maxFrame bytes (DefaultMaxFrame if
// maxFrame <= 0) to w.
func NewEncoder(w io.Writer, maxFrame int) *Encoder {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	return &Encoder{w: w, maxFrame: maxFrame}
}

// Encode writes m (*Start, *Call, *Reply or *Result) as one frame.
func (e *Encoder) Encode(m any) error {
	body, err := Marshal(m)
	if err != nil {
		return err
	}
	return e.WriteBody(body)
}

// WriteBody writes a body made by Marshal as one frame.
func (e *Encoder) WriteBody(body []byte) error {
	if len(body) > e.maxFrame {
		return fmt.Errorf("encode frame: %d bytes over the %d-byte cap: %w", len(body), e.maxFrame, ErrFrameTooLarge)
	}
	e.buf = binary.BigEndian.AppendUint32(e.buf[:0], uint32(len(body)))
	e.buf = append(e.buf, body...)
	if _, err := e.w.Write(e.buf); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}

// Marshal returns the JSON body of m, with its type field.
func Marshal(m any) ([]byte, error) {
	t, err := typeOf(m)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s frame: %w", t, err)
	}
	// Splice "type" in front of the struct's own fields.
	out := make([]byte, 0, len(body)+len(t)+12)
	out = append(out, `{"type":"`...)
	out = append(out, t...)
	out = append(out, '"')
	if len(body) > 2 {
		out = append(out, ',')
	}
	return append(out, body[1:]...), nil
}

// Decoder reads frames. It is not safe for concurrent use.
type Decoder struct {
	r        io.Reader
	maxFrame int
	hdr      [4]byte
}

// NewDecoder reads frames of at most maxFrame bytes (DefaultMaxFrame if
// maxFrame <= 0) from r.
func NewDecoder(r io.Reader, maxFrame int) *Decoder {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	if maxFrame > math.MaxUint32 {
		maxFrame = math.MaxUint32
	}
	return &Decoder{r: r, maxFrame: maxFrame}
}

// Next reads one frame and returns *Start, *Call, *Reply or *Result. It
// returns io.EOF at a clean end of stream. After any other error the stream
// is out of step and the decoder must not be used again.
func (d *Decoder) Next() (any, error) {
	if _, err := io.ReadFull(d.r, d.hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("read frame header: %w", ErrTruncated)
		}
		return nil, fmt.Errorf("read frame header: %w", err)
	}
	n := binary.BigEndian.Uint32(d.hdr[:])
	if n == 0 || uint64(n) > uint64(d.maxFrame) {
		return nil, fmt.Errorf("frame of %d bytes, cap %d: %w", n, d.maxFrame, ErrFrameTooLarge)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(d.r, body); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("read %d-byte frame: %w", n, ErrTruncated)
		}
		return nil, fmt.Errorf("read %d-byte frame: %w", n, err)
	}
	return Unmarshal(body)
}

// Unmarshal decodes one frame body and checks its shape.
func Unmarshal(body []byte) (any, error) {
	var env struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("decode frame: %v: %w", err, ErrMalformed)
	}
	if env.Type == nil {
		return nil, fmt.Errorf("decode frame: no type: %w", ErrMalformed)
	}
	var m any
	switch *env.Type {
	case TypeStart:
		m = new(Start)
	case TypeCall:
		m = new(Call)
	case TypeReply:
		m = new(Reply)
	case TypeResult:
		m = new(Result)
	default:
		return nil, fmt.Errorf("decode frame: type %.64q: %w", *env.Type, ErrUnknownType)
	}
	if err := json.Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("decode %s frame: %v: %w", *env.Type, err, ErrMalformed)
	}
	if err := check(m); err != nil {
		return nil, fmt.Errorf("decode %s frame: %v: %w", *env.Type, err, ErrMalformed)
	}
	return m, nil
}

// check enforces what the JSON types alone do not.
func check(m any) error {
	switch m := m.(type) {
	case *Call:
		if m.Name == "" {
			return errors.New("call without a name")
		}
		if len(m.Args) == 0 || string(m.Args) == "null" {
			m.Args = json.RawMessage("{}")
		} else if m.Args[0] != '{' {
			return errors.New("call args is not an object")
		}
	case *Reply:
		if m.Error != nil && m.Value != nil && string(m.Value) != "null" {
			return errors.New("reply carries both value and error")
		}
		normalizeNull(&m.Value)
	case *Result:
		normalizeNull(&m.Value)
		if m.Failure != nil && m.Failure.Type == "" {
			return errors.New("failure without a type")
		}
	}
	return nil
}

// normalizeNull turns an absent or null value into nil.
func normalizeNull(v *json.RawMessage) {
	if len(*v) == 0 || string(*v) == "null" {
		*v = nil
	}
}
