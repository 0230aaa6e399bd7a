package graph_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"voucherd/graph"
	"voucherd/server"
)

// hostile is a request body built to make the server work: the shapes the
// issue found, and the others a document or a JSON body can take.
type hostile struct {
	name string
	body []byte
	// code is the extensions.code of the first error of the answer.
	code string
}

// fullBody leaves room under the server's 1 MiB body limit, so that every
// hostile body reaches the GraphQL handler.
const fullBody = server.MaxBodyBytes - 64

// filler builds bodies that fill budget bytes.
type filler struct{ budget int }

// repeated is prefix, then unit n times, then suffix; n = 0 fills the
// request body (unit JSON-escaped) up to the budget.
func (f filler) repeated(prefix, unit, suffix string, n int) string {
	if n == 0 {
		n = (f.budget - len(`{"query":""}`) - jsonLen(prefix) - jsonLen(suffix)) / jsonLen(unit)
	}
	return prefix + strings.Repeat(unit, n) + suffix
}

func jsonLen(s string) int {
	b, _ := json.Marshal(s)
	return len(b) - 2
}

// numbered is prefix, then format (one %d) for i in [0, n), then suffix;
// n = 0 fills the body up to the budget.
func (f filler) numbered(prefix, format, suffix string, n int) string {
	var b strings.Builder
	b.WriteString(prefix)
	size := len(`{"query":""}`) + jsonLen(prefix) + jsonLen(suffix)
	for i := 0; n == 0 || i < n; i++ {
		unit := fmt.Sprintf(format, i)
		if size += jsonLen(unit); n == 0 && size > f.budget {
			break
		}
		b.WriteString(unit)
	}
	b.WriteString(suffix)
	return b.String()
}

// doublingFragments is a query of fragments F0..Fn, each spreading the
// next twice; n = 0 fills the body.
func (f filler) doublingFragments(n int) string {
	var b strings.Builder
	b.WriteString("query { ...F0 } ")
	for i := 0; n == 0 || i < n; i++ {
		unit := fmt.Sprintf("fragment F%d on Query { ...F%d ...F%d } ", i, i+1, i+1)
		if n == 0 && b.Len()+len(unit) > f.budget-100 {
			n = i
			break
		}
		b.WriteString(unit)
	}
	fmt.Fprintf(&b, "fragment F%d on Query { __typename }", n)
	return b.String()
}

// raw is a body of prefix, unit repeated, suffix, not a query in JSON.
func (f filler) raw(prefix, unit, suffix string) []byte {
	n := (f.budget - len(prefix) - len(suffix)) / len(unit)
	return []byte(prefix + strings.Repeat(unit, n) + suffix)
}

const (
	codeSize       = "SIZE_LIMIT_EXCEEDED"
	codeBad        = "BAD_REQUEST"
	codeValidation = "GRAPHQL_VALIDATION_FAILED"
	codeParse      = "GRAPHQL_PARSE_FAILED"
	codeComplexity = "COMPLEXITY_LIMIT_EXCEEDED"
	codeInvalid    = "INVALID_INPUT"
)

// hostileRequests are the shapes; those named "-fill" fill budget bytes
// (fullBody: up to the body limit), the others have a fixed size.
func hostileRequests(budget int) []hostile {
	f := filler{budget}
	q := func(name, text, code string) hostile { return hostile{name, query(text, nil), code} }
	aliasArgs := `a: voucher(code: "X%d") { code } `
	reserve := `mutation ($in: ReserveVoucherInput!) { reserveVoucher(input: $in) { error { code } } }`
	byCode := `query ($c: String!) { voucher(code: $c) { code } }`
	return []hostile{
		// The issue's: one alias, different arguments (every pair conflicts).
		q("alias-args-500", f.numbered("{ ", aliasArgs, "}", 500), codeSize),
		q("alias-args-5000", f.numbered("{ ", aliasArgs, "}", 5000), codeSize),
		q("alias-args-fill", f.numbered("{ ", aliasArgs, "}", 0), codeSize),
		// Within the limits: 200 fields, 19,900 conflicting pairs.
		q("alias-args-200", f.numbered("{ ", aliasArgs, "}", 200), codeValidation),
		q("typename-20000", f.repeated("{ ", "a: __typename ", "}", 20000), codeSize),
		q("typename-fill", f.repeated("{ ", "__typename ", "}", 0), codeSize),
		// Within the document limits, over the complexity: 200 reads of the
		// database.
		q("voucher-reads-200", f.numbered("{ ", `v%[1]d: voucher(code: "X%[1]d") { code } `, "}", 200), codeComplexity),
		// Each fragment spreads the next twice: 2^40 fields once expanded.
		q("fragment-doubling-40", f.doublingFragments(40), codeSize),
		q("fragment-doubling-fill", f.doublingFragments(0), codeSize),
		q("fragments-fill", f.numbered("query { __typename } ", "fragment F%d on Query { __typename } ", "", 0), codeSize),
		q("fragment-spreads-fill", f.repeated("query { ", "...F ", "} fragment F on Query { __typename }", 0), codeSize),
		q("fragment-spreads-90", f.repeated("query { ", "...F ", "} fragment F on Query { vouchers { edges { node { code } } } }", 90), codeComplexity),
		q("fragment-cycle", `{ ...A } fragment A on Query { ...B ...B } fragment B on Query { ...A ...A }`, codeValidation),
		q("inline-fragments-fill", f.repeated("{ ", "... on Query { __typename } ", "}", 0), codeSize),
		q("nested-inline-fragments-fill", f.repeated("{ ", "... on Query { ", "}", 0), codeSize),
		q("nested-list-argument-1000", `{ voucher(code: `+strings.Repeat("[", 1000)+strings.Repeat("]", 1000)+`) { code } }`, codeParse),
		q("nested-list-argument-2000", `{ voucher(code: `+strings.Repeat("[", 2000)+strings.Repeat("]", 2000)+`) { code } }`, codeParse),
		q("nested-list-argument-fill", f.repeated(`{ voucher(code: `, "[", "", 0), codeSize),
		q("nested-selections-fill", f.repeated("{ ", "a { ", "", 0), codeSize),
		q("directives-700", f.repeated("{ __typename ", "@include(if: true) ", "}", 700), codeValidation),
		q("directives-fill", f.repeated("{ __typename ", "@include(if: true) ", "}", 0), codeSize),
		q("operations-fill", f.numbered("", "query q%d { __typename } ", "", 0), codeSize),
		q("anonymous-operations-fill", f.repeated("", "{ __typename } ", "", 0), codeSize),
		q("arguments-600", f.repeated(`{ voucher(`, `code: "x" `, `) { code } }`, 600), codeValidation),
		q("arguments-fill", f.repeated(`{ voucher(`, `code: "x" `, `) { code } }`, 0), codeSize),
		q("object-fields-fill", f.repeated(`mutation { reserveVoucher(input: {`, `code: "x" `, `}) { error { code } } }`, 0), codeSize),
		q("variable-definitions-fill", f.numbered(`query (`, `$v%d: Int `, `) { __typename }`, 0), codeSize),
		q("long-string-fill", f.repeated(`{ voucher(code: "`, "a", `") { code } }`, 0), codeInvalid),
		q("long-string-as-int-fill", f.repeated(`{ vouchers(first: "`, "a", `") { edges { cursor } } }`, 0), codeInvalid),
		q("long-block-string-fill", f.repeated(`{ voucher(code: """`, "a", `""") { code } }`, 0), codeInvalid),
		q("escapes-fill", f.repeated(`{ voucher(code: "`, `\u00e9`, `") { code } }`, 0), codeInvalid),
		q("surrogate-escapes-fill", f.repeated(`{ voucher(code: "`, `\ud800`, `") { code } }`, 0), codeInvalid),
		q("long-name-fill", f.repeated("{ ", "a", " }", 0), codeSize),
		q("long-name-near-limit", "{ vouchr"+strings.Repeat("s", graph.MaxNameLength-len("vouchr"))+" }", codeValidation),
		q("comments-fill", f.repeated("{ __typename }", "#\n", "", 0), codeSize),
		q("whitespace-fill", f.repeated("{ ", " ", "__typename }", 0), ""),
		q("unterminated-string-fill", f.repeated(`{ voucher(code: "`, "a", "", 0), codeParse),
		{"variables-nested-fill", f.raw(`{"query": "`+byCode+`", "variables": {"c": `, "[", "}}"), codeBad},
		{"variables-nested-5000", []byte(`{"query": "` + byCode + `", "variables": {"c": ` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}`), codeInvalid},
		{"variables-list-fill", f.raw(`{"query": "`+byCode+`", "variables": {"c": [`, "1,", "1]}}"), codeBad},
		{"variables-keys-fill", []byte(f.numbered(`{"query": "{ __typename }", "variables": {`, `"k%d": 0, `, `"k": 0}}`, 0)), codeBad},
		{"variables-long-key-fill", f.raw(`{"query": "`+reserve+`", "variables": {"in": {"code": "x", "customerId": "1", "orderId": "o", "orderAmount": 1, "`, "k", `": 1}}}`), codeInvalid},
		{"variables-long-string-fill", f.raw(`{"query": "`+byCode+`", "variables": {"c": "`, "a", `"}}`), codeInvalid},
		{"batch-fill", f.raw(`[`, `{"query": "{ __typename }"}, `, `{"query": "{ __typename }"}]`), codeBad},
		{"batch-of-alias-args", []byte(`[` + strings.Repeat(string(query(f.numbered("{ ", aliasArgs, "}", 500), nil))+",", 10) + `{}]`), codeBad},
		{"not-json-fill", f.raw(`{"query": "`, "a", ``), codeBad},
		{"wrong-type-fill", f.raw(`{"query": ["`, "a", `"]}`), codeBad},
		{"concatenated-objects", []byte(strings.Repeat(`{"query": "{ __typename }"}`, 100)), codeBad},
	}
}

// maxAllocated is the contract's memory bound of one request; maxAnswer
// bounds the answer to a refusal (a few errors, each quoting little).
const (
	maxAllocated = 64 << 20
	maxAnswer    = 16 << 10
)

// TestHostileRequests_AreRefusedOrAnsweredWithBoundedWork: "The cost of
// refusing a request grows with its size, not faster": every shape up to the
// 1 MiB body limit is answered with at most MaxErrors+1 errors, a small
// answer, less than 64 MiB allocated and nothing internal, in production and
// in development.
func TestHostileRequests_AreRefusedOrAnsweredWithBoundedWork(t *testing.T) {
	s := testSurface(t)
	for _, h := range hostileRequests(fullBody) {
		t.Run(h.name, func(t *testing.T) {
			if len(h.body) > server.MaxBodyBytes {
				t.Fatalf("the body is %d bytes, over the body limit", len(h.body))
			}
			for _, env := range s.envs() {
				a := post(t, env.handler, h.body)
				if a.Status == http.StatusRequestEntityTooLarge || a.Status >= 500 {
					t.Errorf("%s: %v, want an answer of the GraphQL handler", env.name, a)
					continue
				}
				if a.code() != h.code {
					t.Errorf("%s: code %q, want %q: %v", env.name, a.code(), h.code, a)
				}
				if len(a.Body.Errors) > graph.MaxErrors+1 {
					t.Errorf("%s: %d errors, want at most %d", env.name, len(a.Body.Errors), graph.MaxErrors+1)
				}
				if len(a.Raw) > maxAnswer {
					t.Errorf("%s: a %d-byte answer, want at most %d: %.300s", env.name, len(a.Raw), maxAnswer, a.Raw)
				}
				if a.Allocated > maxAllocated {
					t.Errorf("%s: %d MiB allocated, want less than %d", env.name, a.Allocated>>20, maxAllocated>>20)
				}
				if l := leaks(a.Raw, h.body); l != "" {
					t.Errorf("%s: the answer carries %q: %.300s", env.name, l, a.Raw)
				}
				t.Logf("%s: %v", env.name, a)
			}
		})
	}
}

// TestValidationErrors_AreCappedAtMaxErrors: a document within the limits
// that breaks one rule for each of its 19,900 pairs of fields is answered
// with MaxErrors errors and one that says the rest are not shown.
func TestValidationErrors_AreCappedAtMaxErrors(t *testing.T) {
	s := testSurface(t)
	a := post(t, s.dev, query(filler{}.numbered("{ ", `a: voucher(code: "X%d") { code } `, "}", 200), nil))
	if a.Status != http.StatusUnprocessableEntity || len(a.Body.Errors) != graph.MaxErrors+1 {
		t.Fatalf("%v, want HTTP 422 with %d errors", a, graph.MaxErrors+1)
	}
	if last := a.Body.Errors[graph.MaxErrors].Message; !strings.Contains(last, "the rest are not shown") {
		t.Errorf("last error %q, want one saying the rest are not shown", last)
	}
}

// TestBatchedRequests_AreRefusedWithOneClearError: a JSON array of
// operations is refused before any of them is parsed, with one error that
// says batches are not supported and quotes nothing of the body.
func TestBatchedRequests_AreRefusedWithOneClearError(t *testing.T) {
	s := testSurface(t)
	one := string(query(`mutation { reserveVoucher(input: {code: "batch-marker", customerId: "1", orderId: "o-1", orderAmount: 100}) { error { code } } }`, nil))
	for _, body := range []string{
		"[" + one + "]",
		"[" + strings.TrimSuffix(strings.Repeat(one+",", 1000), ",") + "]",
		" \n[]",
	} {
		a := post(t, s.prod, []byte(body))
		if a.Status != http.StatusBadRequest || len(a.Body.Errors) != 1 || a.code() != codeBad || !strings.Contains(a.Body.Errors[0].Message, "batched requests") {
			t.Errorf("a batch of %d bytes: %v, want HTTP 400 with one BAD_REQUEST error about batches", len(body), a)
		}
		if strings.Contains(string(a.Raw), "batch-marker") || leaks(a.Raw, nil) != "" {
			t.Errorf("the answer quotes the body or internals: %s", a.Raw)
		}
	}
}

// TestDecodeErrors_NeverEchoTheBodyOrGoTypes: a body that is not one
// GraphQL request object is HTTP 400 BAD_REQUEST with a message that
// neither quotes it nor names a Go type.
func TestDecodeErrors_NeverEchoTheBodyOrGoTypes(t *testing.T) {
	s := testSurface(t)
	for _, body := range []string{
		``,
		`not json MARKER`,
		`"MARKER"`,
		`42`,
		`null`,
		`{"query": "{ __typename }", MARKER}`,
		`{"query": 5, "operationName": "MARKER"}`,
		`{"query": ["MARKER"]}`,
		`{"query": "{ __typename }", "variables": ["MARKER"]}`,
		`{"query": "{ __typename }", "variables": "MARKER"}`,
		`{"query": "{ __typename }", "extensions": ["MARKER"]}`,
		`{"query": "{ __typename }", "operationName": {"MARKER": 1}}`,
		`{"query": "{ __typename }"} {"query": "MARKER"}`,
		`{"query": "{ __typename }"} MARKER`,
		"{\"query\": \"MARKER\xff\xfe\"",
	} {
		for _, env := range s.envs() {
			a := post(t, env.handler, []byte(body))
			// Text a decoder would replace is refused first, as the
			// contract's INVALID_INPUT (server.refuseReplacedText).
			want := codeBad
			if !utf8.ValidString(body) {
				want = "INVALID_INPUT"
			}
			if a.Status != http.StatusBadRequest || len(a.Body.Errors) != 1 || a.code() != want {
				t.Errorf("%s %q: %v, want HTTP 400 with one %s error", env.name, body, a, want)
			}
			if strings.Contains(string(a.Raw), "MARKER") {
				t.Errorf("%s %q: the answer quotes the body: %s", env.name, body, a.Raw)
			}
			if l := leaks(a.Raw, nil); l != "" {
				t.Errorf("%s %q: the answer carries %q: %s", env.name, body, l, a.Raw)
			}
		}
	}
}

// TestProduction_IntrospectionIsAClearErrorNotInternal: with
// APP_ENV=production __schema and __type (also behind fragments) are refused
// with INTROSPECTION_DISABLED, not answered as an internal error, and
// nothing is logged at ERROR; in development they answer.
func TestProduction_IntrospectionIsAClearErrorNotInternal(t *testing.T) {
	s := testSurface(t)
	s.logs.take()
	for _, q := range []string{
		`{ __schema { queryType { name } } }`,
		`{ __type(name: "Voucher") { name } }`,
		`query Q { voucher(code: "x") { code } __typename __type(name: "Query") { name } }`,
		`{ ...F } fragment F on Query { ... on Query { __schema { types { name } } } }`,
	} {
		a := post(t, s.prod, query(q, nil))
		if a.Status != http.StatusUnprocessableEntity || len(a.Body.Errors) != 1 || a.code() != "INTROSPECTION_DISABLED" || string(a.Body.Data) != "null" {
			t.Errorf("production %s: %v, want HTTP 422 INTROSPECTION_DISABLED and data null", q, a)
		}
		if logged := s.logs.take(); logged != "" {
			t.Errorf("production %s logged: %s", q, logged)
		}
		if d := post(t, s.dev, query(q, nil)); len(d.Body.Errors) != 0 {
			t.Errorf("development %s: %v, want an answer", q, d)
		}
	}
	// __typename is not introspection.
	if a := post(t, s.prod, query(`{ __typename }`, nil)); string(a.Body.Data) != `{"__typename":"Query"}` {
		t.Errorf("production __typename: %v", a)
	}
}

// TestProduction_ValidationErrorsCarryNoSuggestions: in production a
// misspelt field, argument or input field is refused without "Did you mean", which
// would spell out the schema that introspection hides; development keeps
// the suggestions.
func TestProduction_ValidationErrorsCarryNoSuggestions(t *testing.T) {
	s := testSurface(t)
	for _, q := range []string{
		`{ vouchr(code: "x") { code } }`,
		`{ voucher(cod: "x") { code } }`,
		`{ voucher(code: "x") { cod } }`,
		`mutation { reserveVoucher(input: {code: "x", customerId: "1", orderId: "o", orderAmont: 1}) { error { code } } }`,
		`{ voucher(code: "x") }`,
	} {
		a := post(t, s.prod, query(q, nil))
		if a.code() != codeValidation {
			t.Errorf("production %s: %v, want a validation error", q, a)
		}
		if strings.Contains(string(a.Raw), "Did you mean") {
			t.Errorf("production %s suggests: %s", q, a.Raw)
		}
		if d := post(t, s.dev, query(q, nil)); !strings.Contains(string(d.Raw), "Did you mean") {
			t.Errorf("development %s: %s, want a suggestion", q, d.Raw)
		}
	}
}
