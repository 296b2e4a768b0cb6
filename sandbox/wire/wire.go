// Package wire is the framed protocol between the host and the bootstrap.
//
// A frame is a 4-byte big-endian length followed by that many bytes of one
// UTF-8 JSON object with a "type": start (host → child), call (child → host),
// reply (host → child), result (child → host) and, last, exit (child →
// host). A frame longer than the decoder's cap is refused before it is
// read; the default cap is 16 MiB.
//
// The decoder is written for hostile input: any byte sequence yields a frame
// or an error wrapping one of the sentinel errors below, never a panic, and
// never an allocation beyond the cap. What it passes on as raw JSON (a
// call's args, a result's value) holds only strings a strict parser takes:
// invalid UTF-8 and escapes of lone surrogates become U+FFFD (ValidStrings),
// as encoding/json does with the strings it decodes itself.
//
// A binding call's round trip is on the program's critical path, so its two
// frames skip encoding/json's reflection: the decoder parses a call frame in
// the bootstrap's own form by hand, and the encoder writes a reply whose
// value needs no compacting or escaping as it is. Both give exactly what the
// general path gives (TestBootstrapCallMatchesUnmarshal,
// TestReplyFastPathMatchesMarshal, FuzzFastPaths); anything else takes the
// general path.
package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

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
	TypeExit   = "exit"
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
	// Env is the program's whole environment, "NAME=value" each, which
	// the bootstrap sets before the program's first line.
	Env []string `json:"env,omitempty"`
	// Figures is the directory the bootstrap writes matplotlib's figures
	// into (sandbox.FiguresDir), for the host to collect; empty where the
	// host collects none, and the bootstrap then leaves matplotlib alone.
	Figures string `json:"figures,omitempty"`
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

// Exit follows the Result, last: the bootstrap sends it once the program's
// threads, atexit handlers and flushes are done and every other descriptor
// of the interpreter is closed, and exits with Code next. It is the
// program's word: a host may end the run at it (nothing of the program runs
// after), but the kernel's account of a process that ended otherwise beats
// it.
type Exit struct {
	Code int `json:"code"`
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
	case *Exit:
		return TypeExit, nil
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
	if r, ok := m.(*Reply); ok && r.Error == nil && verbatim(r.Value) {
		return e.writeReply(r)
	}
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

// writeReply writes a reply with a value and no error, built in place: the
// bytes Marshal would make (see verbatim), without its reflection.
func (e *Encoder) writeReply(r *Reply) error {
	e.buf = append(e.buf[:0], 0, 0, 0, 0)
	e.buf = append(e.buf, `{"type":"reply","id":`...)
	e.buf = strconv.AppendUint(e.buf, r.ID, 10)
	e.buf = append(e.buf, `,"value":`...)
	if r.Value == nil {
		e.buf = append(e.buf, "null"...)
	} else {
		e.buf = append(e.buf, r.Value...)
	}
	e.buf = append(e.buf, '}')
	n := len(e.buf) - 4
	if n > e.maxFrame {
		return fmt.Errorf("encode frame: %d bytes over the %d-byte cap: %w", n, e.maxFrame, ErrFrameTooLarge)
	}
	binary.BigEndian.PutUint32(e.buf, uint32(n))
	if _, err := e.w.Write(e.buf); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}

// verbatim reports whether json.Marshal writes the raw value v unchanged:
// nil (null), or valid JSON with no whitespace to compact away and nothing
// it escapes (<, >, &, U+2028, U+2029). Anything else takes Marshal's way.
func verbatim(v json.RawMessage) bool {
	if v == nil {
		return true
	}
	for i, c := range v {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&':
			return false
		case 0xE2:
			if i+2 < len(v) && v[i+1] == 0x80 && v[i+2]&^1 == 0xA8 {
				return false
			}
		}
	}
	return json.Valid(v)
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
	if c := bootstrapCall(body); c != nil {
		return c, nil // its Args share body, which is the call's alone
	}
	return Unmarshal(body)
}

// bootstrapCall parses a call frame in the one form the bootstrap writes,
// {"type":"call","id":ID,"name":"NAME","args":{...}}, with a decimal ID that
// fits a uint64, a NAME of printable ASCII without escapes, and args a valid
// JSON object: what Unmarshal would return for it, with Args a slice of
// body. For any other body it returns nil, and Unmarshal decides.
func bootstrapCall(body []byte) *Call {
	rest, ok := bytes.CutPrefix(body, []byte(`{"type":"call","id":`))
	if !ok {
		return nil
	}
	var id uint64
	i := 0
	for ; i < len(rest) && '0' <= rest[i] && rest[i] <= '9'; i++ {
		d := uint64(rest[i] - '0')
		if id > (math.MaxUint64-d)/10 {
			return nil // overflows: Unmarshal's error
		}
		id = id*10 + d
	}
	if i == 0 || i > 1 && rest[0] == '0' {
		return nil
	}
	if rest, ok = bytes.CutPrefix(rest[i:], []byte(`,"name":"`)); !ok {
		return nil
	}
	i = 0
	for ; i < len(rest) && rest[i] != '"'; i++ {
		if rest[i] < 0x20 || rest[i] > 0x7e || rest[i] == '\\' {
			return nil
		}
	}
	if i == 0 || i == len(rest) {
		return nil
	}
	name := string(rest[:i])
	args, ok := bytes.CutPrefix(rest[i+1:], []byte(`,"args":`))
	if !ok || len(args) < 3 || args[0] != '{' || args[len(args)-1] != '}' {
		return nil
	}
	args = args[:len(args)-1]
	if args[len(args)-1] != '}' || !json.Valid(args) {
		return nil // whitespace after args, or more keys after it
	}
	return &Call{ID: id, Name: name, Args: ValidStrings(args)}
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
	case TypeExit:
		m = new(Exit)
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
		m.Args = ValidStrings(m.Args)
	case *Reply:
		if m.Error != nil && m.Value != nil && string(m.Value) != "null" {
			return errors.New("reply carries both value and error")
		}
		normalizeNull(&m.Value)
	case *Result:
		normalizeNull(&m.Value)
		if m.Value != nil {
			m.Value = ValidStrings(m.Value)
		}
		if m.Failure != nil && m.Failure.Type == "" {
			return errors.New("failure without a type")
		}
	case *Exit:
		if m.Code < 0 || m.Code > 255 {
			return fmt.Errorf("exit code %d out of 0..255", m.Code)
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

// ValidStrings returns the JSON text v with every string in it valid UTF-8
// and free of lone surrogates, as strict parsers require: a run of invalid
// bytes becomes U+FFFD (as strings.ToValidUTF8 does), and so does a \u
// escape of a surrogate that is not half of a pair. v must be valid JSON;
// it is returned itself when nothing needs to change, else a copy.
func ValidStrings(v json.RawMessage) json.RawMessage {
	valid := utf8.Valid(v)
	if valid && !loneSurrogates(v, false) {
		return v
	}
	out := bytes.Clone(v)
	if !valid {
		out = bytes.ToValidUTF8(out, []byte("\uFFFD"))
	}
	loneSurrogates(out, true)
	return out
}

// loneSurrogates reports whether the JSON text b has a \u escape of a lone
// surrogate; with fix, it rewrites each as \ufffd, in place.
func loneSurrogates(b []byte, fix bool) bool {
	found := false
	for i := 0; i < len(b); i++ {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 {
			break
		}
		i += j + 1 // the escaped character; the loop steps past it
		if i >= len(b) || b[i] != 'u' {
			continue
		}
		switch r := hex4(b, i+1); {
		case 0xD800 <= r && r < 0xDC00 && i+10 < len(b) && b[i+5] == '\\' && b[i+6] == 'u' && isLowSurrogate(hex4(b, i+7)):
			i += 10 // a pair
		case 0xD800 <= r && r < 0xE000:
			found = true
			if !fix {
				return true
			}
			copy(b[i+1:], "fffd")
			i += 4
		case r >= 0:
			i += 4
		}
	}
	return found
}

func isLowSurrogate(r rune) bool { return 0xDC00 <= r && r < 0xE000 }

// hex4 is the value of the four hex digits at b[i:], or -1.
func hex4(b []byte, i int) rune {
	if i+4 > len(b) {
		return -1
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}
