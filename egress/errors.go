package egress

import "errors"

// Sentinel errors. Other errors wrap them with %w and a lowercase action
// prefix; callers test with errors.Is. A refused request never reaches the
// network: no connection is opened, or the one being opened is abandoned
// before its connect.
var (
	// ErrDenied: the request, a redirect or a connection was refused because
	// the host is not on the allowlist, an address it resolves to is not
	// admitted, its scheme is not http or https, or no network is granted.
	ErrDenied = errors.New("egress denied")
	// ErrInvalidAllowlist: an allowlist entry is malformed.
	ErrInvalidAllowlist = errors.New("invalid egress allowlist")
	// ErrInvalidConfig: a Config field other than the allowlist cannot work.
	ErrInvalidConfig = errors.New("invalid egress configuration")
	// ErrTooManyRedirects: a request was redirected more than MaxRedirects
	// times.
	ErrTooManyRedirects = errors.New("too many redirects")
)
