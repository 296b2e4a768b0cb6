package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"
)

// Client is what a tool's handler is given to reach the network. An
// *http.Client satisfies it; psych hands out DenyAll or an *Egress.
type Client interface {
	Do(req *http.Request) (*http.Response, error)
}

// Resolver looks up the addresses of a host name. *net.Resolver satisfies
// it. network is "ip", "ip4" or "ip6"; host is the name as the request's URL
// wrote it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

const (
	// MaxRedirects is how many redirects an Egress follows, each checked
	// like the first request.
	MaxRedirects = 10
	// DefaultTimeout bounds a whole request, body included, when
	// Config.Timeout is zero.
	DefaultTimeout = 30 * time.Second
	// dialTimeout bounds one connect.
	dialTimeout = 10 * time.Second
)

// Config configures an Egress. The zero Config denies every request.
type Config struct {
	// Allow lists what may be reached. Each entry is one of:
	//   - a host name, matched exactly, case-insensitively, a trailing dot
	//     ignored: "api.example.com";
	//   - "*." and a domain of two labels or more: its subdomains, not the
	//     domain itself: "*.example.com";
	//   - an IP address or a CIDR prefix: "127.0.0.1", "10.0.0.0/8", "::1",
	//     "fd00::/8";
	// each optionally with ":port" (IPv6 in brackets: "[::1]:8080",
	// "[fd00::/8]:443"), which limits the entry to that port. Names are
	// ASCII (an IDN in its xn-- form). Entries are not trimmed. A malformed
	// entry makes New fail with ErrInvalidAllowlist.
	Allow []string
	// Timeout bounds a whole request, redirects and reading the body
	// included. Zero means DefaultTimeout; negative is refused.
	Timeout time.Duration
	// Resolver resolves host names; nil means net.DefaultResolver. Each
	// connection is made to the addresses it returned, after they are
	// checked, so the name is never resolved twice.
	Resolver Resolver
}

// validate runs the checks on c that do not parse the allowlist.
func (c *Config) validate() error {
	checks := []func() error{
		func() error {
			if c.Timeout < 0 {
				return fmt.Errorf("timeout %v is negative: %w", c.Timeout, ErrInvalidConfig)
			}
			return nil
		},
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// Egress is a Client that reaches only what its allowlist admits. Make one
// with New; the zero Egress denies every request. It is safe for concurrent
// use, and its allowlist never changes.
type Egress struct {
	allow    allowlist
	resolver Resolver
	client   *http.Client
}

// New returns an Egress for cfg, or an error wrapping ErrInvalidAllowlist
// or ErrInvalidConfig.
func New(cfg Config) (*Egress, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	allow, err := parseAllowlist(cfg.Allow)
	if err != nil {
		return nil, err
	}
	e := &Egress{allow: allow, resolver: cfg.Resolver}
	if e.resolver == nil {
		e.resolver = net.DefaultResolver
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	e.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil, // never the environment's proxy
			DialContext:           e.dial,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: 1 * time.Second,
		},
		CheckRedirect: e.checkRedirect,
		Timeout:       timeout,
	}
	return e, nil
}

// Do sends req if its host is on the allowlist, and follows redirects whose
// targets are too; every connection is checked again when it is dialed.
// A refusal wraps ErrDenied, and req's body is closed whether or not it is
// sent, as http.Client.Do does.
func (e *Egress) Do(req *http.Request) (*http.Response, error) {
	if e == nil || e.client == nil {
		closeBody(req)
		return nil, fmt.Errorf("request to %s: egress not made by New: %w", hostOf(req), ErrDenied)
	}
	if req == nil {
		return nil, fmt.Errorf("request: nil request: %w", ErrDenied)
	}
	if err := e.checkURL("request to", req.URL); err != nil {
		closeBody(req)
		return nil, err
	}
	return e.client.Do(req)
}

// CloseIdleConnections closes the connections kept for reuse.
func (e *Egress) CloseIdleConnections() {
	if e != nil && e.client != nil {
		e.client.CloseIdleConnections()
	}
}

// DenyAll returns a Client that refuses every request with an error
// wrapping ErrDenied, without resolving or dialing anything. It is the
// egress of a tool that was granted no network.
func DenyAll() Client { return denyAll{} }

type denyAll struct{}

func (denyAll) Do(req *http.Request) (*http.Response, error) {
	closeBody(req)
	return nil, fmt.Errorf("request to %s: no network is granted: %w", hostOf(req), ErrDenied)
}

// checkURL refuses u unless it is http or https and its host is on the
// allowlist by name (or, for an address literal, by address). It resolves
// nothing: addresses are checked when dialed.
func (e *Egress) checkURL(action string, u *url.URL) error {
	if u == nil {
		return fmt.Errorf("%s nothing: no URL: %w", action, ErrDenied)
	}
	hostport := hostPort(u)
	var port uint16
	switch u.Scheme {
	case "http":
		port = 80
	case "https":
		port = 443
	default:
		return fmt.Errorf("%s %s: scheme %.20q is not http or https: %w", action, hostport, u.Scheme, ErrDenied)
	}
	if p := u.Port(); p != "" {
		var err error
		if port, err = parsePort(p); err != nil {
			return fmt.Errorf("%s %s: %v: %w", action, hostport, err, ErrDenied)
		}
	}
	if !e.allow.admitsHost(parseTarget(u.Hostname(), port)) {
		return fmt.Errorf("%s %s: host is not on the allowlist: %w", action, hostport, ErrDenied)
	}
	return nil
}

func (e *Egress) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return fmt.Errorf("redirect to %s: stopped after %d redirects: %w", hostPort(req.URL), MaxRedirects, ErrTooManyRedirects)
	}
	return e.checkURL("redirect to", req.URL)
}

// hostPort is u's host and port for a message: never the userinfo, path or
// query, which may hold secrets.
func hostPort(u *url.URL) string {
	if u == nil {
		return "nothing"
	}
	if u.Host == "" {
		return "(no host)"
	}
	return fmt.Sprintf("%.260s", u.Host)
}

func hostOf(req *http.Request) string {
	if req == nil {
		return "nothing"
	}
	return hostPort(req.URL)
}

func closeBody(req *http.Request) {
	if req != nil && req.Body != nil {
		req.Body.Close()
	}
}
