package graph_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// postAs sends body to POST /graphql with token.
func postAs(t testing.TB, h http.Handler, token string, body []byte) *answer {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	a := &answer{Status: w.Code, Raw: w.Body.Bytes()}
	if err := json.Unmarshal(a.Raw, &a.Body); err != nil {
		t.Fatalf("not a GraphQL response: %v: %.300s", err, a.Raw)
	}
	return a
}

func (a *answer) field() string {
	if len(a.Body.Errors) == 0 {
		return ""
	}
	f, _ := a.Body.Errors[0].Extensions["field"].(string)
	return f
}

const (
	createDoc  = `mutation($i: CreateVoucherInput!) { createVoucher(input: $i) { voucher { code } error { code field } } }`
	reserveGQL = `mutation($i: ReserveVoucherInput!) { reserveVoucher(input: $i) { reservation { orderId } error { code field message } } }`
)

func rawBody(query, vars string) []byte {
	b, _ := json.Marshal(query)
	return []byte(`{"query":` + string(b) + `,"variables":` + vars + `}`)
}

// TestCoercion_AsTheSpecificationSays: a String given a JSON number or a
// boolean, an enum value in another case (a variable or a literal), an
// integer that fits no integer type, a fraction for an Int: INVALID_INPUT
// naming the input field, HTTP 200 with data null, and nothing done (the
// reserve of orderId 123 never makes order "123"). gqlparser took a JSON
// number for a String, compared enum values without case, and answered the
// rest GRAPHQL_VALIDATION_FAILED without a field, or INTERNAL.
func TestCoercion_AsTheSpecificationSays(t *testing.T) {
	s := testSurface(t)
	p := fmt.Sprintf("CO%X", rand.Uint32())
	window := `"startsAt":"2026-01-01T00:00:00Z","endsAt":"2100-01-01T00:00:00Z"`
	for _, env := range s.envs() {
		code := p + env.name[:1]
		if a := postAs(t, env.handler, testAdmin, rawBody(createDoc, `{"i":{"code":"`+code+`","discountAmount":100,"totalLimit":5,"perUserLimit":1,"minOrderAmount":0,`+window+`}}`)); !strings.Contains(string(a.Raw), `"voucher":{"code":"`+strings.ToUpper(code)+`"}`) {
			t.Fatalf("%s: create: %s", env.name, a.Raw)
		}
		order := func(n string) string { return fmt.Sprintf("%s-%s-%s", p, env.name, n) }
		for _, c := range []struct {
			name, token string
			body        []byte
			field       string
		}{
			{"enum value in lower case", testAdmin, rawBody(createDoc, `{"i":{"code":"`+p+`E","discountType":"percent","discountPercent":10,"totalLimit":5,"perUserLimit":1,"minOrderAmount":0,`+window+`}}`), "input.discountType"},
			{"enum value in lower case, a literal", testAdmin, query(`mutation { createVoucher(input: {code: "`+p+`F", discountType: percent, discountPercent: 10, totalLimit: 5, perUserLimit: 1, minOrderAmount: 0, startsAt: "2026-01-01T00:00:00Z", endsAt: "2100-01-01T00:00:00Z"}) { error { code } } }`, nil), "input.discountType"},
			{"a number for a String", testStorefront, rawBody(reserveGQL, `{"i":{"code":"`+code+`","customerId":"1","orderId":123,"orderAmount":100}}`), "input.orderId"},
			{"a boolean for a String", testStorefront, rawBody(reserveGQL, `{"i":{"code":true,"customerId":"1","orderId":"`+order("b")+`","orderAmount":100}}`), "input.code"},
			{"a number for a String in an argument", testStorefront, rawBody(`query($c: String!) { voucher(code: $c) { code } }`, `{"c":12}`), "code"},
			{"a boolean for an ID", testStorefront, rawBody(reserveGQL, `{"i":{"code":"`+code+`","customerId":true,"orderId":"`+order("c")+`","orderAmount":100}}`), "input.customerId"},
			{"an integer past 64 bits for an Int", testAdmin, rawBody(createDoc, `{"i":{"code":"`+p+`G","discountAmount":100,"totalLimit":18446744073709551617,"perUserLimit":1,"minOrderAmount":0,`+window+`}}`), "input.totalLimit"},
			{"a fraction for an Int", testStorefront, rawBody(`query($n: Int) { vouchers(first: $n) { edges { cursor } } }`, `{"n":5.5}`), "first"},
			{"a key the input type lacks", testStorefront, rawBody(reserveGQL, `{"i":{"code":"`+code+`","customerId":"1","orderId":"`+order("d")+`","orderAmount":100,"`+strings.Repeat("k", 4000)+`":1}}`), "input"},
		} {
			a := postAs(t, env.handler, c.token, c.body)
			if a.Status != http.StatusOK || a.code() != "INVALID_INPUT" || a.field() != c.field || string(a.Body.Data) != "null" {
				t.Errorf("%s: %s: %v, want INVALID_INPUT with field %s and data null", env.name, c.name, a, c.field)
			}
		}
		// Nothing was done: no order "123" and no voucher made.
		if a := postAs(t, env.handler, testStorefront, query(`{ reservation(orderId: "123") { voucherCode } v: voucher(code: "`+p+`E") { code } }`, nil)); strings.Contains(string(a.Raw), code) || strings.Contains(string(a.Raw), p+"E") {
			t.Errorf("%s: a refused request left %s", env.name, a.Raw)
		}
	}
}

// TestErrorField_IsBounded: extensions.field names an input field of the
// schema, or at most a bounded piece of the document: a literal too wide
// for any integer, nested 900 input fields deep (each name 100
// characters), was named by its whole path, about 90 KB.
func TestErrorField_IsBounded(t *testing.T) {
	s := testSurface(t)
	name := strings.Repeat("n", 100)
	doc := `mutation { createVoucher(input: ` + strings.Repeat("{"+name+": ", 900) + `99999999999999999999` + strings.Repeat("}", 900) + `) { error { code } } }`
	for _, env := range s.envs() {
		a := postAs(t, env.handler, testAdmin, query(doc, nil))
		if a.code() != "INVALID_INPUT" || len(a.field()) > 512 || len(a.Raw) > 4096 {
			t.Errorf("%s: code %s, a field of %d bytes, an answer of %d: %.300s", env.name, a.code(), len(a.field()), len(a.Raw), a.Raw)
		}
	}
}

// TestProduction_MessagesQuoteNoValueOfTheRequest: in production a refusal's
// message quotes neither the orderId nor the code nor an amount, on the
// fast path and the executor alike (outside production they do, for the
// developer).
func TestProduction_MessagesQuoteNoValueOfTheRequest(t *testing.T) {
	s := testSurface(t)
	p := fmt.Sprintf("PM%X", rand.Uint32())
	start, end := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	code := p + "V"
	if a := postAs(t, s.dev, testAdmin, rawBody(createDoc, `{"i":{"code":"`+code+`","discountAmount":100,"totalLimit":5,"perUserLimit":1,"minOrderAmount":1000,"startsAt":"`+start+`","endsAt":"`+end+`"}}`)); !strings.Contains(string(a.Raw), code) {
		t.Fatalf("create: %s", a.Raw)
	}
	order := p + "-order-7Q"
	reserve := func(h http.Handler, c, o string, amount int) *answer {
		return postAs(t, h, testStorefront, rawBody(reserveGQL, fmt.Sprintf(`{"i":{"code":%q,"customerId":"4242","orderId":%q,"orderAmount":%d}}`, c, o, amount)))
	}
	if a := reserve(s.dev, code, order, 5000); !strings.Contains(string(a.Raw), `"orderId":"`+order+`"`) {
		t.Fatalf("reserve: %s", a.Raw)
	}
	cases := []struct {
		name, code, order string
		amount            int
		want              string
	}{
		{"ORDER_CONFLICT", code, order, 6000, "ORDER_CONFLICT"},
		{"NOT_FOUND", p + "NONE", p + "-o2", 5000, "NOT_FOUND"},
		{"ALREADY_USED", code, p + "-o3", 5000, "ALREADY_USED"},
	}
	for _, c := range cases {
		// Twice: the second time the fast path answers.
		for range 2 {
			prod := reserve(s.prod, c.code, c.order, c.amount)
			if !strings.Contains(string(prod.Raw), `"code":"`+c.want+`"`) {
				t.Fatalf("%s: %s", c.name, prod.Raw)
			}
			for _, v := range []string{c.order, strings.ToUpper(c.code), c.code, "4242", fmt.Sprint(c.amount)} {
				if strings.Contains(strings.ToUpper(string(prod.Raw)), strings.ToUpper(v)) {
					t.Errorf("production %s quotes %q: %s", c.name, v, prod.Raw)
				}
			}
		}
		if dev := reserve(s.dev, c.code, c.order, c.amount); !strings.Contains(string(dev.Raw), `"message":"`) {
			t.Errorf("development %s: %s", c.name, dev.Raw)
		}
		// REST, the same.
		r := httptest.NewRequest(http.MethodPost, "/vouchers/"+c.code+"/reservations", strings.NewReader(fmt.Sprintf(`{"customerId":4242,"orderId":%q,"orderAmount":%d}`, c.order, c.amount)))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+testStorefront)
		w := httptest.NewRecorder()
		s.prod.ServeHTTP(w, r)
		if !strings.Contains(w.Body.String(), `"error":"`+c.want+`"`) {
			t.Fatalf("REST %s: %d %s", c.name, w.Code, w.Body)
		}
		for _, v := range []string{c.order, c.code, "4242", fmt.Sprint(c.amount)} {
			if strings.Contains(strings.ToUpper(w.Body.String()), strings.ToUpper(v)) {
				t.Errorf("production REST %s quotes %q: %s", c.name, v, w.Body)
			}
		}
	}
}
