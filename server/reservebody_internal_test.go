package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"unicode/utf8"

	"voucherd/internal/voucher"
)

// generalReserveRequest is the general path alone: the definition the one-pass
// parser must agree with.
func generalReserveRequest(data []byte, code string) (voucher.ReserveRequest, error) {
	return readReserveBody(data, code)
}

var reserveBodySeeds = []string{
	`{"customerId":1000000042,"orderId":"fb-rest-1a2b3c-123456","orderAmount":25000}`,
	` { "customerId" : "42" , "orderId" : "o-1" , "orderAmount" : 0 } ` + "\n",
	`{"orderAmount":-5,"orderId":"o","customerId":7}`,
	`{"customerId":"007","orderId":"ü-€-😀","orderAmount":-0}`,
	`{"customerId":1,"orderId":"o-1","orderAmount":9007199254740991}`,
	`{"customerId":1,"orderId":"o-1","orderAmount":9007199254740992}`,
	`{"customerId":1,"orderId":"o-1","orderAmount":-9007199254740992}`,
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
	// Issue 11's hostile bodies: text a decoder would replace, keys in
	// another case or twice, numbers that are not plain integers.
	"{\"customerId\":1,\"orderId\":\"u8-\xfe\",\"orderAmount\":1}",
	"{\"customerId\":1,\"orderId\":\"u8-\xed\xa0\x80\",\"orderAmount\":1}",
	`{"customerId":1,"orderId":"u8-\ud800","orderAmount":1}`,
	`{"customerId":1,"orderId":"u8-\udc00\ud800","orderAmount":1}`,
	`{"customerId":1,"orderId":"u8-\ud83d\ude00","orderAmount":1}`,
	`{"customerId":1,"orderId":"u8-\u0000","orderAmount":1}`,
	"{\"customerId\":1,\"orderId\":\"o\",\"orderAmount\":1,\"x\xff\":1}",
	`{"CUSTOMERID":1,"orderId":"o","orderamount":1}`,
	`{"customerId":1,"orderId":"o","orderId":"p","orderAmount":1}`,
	`{"customerId":1,"orderId":"o","orderAmount":1e3}`,
	`{"customerId":1,"orderId":"o","orderAmount":-0}`,
	`{"customerId":-0,"orderId":"o","orderAmount":1}`,
	`{"customerId":[[[[[[1]]]]]],"orderId":"o","orderAmount":1}`,
	`{"customerId":1,"orderId":"o","orderAmount":[1,2,3]}`,
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
	if err != nil || !reflect.DeepEqual(fast, want) {
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
		if got, err := reserveRequest(r); err != nil || !reflect.DeepEqual(got, want) {
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

// FuzzReserveRequest is the whole REST reader (one pass, else the general
// path) on any body: it never panics; what it accepts re-encodes to the same
// fields; text that a decoder would replace is never accepted.
func FuzzReserveRequest(f *testing.F) {
	for _, body := range reserveBodySeeds {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ok := parseReserveBody(body, "flash-1")
		if !ok {
			var err error
			if req, err = readReserveBody(body, "flash-1"); err != nil {
				if e := voucher.AsError(err); e.Code != voucher.InvalidInput || e.Field == "" {
					t.Fatalf("%q: refused with %+v, want INVALID_INPUT naming a field", body, e)
				}
				return
			}
		}
		if badText(body) >= 0 || !utf8.ValidString(req.OrderID) {
			t.Fatalf("%q: accepted text that is not valid UTF-8: %+v", body, req)
		}
		again, err := json.Marshal(map[string]any{"customerId": req.CustomerID, "orderId": req.OrderID, "orderAmount": req.OrderAmount})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := readReserveBody(again, "flash-1"); err != nil || !reflect.DeepEqual(got, req) {
			t.Fatalf("%q: accepted as %+v, which re-encoded reads as %+v, %v", body, req, got, err)
		}
	})
}

// bytes256 holds every byte value, bytes256[i] == i.
var bytes256 = func() (b [256]byte) {
	for i := range b {
		b[i] = byte(i) //nolint:gosec // G115: i is 0-255
	}
	return b
}()

// TestReserveRequest_OrderIdsThatDifferInAnyByteAreTwoOrders: an orderId of
// random bytes, and the same with one byte changed, are each refused or read
// as exactly themselves, so they are never one order.
func TestReserveRequest_OrderIdsThatDifferInAnyByteAreTwoOrders(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 11))
	read := func(orderID []byte) (string, bool) {
		var b bytes.Buffer
		b.WriteString(`{"customerId":7,"orderId":"`)
		for _, c := range orderID {
			switch {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c < 0x20:
				fmt.Fprintf(&b, `\u%04x`, c)
			default:
				b.WriteByte(c)
			}
		}
		b.WriteString(`","orderAmount":100}`)
		r := httptest.NewRequest(http.MethodPost, "/vouchers/flash-1/reservations", nil)
		r.SetPathValue("code", "flash-1")
		r.Body = newReadBody(b.Bytes())
		req, err := reserveRequest(r)
		if err != nil || req.Validate() != nil {
			return "", false
		}
		return req.OrderID, true
	}
	accepted := 0
	for range 20000 {
		a := make([]byte, 1+rng.IntN(12))
		for i := range a {
			a[i] = bytes256[rng.IntN(256)]
			if rng.IntN(2) == 0 {
				const common = "ab-\xc3\xa9\xe2\x82\xac\xff\xed\xa0\x80" // ASCII, é, €, and bytes that are not UTF-8
				a[i] = common[rng.IntN(len(common))]
			}
		}
		b := bytes.Clone(a)
		b[rng.IntN(len(b))] ^= bytes256[1+rng.IntN(255)]
		ga, okA := read(a)
		gb, okB := read(b)
		if okA && ga != string(a) || okB && gb != string(b) {
			t.Fatalf("%q read as %q, %q read as %q", a, ga, b, gb)
		}
		if okA && okB {
			accepted++
			if ga == gb {
				t.Fatalf("%q and %q are one order %q", a, b, ga)
			}
		}
	}
	if accepted < 100 {
		t.Errorf("only %d pairs were both accepted: the test proves little", accepted)
	}
}
