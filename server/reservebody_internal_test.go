package server

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"voucherd/internal/voucher"
)

// generalReserveRequest is the general path alone: the definition the one-pass
// parser must agree with.
func generalReserveRequest(data []byte, code string) (voucher.ReserveRequest, error) {
	r := httptest.NewRequest(http.MethodPost, "/vouchers/"+code+"/reservations", nil)
	r.Body = io.NopCloser(bytes.NewReader(data))
	var body reserveBody
	if err := decodeJSON(r, &body); err != nil {
		return voucher.ReserveRequest{}, err
	}
	return body.request(code)
}

var reserveBodySeeds = []string{
	`{"customerId":1000000042,"orderId":"fb-rest-1a2b3c-123456","orderAmount":25000}`,
	` { "customerId" : "42" , "orderId" : "o-1" , "orderAmount" : 0 } ` + "\n",
	`{"orderAmount":-5,"orderId":"o","customerId":7}`,
	`{"customerId":"007","orderId":"ü-€-😀","orderAmount":-0}`,
	`{"customerId":1,"orderId":"o-1","orderAmount":9223372036854775807}`,
	`{"customerId":1,"orderId":"o-1","orderAmount":9223372036854775808}`,
	`{"customerId":9223372036854775808,"orderId":"o-1","orderAmount":1}`,
	`{"customerId":0,"orderId":"o-1","orderAmount":1}`,
	`{"customerId":-1,"orderId":"o-1","orderAmount":1}`,
	`{"customerId":"","orderId":"o-1","orderAmount":1}`,
	`{"customerId":"-1","orderId":"o-1","orderAmount":1}`,
	`{"customerId":" 1","orderId":"o-1","orderAmount":1}`,
	`{"customerId":1.5,"orderId":"o-1","orderAmount":100}`,
	`{"customerId":1e3,"orderId":"o-1","orderAmount":100}`,
	`{"customerId":1,"orderId":"o-1","orderAmount":100.5}`,
	`{"customerId":1,"orderId":"o-1","orderAmount":1E2}`,
	`{"customerId":1,"orderId":"o-1","orderAmount":"100"}`,
	`{"customerId":1,"orderId":12,"orderAmount":100}`,
	`{"customerId":1,"orderId":null,"orderAmount":100}`,
	`{"customerId":null,"orderId":"o","orderAmount":100}`,
	`{"customerId":1,"orderId":"o","orderAmount":null}`,
	`{"customerId":1,"orderId":"a\"b","orderAmount":1}`,
	`{"customerId":1,"orderId":"a\u0041","orderAmount":1}`,
	"{\"customerId\":1,\"orderId\":\"a\tb\",\"orderAmount\":1}",
	"{\"customerId\":1,\"orderId\":\"a\xffb\",\"orderAmount\":1}",
	`{"customerId":1,"orderId":"","orderAmount":1}`,
	`{"CustomerId":1,"orderId":"o","orderAmount":1}`,
	`{"customerid":1,"orderId":"o","orderAmount":1}`,
	`{"customerId":1,"orderId":"o","orderAmount":1,"extra":true}`,
	`{"customerId":1,"customerId":2,"orderId":"o","orderAmount":1}`,
	`{"customerId":1,"orderId":"o"}`,
	`{"orderId":"o","orderAmount":1}`,
	`{"customerId":1,"orderAmount":1}`,
	`{"customerId":1,"orderId":"o","orderAmount":1}}`,
	`{"customerId":1,"orderId":"o","orderAmount":1}]`,
	`{"customerId":1,"orderId":"o","orderAmount":1} {}`,
	`{"customerId":1,"orderId":"o","orderAmount":1} x`,
	`{"customerId":1,"orderId":"o","orderAmount":1,}`,
	`{"customerId":1,"orderId":"o","orderAmount":01}`,
	`{"customerId":01,"orderId":"o","orderAmount":1}`,
	`{"customerId":1,"orderId":"o","orderAmount":-}`,
	`{"customerId":1 "orderId":"o","orderAmount":1}`,
	"\ufeff{\"customerId\":1,\"orderId\":\"o\",\"orderAmount\":1}",
	`{not json`, `[]`, `null`, `""`, `1`, ``, `{}`, `{`,
}

// TestParseReserveBody_AgreesWithTheGeneralPath: whatever the one-pass parser
// accepts, the general path accepts with the same request; what it does not,
// the general path answers.
func TestParseReserveBody_AgreesWithTheGeneralPath(t *testing.T) {
	accepted := 0
	for _, body := range reserveBodySeeds {
		if checkReserveBody(t, []byte(body)) {
			accepted++
		}
	}
	if accepted < 5 {
		t.Errorf("the one-pass parser accepted %d of the valid bodies, want at least 5", accepted)
	}
}

func FuzzParseReserveBody(f *testing.F) {
	for _, body := range reserveBodySeeds {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkReserveBody(t, body) })
}

func checkReserveBody(t *testing.T, body []byte) bool {
	t.Helper()
	fast, ok := parseReserveBody(body, "flash-1")
	want, err := generalReserveRequest(body, "flash-1")
	if !ok {
		return false
	}
	if err != nil || fast != want {
		t.Errorf("%q: one pass gives %+v, the general path %+v, %v", body, fast, want, err)
	}
	return true
}

// TestReserveRequest_UsesTheBodyOnce: the one-pass parser sees the bytes
// limitBody read; a body already read from, or another body, takes the
// general path with the same answer.
func TestReserveRequest_UsesTheBodyOnce(t *testing.T) {
	body := []byte(`{"customerId":"42","orderId":"o-1","orderAmount":100}`)
	want := voucher.ReserveRequest{Code: "flash-1", CustomerID: 42, OrderID: "o-1", OrderAmount: 100}
	for name, rc := range map[string]io.ReadCloser{
		"readBody": newReadBody(body),
		"stream":   io.NopCloser(bytes.NewReader(body)),
	} {
		r := httptest.NewRequest(http.MethodPost, "/vouchers/flash-1/reservations", nil)
		r.SetPathValue("code", "flash-1")
		r.Body = rc
		if got, err := reserveRequest(r); err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", name, got, err, want)
		}
	}
	if _, ok := unread(&http.Request{Body: newReadBody(body)}); !ok {
		t.Error("an unread readBody was not used")
	}
	rb := newReadBody(body)
	_, _ = rb.Read(make([]byte, 1))
	if _, ok := unread(&http.Request{Body: rb}); ok {
		t.Error("a readBody that was read from was used")
	}
}
