package openai

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults.
const (
	// DefaultTimeout bounds a Next call when Config.Timeout is zero.
	DefaultTimeout = 10 * time.Minute
	// DefaultMaxResponseBytes caps a response body when
	// Config.MaxResponseBytes is zero.
	DefaultMaxResponseBytes = 16 << 20
)

// Config configures a Client. BaseURL and Model are required; every other
// zero field takes a secure default.
type Config struct {
	// BaseURL is the API root, e.g. "https://api.openai.com/v1" or
	// "http://127.0.0.1:8000/v1"; requests go to BaseURL+"/chat/completions".
	// It must be http or https with a host, and carry no credentials, query
	// or fragment. Plain http with an APIKey is refused for a host that is
	// not loopback unless AllowInsecureHTTP is set.
	BaseURL string
	// APIKey, when set, is sent as "Authorization: Bearer <APIKey>" and
	// nowhere else.
	APIKey string
	// Model is the model's name, sent with every request.
	Model string
	// HTTPClient sends the requests. Nil: a client of the package's own
	// that follows no redirect. A client given here keeps its own redirect
	// policy (net/http drops the Authorization header on a redirect to
	// another host).
	HTTPClient *http.Client
	// Temperature, when set, is sent; it must be finite and not negative.
	// Nil leaves it to the server.
	Temperature *float64
	// MaxTokens, when positive, is sent as max_tokens. Zero leaves it to
	// the server; negative is invalid.
	MaxTokens int
	// Timeout bounds one Next call, from sending the request to the end of
	// reading the answer. Zero: DefaultTimeout. Negative is invalid.
	Timeout time.Duration
	// MaxResponseBytes caps the response body. Zero:
	// DefaultMaxResponseBytes. Negative is invalid.
	MaxResponseBytes int64
	// AllowInsecureHTTP permits sending the APIKey in clear text over plain
	// http to a host that is not loopback.
	AllowInsecureHTTP bool
}

// validate runs the configuration checks, each a small function, the first
// failure wins. It returns the endpoint. No message quotes the BaseURL, which
// may carry a secret.
func (c *Config) validate() (string, error) {
	var u *url.URL
	checks := []func() error{
		func() error {
			var err error
			if u, err = url.Parse(c.BaseURL); err != nil {
				return errors.New("base URL does not parse")
			}
			if u.Scheme != "http" && u.Scheme != "https" {
				return fmt.Errorf("base URL scheme %q: want http or https", u.Scheme)
			}
			if u.Host == "" {
				return errors.New("base URL has no host")
			}
			if u.User != nil {
				return errors.New("base URL carries credentials: give the key as APIKey")
			}
			if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
				return errors.New("base URL has a query or fragment")
			}
			return nil
		},
		func() error {
			if u.Scheme == "http" && c.APIKey != "" && !isLoopback(u.Hostname()) && !c.AllowInsecureHTTP {
				return fmt.Errorf("base URL is plain http to %s: the API key would cross the network in clear text (set AllowInsecureHTTP to permit it)", u.Hostname())
			}
			return nil
		},
		func() error {
			if strings.TrimSpace(c.Model) == "" {
				return errors.New("model is empty")
			}
			return nil
		},
		func() error {
			if strings.ContainsAny(c.APIKey, "\r\n") {
				return errors.New("API key holds a line break")
			}
			return nil
		},
		func() error {
			if t := c.Temperature; t != nil && (math.IsNaN(*t) || math.IsInf(*t, 0) || *t < 0) {
				return fmt.Errorf("temperature %v: want a finite number, not negative", *t)
			}
			return nil
		},
		func() error {
			if c.MaxTokens < 0 || c.Timeout < 0 || c.MaxResponseBytes < 0 {
				return fmt.Errorf("max tokens %d, timeout %v or max response bytes %d negative", c.MaxTokens, c.Timeout, c.MaxResponseBytes)
			}
			return nil
		},
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return "", fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	return strings.TrimRight(u.String(), "/") + "/chat/completions", nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
