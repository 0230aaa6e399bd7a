package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestAuth_NoOrUnknownTokenIs401BeforeAnyWork(t *testing.T) {
	s := sharedServer(t)
	code := createVoucher(t, s, voucherSpec{})
	body := map[string]any{"customerId": 1, "orderId": uniqueOrder(), "orderAmount": 100}
	for _, token := range []string{"", "not-a-token", storefrontToken + "x"} {
		r := do(t, http.MethodPost, s.URL+"/vouchers/"+code+"/reservations", token, body)
		if r.Status != http.StatusUnauthorized {
			t.Errorf("REST with token %q: HTTP %d, want 401", token, r.Status)
		}
		g := do(t, http.MethodPost, s.URL+"/graphql", token, map[string]any{"query": `{ vouchers { edges { cursor } } }`})
		if g.Status != http.StatusUnauthorized {
			t.Errorf("GraphQL with token %q: HTTP %d, want 401", token, g.Status)
		}
	}
	if st := readVoucher(t, s, code); st.Used != 0 {
		t.Errorf("usedCount after unauthenticated calls = %d", st.Used)
	}
}

func TestAuth_StorefrontTokenCannotCallAdminOperations(t *testing.T) {
	s := sharedServer(t)
	code := uniqueCode("forbidden")
	r := gql(t, s, storefrontToken, `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { voucher { code } error { code } } }`,
		map[string]any{"in": map[string]any{"code": code, "discountAmount": 100, "totalLimit": 5,
			"startsAt": time.Now().Format(time.RFC3339), "endsAt": time.Now().Add(time.Hour).Format(time.RFC3339)}})
	if got := str(path(r.Body, "errors")); !strings.Contains(got, "FORBIDDEN") {
		t.Errorf("storefront createVoucher: %s, want a FORBIDDEN GraphQL error", r.Raw)
	}
	if v := gql(t, s, adminToken, `query($c: String!) { voucher(code: $c) { code } }`, map[string]any{"c": code}); path(v.Body, "data", "voucher") != nil {
		t.Errorf("a forbidden createVoucher created the voucher")
	}
	d := gql(t, s, storefrontToken, `{ driftReports { voucherCode } }`, nil)
	if !strings.Contains(str(path(d.Body, "errors")), "FORBIDDEN") {
		t.Errorf("storefront driftReports: %s, want FORBIDDEN", d.Raw)
	}
	// The storefront may read.
	if v := gql(t, s, storefrontToken, `{ vouchers(first: 1) { edges { cursor } } }`, nil); path(v.Body, "errors") != nil {
		t.Errorf("storefront vouchers: %s", v.Raw)
	}
}

func TestCreateVoucher_ValidatesEveryFieldAndCodeIsUnique(t *testing.T) {
	s := sharedServer(t)
	now := time.Now()
	valid := func() map[string]any {
		return map[string]any{"code": uniqueCode("c"), "discountAmount": 100, "minOrderAmount": 0, "totalLimit": 5, "perUserLimit": 1,
			"startsAt": now.Format(time.RFC3339), "endsAt": now.Add(time.Hour).Format(time.RFC3339)}
	}
	const m = `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { voucher { code totalLimit perUserLimit minOrderAmount flash } error { code field message } } }`
	for _, tc := range []struct {
		field string
		value any
	}{
		{"code", "has space"},
		{"code", ""},
		{"code", strings.Repeat("x", 33)},
		{"discountAmount", 0},
		{"discountAmount", -1},
		{"minOrderAmount", -1},
		{"totalLimit", 0},
		{"perUserLimit", 0},
		{"endsAt", now.Add(-time.Hour).Format(time.RFC3339)},
		{"endsAt", now.Format(time.RFC3339)},
	} {
		in := valid()
		in[tc.field] = tc.value
		r := gql(t, s, adminToken, m, map[string]any{"in": in})
		e := path(r.Body, "data", "createVoucher", "error")
		if str(path(e, "code")) != "INVALID_INPUT" || !strings.HasSuffix(str(path(e, "field")), tc.field) {
			t.Errorf("%s = %v: %s, want INVALID_INPUT on %s", tc.field, tc.value, r.Raw, tc.field)
		}
		if v := gql(t, s, adminToken, `query($c: String!) { voucher(code: $c) { code } }`, map[string]any{"c": in["code"]}); path(v.Body, "data", "voucher") != nil && tc.field != "code" {
			t.Errorf("an invalid createVoucher (%s) created the voucher", tc.field)
		}
	}
	// Defaults from the schema, and the code is unique.
	in := valid()
	delete(in, "minOrderAmount")
	delete(in, "perUserLimit")
	r := gql(t, s, adminToken, m, map[string]any{"in": in})
	v := path(r.Body, "data", "createVoucher", "voucher")
	if num(t, path(v, "perUserLimit")) != 1 || num(t, path(v, "minOrderAmount")) != 0 || path(v, "flash") != false {
		t.Errorf("defaults: %s", r.Raw)
	}
	r = gql(t, s, adminToken, m, map[string]any{"in": in})
	if got := str(path(r.Body, "data", "createVoucher", "error", "code")); got != "VOUCHER_EXISTS" {
		t.Errorf("second createVoucher with the same code = %s, want VOUCHER_EXISTS", r.Raw)
	}
}

func TestQueries_VoucherVouchersAndReservation(t *testing.T) {
	s := sharedServer(t)
	codes := []string{createVoucher(t, s, voucherSpec{}), createVoucher(t, s, voucherSpec{}), createVoucher(t, s, voucherSpec{})}
	// Newest first, paginated by cursor, without repeats.
	var seen []string
	after := any(nil)
	for page := 0; page < 100; page++ {
		r := gql(t, s, storefrontToken, `query($a: String) { vouchers(first: 2, after: $a) { edges { cursor node { code } } pageInfo { hasNextPage endCursor } } }`, map[string]any{"a": after})
		for _, e := range path(r.Body, "data", "vouchers", "edges").([]any) {
			seen = append(seen, str(path(e, "node", "code")))
		}
		if path(r.Body, "data", "vouchers", "pageInfo", "hasNextPage") != true {
			break
		}
		after = path(r.Body, "data", "vouchers", "pageInfo", "endCursor")
	}
	pos := map[string]int{}
	for i, c := range seen {
		if _, dup := pos[c]; dup {
			t.Fatalf("voucher %s listed twice", c)
		}
		pos[c] = i
	}
	for i := 1; i < len(codes); i++ {
		if pos[codes[i]] >= pos[codes[i-1]] {
			t.Errorf("vouchers not newest first: %s at %d, %s at %d", codes[i], pos[codes[i]], codes[i-1], pos[codes[i-1]])
		}
	}
	if r := gql(t, s, storefrontToken, `{ vouchers(first: 1, after: "garbage") { edges { cursor } } }`, nil); !strings.Contains(r.Raw, "INVALID_INPUT") {
		t.Errorf("a bad cursor: %s", r.Raw)
	}

	if r := gql(t, s, storefrontToken, `query($c: String!) { voucher(code: $c) { code } }`, map[string]any{"c": uniqueCode("none")}); r.Body["data"] == nil || path(r.Body, "data", "voucher") != nil {
		t.Errorf("unknown voucher: %s, want null", r.Raw)
	}
	order := uniqueOrder()
	restAPI{s}.reserve(t, codes[0], 9, order, 100)
	r := gql(t, s, storefrontToken, `query($o: String!) { reservation(orderId: $o) { orderId voucherCode customerId orderAmount status } }`, map[string]any{"o": order})
	if str(path(r.Body, "data", "reservation", "voucherCode")) != codes[0] || str(path(r.Body, "data", "reservation", "customerId")) != "9" {
		t.Errorf("reservation: %s", r.Raw)
	}
	if r := gql(t, s, storefrontToken, `query($o: String!) { reservation(orderId: $o) { orderId } }`, map[string]any{"o": uniqueOrder()}); path(r.Body, "data", "reservation") != nil {
		t.Errorf("unknown reservation: %s, want null", r.Raw)
	}
}

func TestLimits_OversizedBodyIs413(t *testing.T) {
	s := sharedServer(t)
	code := createVoucher(t, s, voucherSpec{})
	big := bytes.Repeat([]byte(" "), 11<<20)
	body := append([]byte(`{"customerId": 1, "orderId": "o-big", "orderAmount": 100`), big...)
	body = append(body, '}')
	for _, url := range []string{s.URL + "/vouchers/" + code + "/reservations", s.URL + "/graphql"} {
		if r := do(t, http.MethodPost, url, storefrontToken, body); r.Status != http.StatusRequestEntityTooLarge {
			t.Errorf("11 MiB body to %s: HTTP %d, want 413", url, r.Status)
		}
	}
	if st := readVoucher(t, s, code); st.Used != 0 {
		t.Errorf("usedCount = %d", st.Used)
	}
}

func TestLimits_BatchesAndDeepQueriesAreRefusedBeforeWork(t *testing.T) {
	s := sharedServer(t)
	code := createVoucher(t, s, voucherSpec{TotalLimit: 1000, PerUserLimit: 1000})
	var b strings.Builder
	b.WriteString("mutation {")
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&b, ` m%d: reserveVoucher(input: {code: %q, customerId: "1", orderId: "batch-%s-%d", orderAmount: 100}) { error { code } }`, i, code, code, i)
	}
	b.WriteString("}")
	r := gql(t, s, storefrontToken, b.String(), nil)
	if r.Body["data"] != nil || path(r.Body, "errors") == nil {
		t.Errorf("500 aliased mutations: %.300s, want an error and data null", r.Raw)
	}
	if st := readVoucher(t, s, code); st.Used != 0 {
		t.Errorf("usedCount after a refused batch = %d, want 0", st.Used)
	}
	deep := `{ vouchers { edges { node { code } } pageInfo { hasNextPage } } ` + strings.Repeat("__schema { types { fields { type { ofType { ofType { ofType { ofType { ofType { ofType { name } } } } } } } } } ", 1) + `}`
	r = gql(t, s, storefrontToken, deep, nil)
	if r.Body["data"] != nil || path(r.Body, "errors") == nil {
		t.Errorf("a query nested a dozen levels: %.300s, want an error and data null", r.Raw)
	}
}

func TestREST_MalformedBodiesAreInvalidInput(t *testing.T) {
	s := sharedServer(t)
	code := createVoucher(t, s, voucherSpec{})
	url := s.URL + "/vouchers/" + code + "/reservations"
	for _, tc := range []struct {
		body  string
		field string
	}{
		{`{not json`, "body"},
		{`[]`, "body"},
		{`{"orderId": "o-1", "orderAmount": 100}`, "customerId"},
		{`{"customerId": 1, "orderAmount": 100}`, "orderId"},
		{`{"customerId": 1, "orderId": "o-1"}`, "orderAmount"},
		{`{"customerId": 1.5, "orderId": "o-1", "orderAmount": 100}`, "customerId"},
		{`{"customerId": 1, "orderId": "o-1", "orderAmount": 100.5}`, "orderAmount"},
		{`{"customerId": 1, "orderId": "o-1", "orderAmount": "100"}`, "orderAmount"},
		{`{"customerId": 1, "orderId": 12, "orderAmount": 100}`, "orderId"},
	} {
		r := do(t, http.MethodPost, url, storefrontToken, tc.body)
		if r.Status != http.StatusBadRequest || str(r.Body["error"]) != "INVALID_INPUT" || str(r.Body["field"]) != tc.field {
			t.Errorf("%s: HTTP %d %s, want 400 INVALID_INPUT field %s", tc.body, r.Status, r.Raw, tc.field)
		}
	}
	// customerId as a string of digits is accepted.
	r := do(t, http.MethodPost, url, storefrontToken, `{"customerId": "42", "orderId": "`+uniqueOrder()+`", "orderAmount": 100}`)
	if r.Status != http.StatusCreated || num(t, r.Body["customerId"]) != 42 {
		t.Errorf("customerId as digits: HTTP %d %s", r.Status, r.Raw)
	}
}

func TestOperations_HealthReadinessAndGraphiQL(t *testing.T) {
	s := sharedServer(t)
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := do(t, http.MethodGet, s.URL+p, "", nil); r.Status != http.StatusOK {
			t.Errorf("GET %s: HTTP %d", p, r.Status)
		}
	}
	resp, err := httpClient.Get(s.URL + "/graphql")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET /graphql outside production: HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestOperations_MetricsCountReservesByOutcomeAndPath(t *testing.T) {
	s := sharedServer(t)
	code := createVoucher(t, s, voucherSpec{TotalLimit: 1})
	restAPI{s}.reserve(t, code, 1, uniqueOrder(), 100)
	restAPI{s}.reserve(t, code, 2, uniqueOrder(), 100)
	resp, err := httpClient.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	for _, want := range []string{
		`voucher_reserve_total{outcome="ok",path="database"}`,
		`voucher_reserve_total{outcome="OUT_OF_STOCK",path="database"}`,
		`voucher_database_writes_total{op="reserve"}`,
		`voucher_http_requests_total{route="POST /vouchers/{code}/reservations",status="201"}`,
		`voucher_reserve_duration_seconds_bucket{path="database",le="0.1"}`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestOperations_MetricsNeedATokenInProduction: /metrics lists voucher
// codes, so with APP_ENV=production it answers only a METRICS_TOKENS or
// ADMIN_TOKENS bearer token (401 otherwise); outside production it is open
// unless METRICS_TOKENS is set.
func TestOperations_MetricsNeedATokenInProduction(t *testing.T) {
	t.Parallel()
	const metricsToken = "test-metrics-token-0123456789"
	get := func(s *server, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		switch {
		case resp.StatusCode == http.StatusOK && !strings.Contains(string(body), "go_goroutines"):
			t.Errorf("/metrics answered 200 without the metrics: %.200s", body)
		case resp.StatusCode != http.StatusOK:
			// A refusal carries nothing of the metrics (and no internals).
			assertNothingLeaked(t, string(body))
			if strings.Contains(string(body), "go_goroutines") {
				t.Errorf("a refused /metrics shows metrics: %.200s", body)
			}
		}
		return resp.StatusCode
	}
	for _, tc := range []struct {
		desc string
		env  map[string]string
		want map[string]int // token -> status
	}{
		{"production", map[string]string{"APP_ENV": "production", "METRICS_TOKENS": metricsToken},
			map[string]int{"": 401, "not-a-token-of-this-server": 401, storefrontToken: 401, metricsToken: 200, adminToken: 200}},
		{"production without METRICS_TOKENS", map[string]string{"APP_ENV": "production"},
			map[string]int{"": 401, storefrontToken: 401, adminToken: 200}},
		{"development with METRICS_TOKENS", map[string]string{"METRICS_TOKENS": metricsToken},
			map[string]int{"": 401, storefrontToken: 401, metricsToken: 200, adminToken: 200}},
		{"development", nil, map[string]int{"": 200}},
	} {
		s := startServer(t, tc.env)
		for token, want := range tc.want {
			if got := get(s, token); got != want {
				t.Errorf("%s: GET /metrics with token %q: HTTP %d, want %d", tc.desc, token, got, want)
			}
		}
	}
}
