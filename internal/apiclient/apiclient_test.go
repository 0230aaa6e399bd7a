package apiclient_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"voucherd/internal/apiclient"
)

// echo answers what it was sent: the method, path, token and body, as the
// JSON shapes voucherd answers.
func echo(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Seen", r.Method+" "+r.URL.EscapedPath()+"|"+r.Header.Get("Authorization")+"|"+string(body))
		switch {
		case r.URL.Path == "/graphql" && strings.Contains(string(body), "broken"):
			_, _ = io.WriteString(w, `{"errors":[{"message":"Cannot query field \"broken\""}],"data":null}`)
		case r.URL.Path == "/graphql":
			_, _ = io.WriteString(w, `{"data":{"voucher":{"usedCount":9007199254740993}}}`)
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":"RESERVATION_CONFIRMED","message":"confirmed"}`)
		default:
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"orderId":"o/1","status":"RESERVED"}`)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func TestClient_SendsTheRoutesWithTheTokenAndReadsCodeAndState(t *testing.T) {
	s := echo(t)
	c := apiclient.New(s.URL, "tok", nil)
	ctx := context.Background()

	a := c.Reserve(ctx, "SUMMER", map[string]any{"orderId": "o/1", "customerId": 7})
	if a.Err != nil || a.Status != http.StatusCreated || a.State != "RESERVED" || a.Code != "" {
		t.Fatalf("reserve: %v", a)
	}
	if got := a.Header.Get("X-Seen"); got != `POST /vouchers/SUMMER/reservations|Bearer tok|{"customerId":7,"orderId":"o/1"}` {
		t.Errorf("reserve sent %q", got)
	}
	a = c.Confirm(ctx, "SUMMER", "o/1")
	if got := a.Header.Get("X-Seen"); got != "POST /vouchers/SUMMER/reservations/o%2F1/confirm|Bearer tok|" {
		t.Errorf("confirm sent %q (the orderId must be one path segment)", got)
	}
	a = c.WithToken("").Release(ctx, "SUMMER", "o-2")
	if a.Status != http.StatusConflict || a.Code != "RESERVATION_CONFIRMED" || a.State != "" {
		t.Errorf("release: %v", a)
	}
	if got := a.Header.Get("X-Seen"); got != "DELETE /vouchers/SUMMER/reservations/o-2||" {
		t.Errorf("release without a token sent %q", got)
	}
	a = c.Do(ctx, http.MethodPost, "/vouchers/X/reservations", `{"orderId":`)
	if got := a.Header.Get("X-Seen"); !strings.HasSuffix(got, `|{"orderId":`) {
		t.Errorf("a raw body was not sent as it is: %q", got)
	}
}

func TestClient_GraphQLDataDecodesDataAndFailsOnErrors(t *testing.T) {
	s := echo(t)
	c := apiclient.New(s.URL, "tok", nil)
	var out struct{ Voucher struct{ UsedCount int64 } }
	if err := c.GraphQLData(context.Background(), `{ voucher(code: "A") { usedCount } }`, nil, &out); err != nil || out.Voucher.UsedCount != 9007199254740993 {
		t.Fatalf("data: %+v %v", out, err)
	}
	if n := c.GraphQL(context.Background(), `{ x }`, nil).JSON()["data"].(map[string]any)["voucher"].(map[string]any)["usedCount"]; n.(interface{ String() string }).String() != "9007199254740993" {
		t.Errorf("JSON rounded a number past 2^53: %v", n)
	}
	err := c.GraphQLData(context.Background(), `{ broken }`, nil, &out)
	if err == nil || !strings.Contains(err.Error(), `Cannot query field "broken"`) {
		t.Errorf("a GraphQL error was not an error: %v", err)
	}
}

func TestClient_NoAnswerIsAnErrorNotAStatus(t *testing.T) {
	s := echo(t)
	base := s.URL
	s.Close()
	a := apiclient.New(base, "tok", nil).Reserve(context.Background(), "A", map[string]any{})
	if a.Err == nil || a.Status != 0 || !strings.HasPrefix(a.String(), "no answer: ") {
		t.Fatalf("a closed server answered: %v", a)
	}
}
