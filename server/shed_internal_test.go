package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"voucherd/internal/shed"
	"voucherd/internal/voucher"
)

// With its one place held, the shedding answers a storefront caller 503
// UNAVAILABLE with Retry-After: 1 without reading the body, in the REST
// error shape (and GraphQL's errors too on /graphql); an admin caller is
// never refused; the refusal is counted by route.
func TestShed_TheExcessIs503WithRetryAfterAndAdminsPass(t *testing.T) {
	l := shed.New(shed.Config{Max: 1, Target: 1 << 62})
	counted := map[string]int{}
	reached := 0
	h := shedding(&Shedding{Limiter: l, Shed: func(route string) { counted[route]++ }}, "ROUTE",
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++; w.WriteHeader(http.StatusCreated) }))
	hold, ok := l.Acquire(context.Background())
	if !ok {
		t.Fatal("the one place was refused")
	}
	call := func(path string, role voucher.Role) *httptest.ResponseRecorder {
		body := &unreadBody{Reader: strings.NewReader(`{"customerId": 1}`)}
		r := httptest.NewRequest(http.MethodPost, path, body)
		r = r.WithContext(voucher.WithCaller(r.Context(), voucher.Caller{Role: role, Name: "token"}))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if body.read {
			t.Errorf("%s: the body was read", path)
		}
		return w
	}
	for _, path := range []string{"/vouchers/X/reservations", "/graphql"} {
		w := call(path, voucher.RoleStorefront)
		var got struct {
			Error  string `json:"error"`
			Errors []struct {
				Extensions struct{ Code string } `json:"extensions"`
			} `json:"errors"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != http.StatusServiceUnavailable ||
			w.Header().Get("Retry-After") != "1" || got.Error != "UNAVAILABLE" {
			t.Errorf("%s over the limit: %d, Retry-After %q, %s", path, w.Code, w.Header().Get("Retry-After"), w.Body)
		}
		if wantGraphQL := path == "/graphql"; wantGraphQL != (len(got.Errors) == 1 && got.Errors[0].Extensions.Code == "UNAVAILABLE") {
			t.Errorf("%s: GraphQL errors %+v", path, got.Errors)
		}
	}
	if w := call("/graphql", voucher.RoleAdmin); w.Code != http.StatusCreated {
		t.Errorf("an admin over the limit: %d, want served", w.Code)
	}
	if counted["ROUTE"] != 2 || reached != 1 {
		t.Errorf("counted %v, handler reached %d times; want 2 refusals, the admin's call served", counted, reached)
	}
	hold()
	if w := call("/vouchers/X/reservations", voucher.RoleStorefront); w.Code != http.StatusCreated {
		t.Errorf("with the place free: %d, want served", w.Code)
	}
}

type unreadBody struct {
	*strings.Reader
	read bool
}

func (b *unreadBody) Read(p []byte) (int, error) { b.read = true; return b.Reader.Read(p) }
