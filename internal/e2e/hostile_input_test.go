package e2e

// Input that is refused, not reinterpreted (the contract's "Next" section):
// integers outside their type, text that is not valid UTF-8, malformed
// times and lax REST bodies are INVALID_INPUT (or 415) with the field named,
// change nothing, and never echo the body or Go's type names.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// rawRequest sends body as it is with the content type given ("" sends none).
func rawRequest(t testing.TB, method, url, token, contentType string, body []byte) response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	out := response{Status: resp.StatusCode, Raw: b.String()}
	dec := json.NewDecoder(strings.NewReader(out.Raw))
	dec.UseNumber()
	_ = dec.Decode(&out.Body)
	assertNothingLeaked(t, out.Raw)
	assertNoGoTypeNames(t, out.Raw)
	return out
}

// assertNoGoTypeNames fails when an answer names Go's types or packages, as
// encoding/json's and strconv's errors do.
func assertNoGoTypeNames(t testing.TB, body string) {
	t.Helper()
	lower := strings.ToLower(body)
	for _, bad := range []string{"go struct", "go value", "int64", "int32", "float64", "strconv", "json:", "reflect", "time.time", "parsing time", "rfc3339nano", "main.", "voucherd/", "*voucher", "unmarshal"} {
		if strings.Contains(lower, bad) {
			t.Errorf("an answer names Go internals (%q): %s", bad, body)
		}
	}
}

// gqlRefusal is the code and field of a refused GraphQL operation op, from
// its payload's error or, for a value the schema's types refuse, from the
// GraphQL error (then data.op is null).
func gqlRefusal(t testing.TB, r response, op string) (code, field string) {
	t.Helper()
	assertNoGoTypeNames(t, r.Raw)
	if e, ok := path(r.Body, "data", op, "error").(map[string]any); ok {
		return str(e["code"]), str(e["field"])
	}
	errs, _ := path(r.Body, "errors").([]any)
	if len(errs) == 0 {
		return "", ""
	}
	if path(r.Body, "data", op) != nil {
		t.Errorf("%s: a GraphQL error with data: %s", op, r.Raw)
	}
	return str(path(errs[0], "extensions", "code")), str(path(errs[0], "extensions", "field"))
}

func voucherExists(t testing.TB, code string) bool {
	t.Helper()
	var n int
	if err := database(t).QueryRow(context.Background(), `SELECT count(*) FROM voucher WHERE code = $1`, code).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func reservationsLike(t testing.TB, prefix string) int {
	t.Helper()
	var n int
	if err := database(t).QueryRow(context.Background(), `SELECT count(*) FROM voucher_redemption WHERE starts_with(order_id, $1)`, prefix).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

const createVoucherOp = `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { voucher { code totalLimit perUserLimit discountAmount gateRemaining } error { code message field } } }`

func TestCreateVoucher_IntegersOutsideTheirTypeAreRefusedNotWrapped(t *testing.T) {
	s := sharedServer(t)
	now := time.Now()
	for _, tc := range []struct {
		field string
		value string // a JSON number, as it is sent
		flash bool
	}{
		{"totalLimit", "4294967396", false},
		{"totalLimit", "4294967306", true},
		{"totalLimit", "2147483648", false},
		{"totalLimit", "9223372036854775807", false},
		{"totalLimit", "-4294967295", false},
		{"perUserLimit", "4294967297", false},
		{"perUserLimit", "2147483648", false},
		{"discountAmount", "9223372036854775808", false},
		{"discountAmount", "9223372036854775807", false},
		{"discountAmount", "9007199254740992", true},
		{"budgetAmount", "9007199254740992", false},
		{"minOrderAmount", "9223372036854775808", false},
		{"minOrderAmount", "-1", false},
	} {
		for _, form := range []string{"variables", "literal"} {
			code := uniqueCode("wrap")
			fields := map[string]string{"code": `"` + code + `"`, "discountAmount": "100", "totalLimit": "5", "perUserLimit": "1",
				"startsAt": `"` + now.Format(time.RFC3339) + `"`, "endsAt": `"` + now.Add(time.Hour).Format(time.RFC3339) + `"`,
				"flash": fmt.Sprint(tc.flash)}
			fields[tc.field] = tc.value
			var r response
			if form == "variables" {
				var in []string
				for k, v := range fields {
					in = append(in, fmt.Sprintf("%q: %s", k, v))
				}
				body := fmt.Sprintf(`{"query": %q, "variables": {"in": {%s}}}`, createVoucherOp, strings.Join(in, ", "))
				r = rawRequest(t, http.MethodPost, s.URL+"/graphql", adminToken, "application/json", []byte(body))
			} else {
				var in []string
				for k, v := range fields {
					in = append(in, k+": "+v)
				}
				q := `mutation { createVoucher(input: {` + strings.Join(in, ", ") + `}) { voucher { code totalLimit } error { code message field } } }`
				r = gql(t, s, adminToken, q, nil)
			}
			// A literal beyond 64 bits, which gqlparser cannot read, is
			// refused on its field too, before validation.
			if c, f := gqlRefusal(t, r, "createVoucher"); c != "INVALID_INPUT" || !strings.HasSuffix(f, tc.field) {
				t.Errorf("%s %s = %s (flash %v): %s, want INVALID_INPUT on %s", form, tc.field, tc.value, tc.flash, r.Raw, tc.field)
			}
			if voucherExists(t, code) {
				t.Errorf("%s %s = %s: the voucher was created", form, tc.field, tc.value)
			}
		}
	}

	// The edges themselves fit.
	code := uniqueCode("edge")
	r := gql(t, s, adminToken, createVoucherOp, map[string]any{"in": map[string]any{
		"code": code, "discountAmount": json.Number("9007199254740991"), "totalLimit": 2147483647, "perUserLimit": 2147483647,
		"startsAt": now.Format(time.RFC3339), "endsAt": now.Add(time.Hour).Format(time.RFC3339)}})
	v := path(r.Body, "data", "createVoucher", "voucher")
	if str(path(v, "totalLimit")) != "2147483647" || str(path(v, "perUserLimit")) != "2147483647" || str(path(v, "discountAmount")) != "9007199254740991" {
		t.Errorf("the largest totalLimit, perUserLimit and Money: %s", r.Raw)
	}
}

func TestUpdateVoucher_IntegersOutsideTheirTypeAreRefused(t *testing.T) {
	s := sharedServer(t)
	code := createVoucher(t, s, voucherSpec{StartsAt: time.Now().Add(time.Hour), EndsAt: time.Now().Add(2 * time.Hour)})
	for _, tc := range []struct{ field, value string }{
		{"totalLimit", "4294967396"}, {"perUserLimit", "4294967297"}, {"discountAmount", "9223372036854775808"},
	} {
		body := fmt.Sprintf(`{"query": "mutation($in: UpdateVoucherInput!) { updateVoucher(input: $in) { voucher { totalLimit } error { code field } } }", "variables": {"in": {"code": %q, %q: %s}}}`, code, tc.field, tc.value)
		r := rawRequest(t, http.MethodPost, s.URL+"/graphql", adminToken, "application/json", []byte(body))
		if c, f := gqlRefusal(t, r, "updateVoucher"); c != "INVALID_INPUT" || !strings.HasSuffix(f, tc.field) {
			t.Errorf("updateVoucher %s = %s: %s, want INVALID_INPUT on %s", tc.field, tc.value, r.Raw, tc.field)
		}
	}
	if r := gql(t, s, adminToken, `query($c: String!) { voucher(code: $c) { totalLimit perUserLimit } }`, map[string]any{"c": code}); str(path(r.Body, "data", "voucher", "totalLimit")) != "10" || str(path(r.Body, "data", "voucher", "perUserLimit")) != "1" {
		t.Errorf("after refused changes: %s, want totalLimit 10, perUserLimit 1", r.Raw)
	}
}

func TestCreateVoucher_MalformedTimeIsInvalidInput(t *testing.T) {
	s := sharedServer(t)
	now := time.Now()
	for _, bad := range []string{"yesterday", "2026-01-01T00:00:00", "2026-01-01", "2026-01-01 00:00:00Z", "", "2026-13-01T00:00:00Z", "1767225600"} {
		code := uniqueCode("time")
		r := gql(t, s, adminToken, createVoucherOp, map[string]any{"in": map[string]any{
			"code": code, "discountAmount": 100, "totalLimit": 5, "startsAt": bad, "endsAt": now.Add(time.Hour).Format(time.RFC3339)}})
		if c, f := gqlRefusal(t, r, "createVoucher"); c != "INVALID_INPUT" || !strings.HasSuffix(f, "startsAt") {
			t.Errorf("startsAt %q: %s, want INVALID_INPUT on startsAt", bad, r.Raw)
		}
		lit := fmt.Sprintf(`mutation { createVoucher(input: {code: %q, discountAmount: 100, totalLimit: 5, startsAt: %q, endsAt: %q}) { error { code field } } }`, code, now.Format(time.RFC3339), bad)
		r = gql(t, s, adminToken, lit, nil)
		if c, f := gqlRefusal(t, r, "createVoucher"); c != "INVALID_INPUT" || !strings.HasSuffix(f, "endsAt") {
			t.Errorf("endsAt literal %q: %s, want INVALID_INPUT on endsAt", bad, r.Raw)
		}
		if voucherExists(t, code) {
			t.Errorf("a malformed time %q created the voucher", bad)
		}
	}
}

// jsonBytes writes s as a JSON string with its bytes as they are: only the
// quote, the backslash and control characters are escaped.
func jsonBytes(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func TestReserve_TextThatIsNotValidUTF8IsRefusedOnEveryTransport(t *testing.T) {
	s := sharedServer(t)
	code := createVoucher(t, s, voucherSpec{TotalLimit: 100, PerUserLimit: 100})
	prefix := "u8-" + uniqueOrder()[2:] + "-"
	orders := []string{ // as they appear inside the JSON string
		prefix + "\xff", prefix + "\xfe", prefix + `\ud800`, prefix + `\udfff`, prefix + `\ud800x`, prefix + `\ud800\u0041`,
		prefix + "\xed\xa0\x80", prefix + "\xc0\xaf", prefix + `\u0000`, prefix + "a\xe2\x82",
	}
	for _, o := range orders {
		rest := rawRequest(t, http.MethodPost, s.URL+"/vouchers/"+code+"/reservations", storefrontToken, "application/json",
			[]byte(`{"customerId": 7, "orderId": "`+o+`", "orderAmount": 100}`))
		if rest.Status != http.StatusBadRequest || str(rest.Body["error"]) != "INVALID_INPUT" || str(rest.Body["field"]) != "orderId" {
			t.Errorf("REST orderId %q: HTTP %d %s, want 400 INVALID_INPUT orderId", o, rest.Status, rest.Raw)
		}
		body := `{"query": "mutation($in: ReserveVoucherInput!) { reserveVoucher(input: $in) { reservation { orderId } error { code field } } }", "variables": {"in": {"code": "` + code + `", "customerId": "7", "orderId": "` + o + `", "orderAmount": 100}}}`
		g := rawRequest(t, http.MethodPost, s.URL+"/graphql", storefrontToken, "application/json", []byte(body))
		if c, f := gqlRefusal(t, g, "reserveVoucher"); c != "INVALID_INPUT" || !strings.HasSuffix(f, "orderId") {
			t.Errorf("GraphQL variable orderId %q: %s, want INVALID_INPUT on orderId", o, g.Raw)
		}
	}
	// In the operation's text: a GraphQL escape of an unpaired surrogate or a NUL.
	for _, lit := range []string{`\\ud800`, `\\udc00x`, `\\u0000`, `\\u{0}`, "\xff"} {
		q := `mutation { reserveVoucher(input: {code: \"` + code + `\", customerId: \"7\", orderId: \"` + prefix + lit + `\", orderAmount: 100}) { reservation { orderId } error { code field } } }`
		g := rawRequest(t, http.MethodPost, s.URL+"/graphql", storefrontToken, "application/json", []byte(`{"query": "`+q+`"}`))
		if c, _ := gqlRefusal(t, g, "reserveVoucher"); c != "INVALID_INPUT" {
			t.Errorf("GraphQL literal orderId %q: %s, want INVALID_INPUT", lit, g.Raw)
		}
	}
	if n := reservationsLike(t, prefix); n != 0 {
		t.Errorf("%d reservations were made of invalid orderIds", n)
	}
	if st := readVoucher(t, s, code); st.Used != 0 {
		t.Errorf("usedCount = %d after refused reserves", st.Used)
	}
	// A voucher code in the path that is not UTF-8, and a code in GraphQL.
	if r := rawRequest(t, http.MethodPost, s.URL+"/vouchers/"+url.PathEscape(code+"\xff")+"/reservations", storefrontToken, "application/json",
		[]byte(`{"customerId": 7, "orderId": "`+prefix+`c", "orderAmount": 100}`)); str(r.Body["error"]) != "INVALID_INPUT" || str(r.Body["field"]) != "code" {
		t.Errorf("a code with \\xff: HTTP %d %s", r.Status, r.Raw)
	}
}

// TestReserve_OrderIdsThatDifferInAnyByteAreTwoOrders: random orderIds (any
// bytes) and the same with one byte changed never share a reservation on
// either transport: each is refused or reserved as itself.
func TestReserve_OrderIdsThatDifferInAnyByteAreTwoOrders(t *testing.T) {
	s := sharedServer(t)
	code := createVoucher(t, s, voucherSpec{TotalLimit: 1000, PerUserLimit: 1000})
	rng := rand.New(rand.NewPCG(11, uint64(time.Now().UnixNano())))
	alphabet := []string{"a", "-", "é", "€", "😀", "\xff", "\xfe", "\xc3", "\xed\xa0\x80", "\x00", "\x7f", "\"", "\\", `\ud800`, `\u00e9`, "\uFFFD"}
	seen := map[string]string{} // reservation orderId -> the request's bytes
	for i := range 40 {
		var b strings.Builder
		fmt.Fprintf(&b, "p%d-%d-", i, rng.Uint32())
		for range 1 + rng.IntN(6) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		a := b.String()
		pos := rng.IntN(len(a))
		other := []byte(a)
		other[pos] ^= "\x01\x02\x04\x08\x10\x20\x40\x80\xff"[rng.IntN(9)] // any change of the byte
		for _, o := range []string{a, string(other)} {
			var got string
			if i%2 == 0 {
				r := rawRequest(t, http.MethodPost, s.URL+"/vouchers/"+code+"/reservations", storefrontToken, "application/json",
					[]byte(`{"customerId": 7, "orderId": `+jsonBytes(o)+`, "orderAmount": 100}`))
				if r.Status == http.StatusCreated {
					got = str(r.Body["orderId"])
				}
			} else {
				body := `{"query": "mutation($in: ReserveVoucherInput!) { reserveVoucher(input: $in) { reservation { orderId } error { code field } } }", "variables": {"in": {"code": "` + code + `", "customerId": "7", "orderId": ` + jsonBytes(o) + `, "orderAmount": 100}}}`
				r := rawRequest(t, http.MethodPost, s.URL+"/graphql", storefrontToken, "application/json", []byte(body))
				got = str(path(r.Body, "data", "reserveVoucher", "reservation", "orderId"))
			}
			if got == "" {
				continue
			}
			if prev, dup := seen[got]; dup && prev != o {
				t.Errorf("orderIds %q and %q share the reservation %q", prev, o, got)
			}
			seen[got] = o
		}
	}
}

func TestREST_OnlyJSONIsAccepted(t *testing.T) {
	s := sharedServer(t)
	code := createVoucher(t, s, voucherSpec{TotalLimit: 100, PerUserLimit: 100})
	for _, ct := range []string{"text/plain", "", "application/x-www-form-urlencoded", "application/jsonx", "application/json; charset=latin1", "text/json"} {
		order := uniqueOrder()
		r := rawRequest(t, http.MethodPost, s.URL+"/vouchers/"+code+"/reservations", storefrontToken, ct,
			[]byte(`{"customerId": 7, "orderId": "`+order+`", "orderAmount": 100}`))
		if r.Status != http.StatusUnsupportedMediaType {
			t.Errorf("Content-Type %q: HTTP %d %s, want 415", ct, r.Status, r.Raw)
		}
		if reservationsLike(t, order) != 0 {
			t.Errorf("Content-Type %q made a reservation", ct)
		}
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON; Charset=UTF-8"} {
		r := rawRequest(t, http.MethodPost, s.URL+"/vouchers/"+code+"/reservations", storefrontToken, ct,
			[]byte(`{"customerId": 7, "orderId": "`+uniqueOrder()+`", "orderAmount": 100}`))
		if r.Status != http.StatusCreated {
			t.Errorf("Content-Type %q: HTTP %d %s, want 201", ct, r.Status, r.Raw)
		}
	}
}

func TestREST_BodiesAreReadExactlyAsDocumented(t *testing.T) {
	s := sharedServer(t)
	code := createVoucher(t, s, voucherSpec{TotalLimit: 100, PerUserLimit: 100})
	const marker = "zq-marker-9f3"
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	wide := "[" + strings.Repeat("1,", 200000) + "1]"
	for _, tc := range []struct {
		desc, body, field string
	}{
		{"customerId in capitals", `{"CUSTOMERID": 7, "orderId": "ORDER", "orderAmount": 100}`, "customerId"},
		{"orderAmount in lower case", `{"customerId": 7, "orderId": "ORDER", "orderamount": 100}`, "orderAmount"},
		{"orderId twice", `{"customerId": 7, "orderId": "ORDER", "orderId": "ORDER-2", "orderAmount": 100}`, "orderId"},
		{"customerId twice", `{"customerId": 7, "customerId": 8, "orderId": "ORDER", "orderAmount": 100}`, "customerId"},
		{"an unknown field", `{"customerId": 7, "orderId": "ORDER", "orderAmount": 100, "coupon": "x"}`, "coupon"},
		{"an unknown field with a long name", `{"customerId": 7, "orderId": "ORDER", "orderAmount": 100, "` + marker + strings.Repeat("x", 200) + `": 1}`, "body"},
		{"an exponent in orderAmount", `{"customerId": 7, "orderId": "ORDER", "orderAmount": 1e3}`, "orderAmount"},
		{"an exponent in customerId", `{"customerId": 7e0, "orderId": "ORDER", "orderAmount": 100}`, "customerId"},
		{"negative zero", `{"customerId": 7, "orderId": "ORDER", "orderAmount": -0}`, "orderAmount"},
		{"a float", `{"customerId": 7, "orderId": "ORDER", "orderAmount": 100.0}`, "orderAmount"},
		{"Money over 2^63-1", `{"customerId": 7, "orderId": "ORDER", "orderAmount": 9223372036854775808}`, "orderAmount"},
		{"Money over 2^53-1", `{"customerId": 7, "orderId": "ORDER", "orderAmount": 9007199254740992}`, "orderAmount"},
		{"customerId over 2^63-1", `{"customerId": 9223372036854775808, "orderId": "ORDER", "orderAmount": 100}`, "customerId"},
		{"a deep value", `{"customerId": ` + deep + `, "orderId": "ORDER", "orderAmount": 100}`, "customerId"},
		{"a huge array", `{"customerId": 7, "orderId": "ORDER", "orderAmount": ` + wide + `}`, "orderAmount"},
		{"a deep body", deep, "body"},
		{"a value that echoes", `{"customerId": "` + marker + `", "orderId": "ORDER", "orderAmount": 100}`, "customerId"},
		{"a type that echoes", `{"customerId": 7, "orderId": {"` + marker + `": 1}, "orderAmount": 100}`, "orderId"},
	} {
		order := uniqueOrder()
		body := strings.ReplaceAll(tc.body, "ORDER", order)
		r := rawRequest(t, http.MethodPost, s.URL+"/vouchers/"+code+"/reservations", storefrontToken, "application/json", []byte(body))
		if r.Status != http.StatusBadRequest || str(r.Body["error"]) != "INVALID_INPUT" || str(r.Body["field"]) != tc.field {
			t.Errorf("%s: HTTP %d %.300s, want 400 INVALID_INPUT field %s", tc.desc, r.Status, r.Raw, tc.field)
		}
		if strings.Contains(r.Raw, marker) || strings.Contains(r.Raw, order) {
			t.Errorf("%s: the answer echoes the body: %.300s", tc.desc, r.Raw)
		}
		if reservationsLike(t, order) != 0 {
			t.Errorf("%s: a reservation was made", tc.desc)
		}
	}
	// The edge of Money (2^53-1) is an amount like any other; customerId's
	// is 64 bits.
	r := rawRequest(t, http.MethodPost, s.URL+"/vouchers/"+code+"/reservations", storefrontToken, "application/json",
		[]byte(`{"customerId": 9223372036854775807, "orderId": "`+uniqueOrder()+`", "orderAmount": 9007199254740991}`))
	if r.Status != http.StatusCreated || str(r.Body["orderAmount"]) != "9007199254740991" || str(r.Body["customerId"]) != "9223372036854775807" {
		t.Errorf("the largest orderAmount and customerId: HTTP %d %s", r.Status, r.Raw)
	}
}
