package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/psych-runtime/psych"
)

const (
	// maxExcerpt bounds the message a StatusError carries.
	maxExcerpt = 1 << 10
	// maxErrorBody bounds what is read of a non-2xx body.
	maxErrorBody = 64 << 10
)

// Client is a psych.Model backed by a Chat Completions API. It is safe for
// concurrent use; its configuration is fixed at New.
type Client struct {
	cfg      Config
	endpoint string
	http     *http.Client
}

var _ psych.Model = (*Client)(nil)

// New validates cfg and returns a Client. A field that cannot work is an
// error wrapping ErrInvalidConfig. Nothing is sent: a wrong key or an
// unreachable server shows at the first Next.
func New(cfg Config) (*Client, error) {
	endpoint, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if cfg.Temperature != nil {
		t := *cfg.Temperature
		cfg.Temperature = &t
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
	}
	return &Client{cfg: cfg, endpoint: endpoint, http: hc}, nil
}

// Next sends the transcript and the tools offered and returns the first
// choice's message, with Role assistant.
//
// Each returned ToolCall's Args is valid JSON: {} when the model sent no
// arguments (or null), the model's JSON when it parses, and otherwise the
// raw text as a JSON string. A model's malformed arguments are its own
// mistake, not a transport failure, so they are not an error here: a JSON
// string is no object, the Runtime's schema check rejects it, and the model
// is told. Sent back in a transcript, such Args become the raw text again.
//
// Errors: ErrBadTranscript (nothing sent), ErrHTTPStatus (a *StatusError),
// ErrBadResponse, or the transport's error, which wraps ctx's error (or
// context.DeadlineExceeded at Config.Timeout) when that ended the call.
func (c *Client) Next(ctx context.Context, transcript []psych.Message, tools []psych.Spec) (psych.Message, error) {
	req, err := buildRequest(&c.cfg, transcript, tools)
	if err != nil {
		return psych.Message{}, fmt.Errorf("build chat request: %w", err)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return psych.Message{}, fmt.Errorf("build chat request: %w: %w", ErrBadTranscript, err)
	}

	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return psych.Message{}, fmt.Errorf("build chat request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if c.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}

	resp, err := c.http.Do(hreq)
	if err != nil {
		return psych.Message{}, fmt.Errorf("post chat completion: %w", err)
	}
	defer func() {
		// Drain a little so the connection can be reused.
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
		resp.Body.Close()
	}()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return psych.Message{}, fmt.Errorf("post chat completion: %w",
			&StatusError{StatusCode: resp.StatusCode, Message: c.excerpt(errorMessage(raw))})
	}

	raw, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		return psych.Message{}, fmt.Errorf("read chat completion: %w", err)
	}
	if int64(len(raw)) > c.cfg.MaxResponseBytes {
		return psych.Message{}, fmt.Errorf("read chat completion: %w: body over %d bytes", ErrBadResponse, c.cfg.MaxResponseBytes)
	}

	var cr chatResponse
	if err := json.Unmarshal(raw, &cr); err != nil {
		return psych.Message{}, fmt.Errorf("decode chat completion: %w: %w", ErrBadResponse, err)
	}
	if len(cr.Choices) == 0 {
		if len(cr.Error) > 0 && string(cr.Error) != "null" {
			return psych.Message{}, fmt.Errorf("decode chat completion: %w: no choices, error: %s", ErrBadResponse, c.excerpt(errorMessage(raw)))
		}
		return psych.Message{}, fmt.Errorf("decode chat completion: %w: no choices", ErrBadResponse)
	}
	msg, err := fromChatResponse(&cr)
	if err != nil {
		return psych.Message{}, fmt.Errorf("decode chat completion: %w", err)
	}
	return msg, nil
}

// errorMessage finds the message in an error body: error.message, error
// (a string), message or detail, else the body's text.
func errorMessage(raw []byte) string {
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(raw, &body) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(body.Error, &nested) == nil && nested.Message != "":
			return nested.Message
		case json.Unmarshal(body.Error, &s) == nil && s != "":
			return s
		case body.Message != "":
			return body.Message
		case json.Unmarshal(body.Detail, &s) == nil && s != "":
			return s
		case len(body.Detail) > 0:
			return string(body.Detail)
		}
	}
	return string(raw)
}

// excerpt makes s fit an error: the API key redacted, control characters
// and invalid UTF-8 replaced, at most maxExcerpt bytes.
func (c *Client) excerpt(s string) string {
	if c.cfg.APIKey != "" {
		s = strings.ReplaceAll(s, c.cfg.APIKey, "[redacted]")
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) <= maxExcerpt {
		return s
	}
	const ellipsis = "…"
	cut := maxExcerpt - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
