package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/sandbox"
)

// Options configure a Client. The zero value is ready for a Unix socket.
type Options struct {
	// Token is the bearer token a TCP or TLS server requires, sent on
	// every request. Empty sends none (a Unix socket's peer is told by
	// its credentials).
	Token string
	// TLS configures a tls:// address; nil verifies the server against
	// the system's roots, with TLS 1.2 at least.
	TLS *tls.Config
	// IdleTimeout bounds the silence of a server: an answer that has not
	// begun once the request's body is sent (a body still being read by
	// the server is progress), or a stream with no event (keepalives
	// included), for longer is an ErrProtocol. Zero is DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxEventBytes bounds one event line or answer body; zero is
	// api.DefaultMaxEventBytes.
	MaxEventBytes int

	// transport replaces the HTTP transport (tests).
	transport http.RoundTripper
}

// DefaultIdleTimeout is Options.IdleTimeout's default: four of the server's
// keepalive intervals (15 s).
const DefaultIdleTimeout = 60 * time.Second

// smallTimeout bounds the routes that answer at once (info, runs, cancel,
// answers), whatever the caller's context allows.
const smallTimeout = 30 * time.Second

// maxErrorBytes bounds an error's body.
const maxErrorBytes = 64 << 10

// Client speaks psych's API to one server. It is safe for concurrent use.
type Client struct {
	base  string // scheme://host, without a path
	token string
	idle  time.Duration
	max   int
	http  *http.Client
	tr    *http.Transport // nil when Options.transport replaced it
}

// New returns a Client of the server at addr: unix:///absolute/path,
// tcp://HOST:PORT or tls://HOST:PORT. It connects to nothing yet.
func New(addr string, opts Options) (*Client, error) {
	var u *url.URL
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		// A Unix socket's path is taken as it is: "#" and "?" are file
		// name characters there, not a URL's fragment and query.
		u = &url.URL{Scheme: "unix", Path: path}
	} else {
		var err error
		if u, err = url.Parse(addr); err != nil {
			return nil, fmt.Errorf("client %q: %w: %v", addr, ErrAddress, err)
		}
	}
	if strings.ContainsFunc(opts.Token, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return nil, fmt.Errorf("client %q: %w: the token holds a space, a control or a non-ASCII character", addr, ErrAddress)
	}
	if opts.IdleTimeout < 0 || opts.MaxEventBytes < 0 {
		return nil, fmt.Errorf("client %q: %w: a negative idle timeout or event cap", addr, ErrAddress)
	}
	c := &Client{token: opts.Token, idle: opts.IdleTimeout, max: opts.MaxEventBytes}
	if c.idle == 0 {
		c.idle = DefaultIdleTimeout
	}
	if c.max == 0 {
		c.max = api.DefaultMaxEventBytes
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext:         dialer.DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	switch u.Scheme {
	case "unix":
		if !filepath.IsAbs(u.Path) || u.Path != filepath.Clean(u.Path) || strings.ContainsRune(u.Path, 0) {
			return nil, fmt.Errorf("client %q: %w: want unix:///absolute/clean/path", addr, ErrAddress)
		}
		path := u.Path
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", path)
		}
		c.base = "http://psych"
	case "tcp", "tls":
		if u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return nil, fmt.Errorf("client %q: %w: want %s://HOST:PORT", addr, ErrAddress, u.Scheme)
		}
		if _, _, err := net.SplitHostPort(u.Host); err != nil {
			return nil, fmt.Errorf("client %q: %w: %v", addr, ErrAddress, err)
		}
		c.base = "http://" + u.Host
		if u.Scheme == "tls" {
			c.base = "https://" + u.Host
			tr.TLSClientConfig = opts.TLS
			if tr.TLSClientConfig == nil {
				tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
			}
		}
	default:
		return nil, fmt.Errorf("client %q: %w: want unix://, tcp:// or tls://", addr, ErrAddress)
	}
	var rt http.RoundTripper = tr
	if opts.transport != nil {
		rt = opts.transport
	} else {
		c.tr = tr
	}
	c.http = &http.Client{
		Transport: rt,
		// The API never redirects: one would take the token elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

// Close closes the Client's idle connections. Requests in flight go on.
func (c *Client) Close() error {
	if c.tr != nil {
		c.tr.CloseIdleConnections()
	}
	return nil
}

// Info returns the server's GET /v1/info, refusing a server whose API
// version is not api.Version (ErrVersion).
func (c *Client) Info(ctx context.Context) (*api.Info, error) {
	var info api.Info
	if err := c.small(ctx, http.MethodGet, "/info", nil, &info); err != nil {
		return nil, fmt.Errorf("info: %w", err)
	}
	if info.APIVersion != api.Version {
		return nil, fmt.Errorf("info: %w: the server speaks %.32q, this client %q", ErrVersion, info.APIVersion, api.Version)
	}
	return &info, nil
}

// Runs returns the runs of this client's peer that the server's ledger
// holds, oldest first (GET /v1/runs).
func (c *Client) Runs(ctx context.Context) ([]api.Run, error) {
	var list api.RunList
	if err := c.small(ctx, http.MethodGet, "/runs", nil, &list); err != nil {
		return nil, fmt.Errorf("runs: %w", err)
	}
	return list.Runs, nil
}

// Run returns one run of this client's peer (GET /v1/runs/{id}); another
// peer's is not found (a 404 *api.Error).
func (c *Client) Run(ctx context.Context, id string) (*api.Run, error) {
	var run api.Run
	if err := c.small(ctx, http.MethodGet, "/runs/"+url.PathEscape(id), nil, &run); err != nil {
		return nil, fmt.Errorf("run %.80q: %w", id, err)
	}
	return &run, nil
}

// Cancel cancels a run in flight (DELETE /v1/runs/{id}): every process of
// the run is killed and its stream ends with error{code: cancelled}.
func (c *Client) Cancel(ctx context.Context, id string) error {
	if err := c.small(ctx, http.MethodDelete, "/runs/"+url.PathEscape(id), nil, nil); err != nil {
		return fmt.Errorf("cancel %.80q: %w", id, err)
	}
	return nil
}

// small makes a request that answers at once: body (if not nil) is sent as
// JSON, a 2xx answer decoded into out (if not nil), anything else returned
// as an *api.Error.
func (c *Client) small(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, smallTimeout)
	defer cancel()
	resp, err := c.do(ctx, method, path, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBytes))
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(c.max)+1))
	if err != nil {
		return fmt.Errorf("%w: read the answer: %v", ErrUnreachable, err)
	}
	if len(b) > c.max {
		return fmt.Errorf("%w: an answer larger than %d bytes", ErrProtocol, c.max)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%w: decode the answer: %v", ErrProtocol, err)
	}
	return nil
}

// do sends one request and returns a 2xx response, or the error the server
// answered (*api.Error) or the transport's (ErrUnreachable).
func (c *Client) do(ctx context.Context, method, path string, body any, accept string) (*http.Response, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = encode(body); err != nil {
			return nil, err
		}
	}
	return c.send(ctx, method, path, b, nil, accept)
}

func encode(body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode the request: %w", err)
	}
	return b, nil
}

// send is do with the body encoded already (nil: none); moved, if not
// nil, is called after each read of the body as it is sent.
func (c *Client) send(ctx context.Context, method, path string, b []byte, moved func(), accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+"/"+api.Version+path, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAddress, err)
	}
	if b != nil {
		// As NewRequest sets them for a bytes.Reader: a length (never
		// chunked) and a copy for a retry on a closed idle connection.
		req.GetBody = func() (io.ReadCloser, error) {
			return io.NopCloser(&progress{bytes.NewReader(b), moved}), nil
		}
		req.Body, _ = req.GetBody()
		req.ContentLength = int64(len(b))
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, readError(resp.StatusCode, resp.Header.Get("Retry-After"), io.LimitReader(resp.Body, maxErrorBytes))
	}
	return resp, nil
}

// readError makes the *api.Error of a refusal: its body's where it is one,
// else one made from the status. Status and RetryAfter come from the
// response, never from the body.
func readError(status int, retryAfter string, body io.Reader) *api.Error {
	var eb api.ErrorBody
	b, _ := io.ReadAll(body)
	e := &api.Error{}
	if json.Unmarshal(b, &eb) == nil && eb.Error != nil && eb.Error.Code != "" && len(eb.Error.Code) <= 64 {
		e = eb.Error
	} else {
		e.Code = api.CodeOf(status)
		e.Message = http.StatusText(status)
		if e.Message == "" {
			e.Message = "HTTP status " + strconv.Itoa(status)
		}
	}
	if len(e.Message) > 1024 {
		e.Message = e.Message[:1024] + "…"
	}
	e.Status = status
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		e.Retryable = true
	}
	if n, err := strconv.Atoi(strings.TrimSpace(retryAfter)); err == nil && n >= 0 {
		e.RetryAfter = min(n, 3600)
	}
	return e
}

// sandboxError wraps err with the sandbox sentinel its *api.Error fits, so
// that a Sandbox's caller can test it as any backend's: 400 and 413
// ErrInvalidRequest, 429 and 503 ErrBusy, 500 (and a server unreachable or
// not speaking the API) ErrHostFault.
func sandboxError(err error) error {
	var ae *api.Error
	switch {
	case errors.As(err, &ae):
		switch ae.Code {
		case api.CodeInvalidRequest, api.CodeTooLarge:
			return fmt.Errorf("%w: %w", sandbox.ErrInvalidRequest, err)
		case api.CodeCapacityExhausted, api.CodeDraining, api.CodeNotReady:
			return fmt.Errorf("%w: %w", sandbox.ErrBusy, err)
		case api.CodeHostFault:
			return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
		}
		if ae.Status == 0 || ae.Status >= 500 {
			return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
		}
	case errors.Is(err, ErrUnreachable), errors.Is(err, ErrProtocol), errors.Is(err, ErrVersion):
		return fmt.Errorf("%w: %w", sandbox.ErrHostFault, err)
	}
	return err
}
