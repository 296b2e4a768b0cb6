package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/psych-runtime/psych/api"
)

// Peer is who sent a request: a Unix socket's uid and gid, or a token's
// holder. Runs belong to the peer that started them.
type Peer struct {
	// Key names the peer: "uid:1000", or "token:" and the first 12 hex
	// digits of the token's sha256. Ownership compares it; logs show it.
	Key string
	// UID and GID are a Unix socket peer's (SO_PEERCRED), Unix whether
	// they are set.
	UID, GID uint32
	Unix     bool
}

type peerKey struct{}
type connKey struct{}

// peerOf is the authenticated peer of a request that passed authenticate.
func peerOf(ctx context.Context) Peer {
	p, _ := ctx.Value(peerKey{}).(Peer)
	return p
}

// connCred is a Unix connection's credentials, read once when it is
// accepted; err says why they could not be read.
type connCred struct {
	uid, gid uint32
	err      error
}

// connContext is an http.Server's ConnContext for l: on a Unix socket it
// reads the peer's credentials (SO_PEERCRED) when the connection is
// accepted; the kernel fixed them at connect.
func connContext(l *Listener) func(ctx context.Context, c net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		if l.Kind != "unix" {
			return ctx
		}
		for {
			u, ok := c.(interface{ NetConn() net.Conn })
			if !ok {
				break
			}
			c = u.NetConn()
		}
		uc, ok := c.(*net.UnixConn)
		if !ok {
			return context.WithValue(ctx, connKey{}, connCred{err: fmt.Errorf("not a unix connection: %T", c)})
		}
		uid, gid, err := peerCred(uc)
		return context.WithValue(ctx, connKey{}, connCred{uid: uid, gid: gid, err: err})
	}
}

// authConfig is who a listener lets in.
type authConfig struct {
	allowUIDs, allowGIDs []uint32
	// tokenSum is the sha256 of the token; compared in constant time.
	tokenSum [32]byte
	hasToken bool
}

func newAuthConfig(cfg *Config) authConfig {
	a := authConfig{allowUIDs: cfg.AllowUIDs, allowGIDs: cfg.AllowGIDs}
	if cfg.Token != "" {
		a.tokenSum, a.hasToken = sha256.Sum256([]byte(cfg.Token)), true
	}
	return a
}

// checkListener refuses a TCP or TLS listener without a token: there is no
// exception for loopback.
func (a authConfig) checkListener(l *Listener) error {
	if l.Kind != "unix" && !a.hasToken {
		return fmt.Errorf("serve %s listener %s: %w: it needs a token (--token-file)", l.Kind, l.Addr(), errNoToken)
	}
	return nil
}

var errNoToken = fmt.Errorf("no token")

// authenticate lets through a request whose peer l allows, with the Peer
// in its context: on a Unix socket root, the server's own uid and
// AllowUIDs/AllowGIDs (403 for another); on TCP and TLS the bearer token
// (401 without it or with a wrong one). A refused request reaches nothing.
func (a authConfig) authenticate(l *Listener, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, e := a.peer(l, r)
		if e != nil {
			if e.Code == api.CodeUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="psych"`)
			}
			writeError(w, e)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), peerKey{}, p)))
	})
}

func (a authConfig) peer(l *Listener, r *http.Request) (Peer, *api.Error) {
	if l.Kind == "unix" {
		cred, ok := r.Context().Value(connKey{}).(connCred)
		if !ok || cred.err != nil {
			return Peer{}, &api.Error{Code: api.CodeForbidden, Message: "the peer's credentials could not be read"}
		}
		if cred.uid != 0 && cred.uid != uint32(os.Getuid()) &&
			!slices.Contains(a.allowUIDs, cred.uid) && !slices.Contains(a.allowGIDs, cred.gid) {
			return Peer{}, &api.Error{Code: api.CodeForbidden, Message: fmt.Sprintf("uid %d is not allowed on this socket", cred.uid)}
		}
		return Peer{Key: fmt.Sprintf("uid:%d", cred.uid), UID: cred.uid, GID: cred.gid, Unix: true}, nil
	}
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" || !a.hasToken {
		return Peer{}, &api.Error{Code: api.CodeUnauthorized, Message: "a bearer token is required"}
	}
	sum := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(sum[:], a.tokenSum[:]) != 1 {
		return Peer{}, &api.Error{Code: api.CodeUnauthorized, Message: "the token is not valid"}
	}
	return Peer{Key: "token:" + hex.EncodeToString(sum[:6])}, nil
}
