package server

import (
	"net/http"

	"voucherd/internal/shed"
	"voucherd/internal/voucher"
)

// Shedding is the server's load shedding on the storefront routes (REST
// reserve, confirm, release and check, POST /graphql): past Limiter's
// limit the excess is answered at once with 503 UNAVAILABLE and
// Retry-After: 1, before its body is read.
type Shedding struct {
	Limiter *shed.Limiter
	// Shed counts a refused request of a route (metrics); nil: none.
	Shed func(route string)
}

// shedding admits a request through the limiter or refuses it. It runs
// after the bearer token is checked: a request without a known token is
// 401 at once and never takes or waits for a place (nor skews the latency
// the limit adapts to), a token's cost is a hash (microseconds), and the
// 503 tells only known callers that the server is busy. An admin caller is
// never refused: an operator's rebuildGate or endVoucher in the middle of a
// stampede must get through, and admin calls are few.
func shedding(s *Shedding, route string, next http.Handler) http.Handler {
	if s == nil || s.Limiter == nil {
		return next
	}
	count := s.Shed
	if count == nil {
		count = func(string) {}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := voucher.CallerFrom(r.Context()); ok && c.Role == voucher.RoleAdmin {
			next.ServeHTTP(w, r)
			return
		}
		release, ok := s.Limiter.Acquire(r.Context())
		if !ok {
			count(route)
			overloaded(w, r)
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}

// overloaded answers 503 UNAVAILABLE with Retry-After: 1, the body the
// contract gives an unavailable database or Redis, without reading the
// request's body. GraphQL clients also find the code where they look for
// one, errors[0].extensions.code, as with rateLimited.
//
// The connection is kept: closing it under overload would add a new
// connection's cost to every refused client's retry. net/http discards an
// unread body before it answers, which for a storefront's body (a few
// hundred bytes, sent with the headers) is already in its buffer; a larger
// or chunked one is not waited for (Connection: close, as unauthorized).
func overloaded(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength < 0 || r.ContentLength > 4<<10 {
		w.Header().Set("Connection", "close")
	}
	w.Header().Set("Retry-After", "1")
	if r.URL.Path == "/graphql" {
		writeBody(w, http.StatusServiceUnavailable, overloadedGraphQL)
		return
	}
	writeBody(w, http.StatusServiceUnavailable, overloadedREST)
}

// keysUnreadable answers 503 UNAVAILABLE with Retry-After: 1 for a token
// that may be an API key made a moment ago on another server, when the
// keys could not be read (the database down): a 401 would tell a caller
// with a good key that it is not one.
func keysUnreadable(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	w.Header().Set("Retry-After", "1")
	if r.URL.Path == "/graphql" {
		writeBody(w, http.StatusServiceUnavailable, keysUnreadableGraphQL)
		return
	}
	writeBody(w, http.StatusServiceUnavailable, keysUnreadableREST)
}

const keysUnreadableMessage = "the API keys could not be read to check this one; retry after Retry-After seconds"

const overloadedMessage = "the server is over its capacity; retry after Retry-After seconds"

// The answers are constant: a refusal costs no encoding.
var (
	overloadedREST    = []byte(`{"error":"UNAVAILABLE","message":"` + overloadedMessage + `"}` + "\n")
	overloadedGraphQL = []byte(`{"error":"UNAVAILABLE","message":"` + overloadedMessage + `","data":null,"errors":[{"message":"` +
		overloadedMessage + `","extensions":{"code":"UNAVAILABLE"}}]}` + "\n")
	keysUnreadableREST    = []byte(`{"error":"UNAVAILABLE","message":"` + keysUnreadableMessage + `"}` + "\n")
	keysUnreadableGraphQL = []byte(`{"error":"UNAVAILABLE","message":"` + keysUnreadableMessage + `","data":null,"errors":[{"message":"` +
		keysUnreadableMessage + `","extensions":{"code":"UNAVAILABLE"}}]}` + "\n")
)
