package subprocess

import "errors"

// ErrNoUserNamespace: no user namespace can be had here, so runs could only
// take the fallback, which New refuses (with sandbox.ErrRefused) unless
// Config.AllowFallback asks for it.
var ErrNoUserNamespace = errors.New("no user namespace can be had here")
