package client

import "errors"

// Sentinel errors. Errors from the server are *api.Error (errors.As).
var (
	// ErrAddress: the address is not one New understands.
	ErrAddress = errors.New("bad server address")
	// ErrUnreachable: the server could not be reached, or the connection
	// broke before an answer.
	ErrUnreachable = errors.New("server unreachable")
	// ErrProtocol: the server's answer is not what the API says (a body
	// that does not decode, a stream without its terminal event, a stream
	// silent past Options.IdleTimeout).
	ErrProtocol = errors.New("server protocol error")
	// ErrVersion: the server speaks another version of the API.
	ErrVersion = errors.New("server API version not supported")
)
