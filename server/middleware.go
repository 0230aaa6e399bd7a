package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"voucherd/internal/voucher"
)

// tokenAuth maps bearer tokens to roles. Tokens are compared as SHA-256
// digests in constant time so timing reveals nothing about them. A token
// that is none of the listed ones may be an API key (keys).
type tokenAuth struct {
	tokens []tokenRole
	keys   KeyChecker
}

// KeyChecker finds the API key of a bearer token without a database query
// (voucher.KeyRing): ok is false for anything but a usable key, and then
// KeyCheck.Unknowable says the keys could not be read to tell.
type KeyChecker interface {
	Check(ctx context.Context, token string) (voucher.KeyCheck, bool)
}

type tokenRole struct {
	digest [32]byte
	role   voucher.Role
}

func newTokenAuth(storefront, admin []string) *tokenAuth {
	a := &tokenAuth{}
	for _, t := range storefront {
		a.tokens = append(a.tokens, tokenRole{sha256.Sum256([]byte(t)), voucher.RoleStorefront})
	}
	for _, t := range admin {
		a.tokens = append(a.tokens, tokenRole{sha256.Sum256([]byte(t)), voucher.RoleAdmin})
	}
	return a
}

func (a *tokenAuth) role(token string) (voucher.Role, bool) {
	d := sha256.Sum256([]byte(token))
	var found voucher.Role
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare(d[:], t.digest[:]) == 1 {
			found = t.role
		}
	}
	return found, found != ""
}

// require answers 401 before any work unless the request carries a known
// bearer token, and puts the caller in the context.
func (a *tokenAuth) require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			unauthorized(w, r)
			return
		}
		token = strings.TrimSpace(token)
		// The listed tokens first, at today's cost; only a token that is
		// none of them is looked for among the keys.
		role, ok := a.role(token)
		caller := voucher.Caller{Role: role, Name: "token"}
		if !ok && a.keys != nil {
			var kc voucher.KeyCheck
			if kc, ok = a.keys.Check(r.Context(), token); ok && kc.RetryAfter > 0 {
				rateLimited(w, r, kc.RetryAfter)
				return
			}
			if !ok && kc.Unknowable {
				keysUnreadable(w, r)
				return
			}
			caller = kc.Caller
		}
		if !ok {
			unauthorized(w, r)
			return
		}
		next.ServeHTTP(w, r.WithContext(voucher.WithCaller(r.Context(), caller)))
	})
}

// rateLimited answers 429 with Retry-After (whole seconds, at least 1)
// without reading the body, as unauthorized does. GraphQL clients also
// find the code where they look for one: errors[0].extensions.code.
func rateLimited(w http.ResponseWriter, r *http.Request, retryAfter time.Duration) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	secs := int64((retryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	const message = "this API key is over its rate; retry after Retry-After seconds"
	body := map[string]any{"error": string(voucher.RateLimited), "message": message}
	if r.URL.Path == "/graphql" {
		body["data"] = nil
		body["errors"] = []map[string]any{{"message": message, "extensions": map[string]string{"code": string(voucher.RateLimited)}}}
	}
	writeJSON(w, http.StatusTooManyRequests, body)
}

// unauthorized answers 401 without reading the request's body. A request
// that declared one is answered with the connection closed: else net/http
// would read up to 256 KiB of the unread body first, to reuse the
// connection, and a client that never sends it would hold the 401 back
// until ReadTimeout.
func unauthorized(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="voucher"`)
	writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "UNAUTHENTICATED", "message": "a valid bearer token is required"})
}

// limitBody refuses a body over MaxBodyBytes with 413 before the handler
// runs: it reads the body up front (bodies here are small), so no handler or
// library ever sees a truncated one.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxBodyBytes {
			tooLarge(w)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
			var maxErr *http.MaxBytesError
			if errors.As(err, &maxErr) {
				tooLarge(w)
				return
			}
			if err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": string(voucher.InvalidInput), "field": "body", "message": "the request body could not be read"})
				return
			}
			r.Body = newReadBody(body)
		}
		next.ServeHTTP(w, r)
	})
}

func tooLarge(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "PAYLOAD_TOO_LARGE", "message": "the request body is over 1 MiB"})
}

// recoverPanics turns a panic into a generic 500 and logs the stack.
func recoverPanics(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				logger.ErrorContext(r.Context(), "panic serving a request", "panic", p, "path", r.URL.Path, "stack", string(debug.Stack()))
				writeJSON(w, http.StatusInternalServerError, map[string]string{"error": string(voucher.Internal), "message": "internal error"})
			}
		}()
		next.ServeHTTP(w, r)
	})
}
