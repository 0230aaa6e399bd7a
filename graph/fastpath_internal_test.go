package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"voucherd/internal/postgres"
	"voucherd/internal/testenv"
	"voucherd/internal/voucher"
	"voucherd/migrations"
)

// twin is one service behind two GraphQL handlers: fast (the handler as
// served) and general (the same handler without its fast path).
type twin struct {
	pool          *pgxpool.Pool
	fast, general http.Handler
	fp            *fastPath
	svc           *voucher.Service
	// dead is the same pair over a service whose database does not answer.
	deadFast, deadGeneral http.Handler
	deadFP                *fastPath
}

var (
	twinOnce sync.Once
	twinVal  *twin
	twinErr  error
)

func testTwin(t testing.TB) *twin {
	t.Helper()
	twinOnce.Do(func() { twinVal, twinErr = newTwin(context.Background()) })
	if twinErr != nil {
		t.Fatalf("needs PostgreSQL at TEST_DATABASE_URL: %v", twinErr)
	}
	return twinVal
}

func newTwin(ctx context.Context) (*twin, error) {
	url := testenv.DatabaseURL()
	pool, err := pgxpool.New(ctx, url+"&pool_max_conns=4")
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDBFromPool(pool)
	_, err = migrations.Up(ctx, db)
	_ = db.Close()
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := voucher.NewService(voucher.Deps{Store: postgres.New(pool)}, voucher.Config{Logger: logger})
	// Nothing listens on port 1: every call of this service fails.
	deadPool, err := pgxpool.New(ctx, "postgres://voucher@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	if err != nil {
		return nil, err
	}
	dead := voucher.NewService(voucher.Deps{Store: postgres.New(deadPool)}, voucher.Config{Logger: logger})
	tw := &twin{svc: svc, pool: pool}
	tw.fast, tw.fp = handlerWithFastPath(svc, logger)
	tw.general = NewHandler(svc, Options{Logger: logger, generalOnly: true})
	tw.deadFast, tw.deadFP = handlerWithFastPath(dead, logger)
	tw.deadGeneral = NewHandler(dead, Options{Logger: logger, generalOnly: true})
	return tw, nil
}

// handlerWithFastPath is NewHandler with its fast path at hand.
func handlerWithFastPath(svc *voucher.Service, logger *slog.Logger) (http.Handler, *fastPath) {
	return newHandler(svc, Options{Logger: logger})
}

// roleHeader names the caller's role in these tests (the server's token
// middleware does it in production).
const roleHeader = "X-Test-Role"

type reply struct {
	status int
	ctype  string
	body   []byte
}

func send(h http.Handler, role voucher.Role, body []byte) reply {
	r := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if role != "" {
		r = r.WithContext(voucher.WithCaller(r.Context(), voucher.Caller{Role: role, Name: "token"}))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return reply{w.Code, w.Header().Get("Content-Type"), w.Body.Bytes()}
}

// differ sends body to the fast handler (which may change the state: a
// first reserve), then to the general one, then to the fast one again, and
// fails unless the last two answers are the same bytes. It reports whether
// the fast path answered the last request, and the answer.
func (tw *twin) differ(t testing.TB, role voucher.Role, body []byte) (bool, reply) {
	t.Helper()
	return differOn(t, tw.fast, tw.general, tw.fp, role, body)
}

func differOn(t testing.TB, fast, general http.Handler, fp *fastPath, role voucher.Role, body []byte) (bool, reply) {
	t.Helper()
	send(fast, role, body)
	g := send(general, role, body)
	before := fp.served.Load()
	f := send(fast, role, body)
	served := fp.served.Load() > before
	if g.status != f.status || g.ctype != f.ctype || !bytes.Equal(g.body, f.body) {
		t.Fatalf("the fast path (served %v) and the executor differ on %s\n fast:    %d %s %s\n general: %d %s %s", served, body, f.status, f.ctype, f.body, g.status, g.ctype, g.body)
	}
	return served, f
}

const (
	reserveDoc = `mutation Reserve($input: ReserveVoucherInput!) { reserveVoucher(input: $input) { reservation { orderId status discountAmount expiresAt } error { code } } }`
	confirmDoc = `mutation Confirm($input: ReservationInput!) { confirmReservation(input: $input) { reservation { orderId voucherCode customerId orderAmount discountAmount status createdAt expiresAt } error { code message field } } }`
	releaseDoc = `mutation ($in: ReservationInput!) { releaseReservation(input: $in) { __typename error { __typename code message field } reservation { __typename status orderId } } }`
	// fullReserveDoc selects every field, with aliases and __typename.
	fullReserveDoc = `mutation R($input: ReserveVoucherInput!) { r: reserveVoucher(input: $input) { t: __typename reservation { __typename id: orderId voucherCode customerId orderAmount discountAmount status createdAt expiresAt } e: error { code message field __typename } } }`
)

func body(query, opName string, vars map[string]any) []byte {
	m := map[string]any{"query": query, "variables": vars}
	if opName != "" {
		m["operationName"] = opName
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func reserveVars(code, customer, order string, amount int64) map[string]any {
	return map[string]any{"input": map[string]any{"code": code, "customerId": customer, "orderId": order, "orderAmount": amount}}
}

func orderVars(name, code, order string) map[string]any {
	return map[string]any{name: map[string]any{"code": code, "orderId": order}}
}

// run is a prefix that makes this run's codes and orderIds its own.
func run() string { return fmt.Sprintf("d%x", rand.Uint32()) }

func createVoucher(t testing.TB, svc *voucher.Service, code string, total int, starts, ends time.Time) {
	t.Helper()
	_, err := svc.CreateVoucher(context.Background(), voucher.NewVoucher{
		Code: code, DiscountAmount: 500, MinOrderAmount: 1000, TotalLimit: total, PerUserLimit: 1, StartsAt: starts, EndsAt: ends,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFastPath_AnswersEveryOutcomeAsTheExecutor: for every outcome of
// reserve, confirm and release (success, its retry, each error code,
// INVALID_INPUT with its field, FORBIDDEN, a database that does not answer)
// and each recognised document shape, the fast path answers, with the bytes
// the general executor writes.
func TestFastPath_AnswersEveryOutcomeAsTheExecutor(t *testing.T) {
	tw := testTwin(t)
	p := run()
	now := time.Now()
	open, past := p+"-open", p+"-past"
	sold := p + "-sold"
	createVoucher(t, tw.svc, open, 100, now.Add(-time.Hour), now.Add(time.Hour))
	createVoucher(t, tw.svc, past, 100, now.Add(-2*time.Hour), now.Add(-time.Hour))
	createVoucher(t, tw.svc, sold, 1, now.Add(-time.Hour), now.Add(time.Hour))
	sf := voucher.RoleStorefront

	steps := []struct {
		desc string
		role voucher.Role
		body []byte
		want string // a substring of the answer, so each step proves its outcome
	}{
		{"reserve: success", sf, body(reserveDoc, "Reserve", reserveVars(open, "1", p+"-o1", 2000)), `"status":"RESERVED"`},
		{"reserve: every field, aliases, __typename", sf, body(fullReserveDoc, "", reserveVars(open, "1", p+"-o1", 2000)), `"t":"ReservationPayload","reservation":{"__typename":"Reservation","id":"` + p + `-o1"`},
		{"reserve: ALREADY_USED", sf, body(reserveDoc, "", reserveVars(open, "1", p+"-o2", 2000)), `"ALREADY_USED"`},
		{"reserve: ORDER_CONFLICT", sf, body(fullReserveDoc, "R", reserveVars(open, "2", p+"-o1", 2000)), `"ORDER_CONFLICT"`},
		{"reserve: NOT_FOUND", sf, body(reserveDoc, "", reserveVars(p+"-none", "3", p+"-o3", 2000)), `"NOT_FOUND"`},
		{"reserve: NOT_ELIGIBLE (window)", sf, body(fullReserveDoc, "", reserveVars(past, "3", p+"-o4", 2000)), `"NOT_ELIGIBLE"`},
		{"reserve: NOT_ELIGIBLE (amount)", sf, body(reserveDoc, "", reserveVars(open, "3", p+"-o5", 999)), `"NOT_ELIGIBLE"`},
		{"reserve: sells the last use", sf, body(reserveDoc, "", reserveVars(sold, "4", p+"-o6", 2000)), `"RESERVED"`},
		{"reserve: OUT_OF_STOCK", sf, body(reserveDoc, "", reserveVars(sold, "5", p+"-o7", 2000)), `"OUT_OF_STOCK"`},
		{"reserve: INVALID_INPUT customerId", sf, body(fullReserveDoc, "", reserveVars(open, "12x", p+"-o8", 2000)), `"field":"customerId"`},
		{"reserve: INVALID_INPUT orderId", sf, body(fullReserveDoc, "", reserveVars(open, "6", "", 2000)), `"field":"orderId"`},
		{"reserve: INVALID_INPUT orderAmount", sf, body(fullReserveDoc, "", reserveVars(open, "6", p+"-o9", -1)), `"field":"orderAmount"`},
		{"reserve: INVALID_INPUT code", sf, body(fullReserveDoc, "", reserveVars("no spaces", "6", p+"-o9", 1)), `"field":"code"`},
		{"reserve: escapes and non-ASCII in strings", sf, []byte(`{"query":` + jsonString(reserveDoc) + `,"variables":{"input":{"code":"` + open + `","customerId":"7","orderId":"` + p + `-\u00e9\"<&>\u2028é","orderAmount":2000}}}`), `\u003c\u0026\u003e`},
		{"reserve: FORBIDDEN", voucher.RoleMarketer, body(reserveDoc, "", reserveVars(open, "8", p+"-o10", 2000)), `"FORBIDDEN"`},
		{"reserve: no caller (the service itself)", "", body(reserveDoc, "", reserveVars(open, "9", p+"-o11", 2000)), `"RESERVED"`},
		{"confirm: success", sf, body(confirmDoc, "Confirm", orderVars("input", open, p+"-o1")), `"status":"CONFIRMED"`},
		{"confirm: NOT_FOUND", sf, body(confirmDoc, "", orderVars("input", open, p+"-nope")), `"NOT_FOUND"`},
		{"confirm: INVALID_INPUT", sf, body(confirmDoc, "", orderVars("input", "", p+"-o1")), `"field":"code"`},
		{"confirm: FORBIDDEN", voucher.RoleOperator, body(confirmDoc, "", orderVars("input", open, p+"-o1")), `"FORBIDDEN"`},
		{"release: ALREADY_CONFIRMED", sf, body(releaseDoc, "", orderVars("in", open, p+"-o1")), `"ALREADY_CONFIRMED"`},
		{"release: success", sf, body(releaseDoc, "", orderVars("in", open, p+"-o11")), `"status":"RELEASED"`},
		{"confirm: RESERVATION_RELEASED", sf, body(confirmDoc, "", orderVars("input", open, p+"-o11")), `"RESERVATION_RELEASED"`},
		{"reserve: RESERVATION_RELEASED", sf, body(reserveDoc, "", reserveVars(open, "9", p+"-o11", 2000)), `"RESERVATION_RELEASED"`},
		{"release: NOT_FOUND", sf, body(releaseDoc, "", orderVars("in", open, p+"-nope")), `"NOT_FOUND"`},
		{"white space and key order", sf, []byte(" {\n\t\"variables\" : { \"input\" : { \"orderAmount\" : 2000 , \"orderId\" : \"" + p + "-o1\", \"customerId\":\"1\", \"code\":\"" + open + "\" } } ,\r\n \"operationName\":\"\", \"query\" : " + jsonString(reserveDoc) + " } \n"), `"reserveVoucher"`},
	}
	for _, s := range steps {
		served, got := tw.differ(t, s.role, s.body)
		if !served {
			t.Errorf("%s: the fast path did not answer %s", s.desc, s.body)
		}
		if !strings.Contains(string(got.body), s.want) {
			t.Errorf("%s: the answer %s lacks %s", s.desc, got.body, s.want)
		}
	}

	// FORBIDDEN is the resolver's error: through the error presenter, on
	// the field's path and location, and data null.
	_, got := tw.differ(t, voucher.RoleMarketer, body(fullReserveDoc, "", reserveVars(open, "1", p+"-o1", 2000)))
	if want := `"path":["r"],"locations":[{"line":1,"column":44}],"extensions":{"code":"FORBIDDEN"}}],"data":null}`; !strings.Contains(string(got.body), want) {
		t.Errorf("FORBIDDEN: answer %s, want %s", got.body, want)
	}

	// A database that does not answer: UNAVAILABLE in the payload.
	served, got := differOn(t, tw.deadFast, tw.deadGeneral, tw.deadFP, sf, body(fullReserveDoc, "", reserveVars(open, "1", p+"-o1", 2000)))
	if !served || !strings.Contains(string(got.body), `"code":"UNAVAILABLE"`) {
		t.Errorf("dead database: served %v, answer %s", served, got.body)
	}

	// A panic in the resolver (here: a service that is nil) is recovered
	// and presented as the executor does.
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	nilFast, nilFP := newHandler(nil, Options{Logger: logger})
	nilGeneral := NewHandler(nil, Options{Logger: logger, generalOnly: true})
	served, got = differOn(t, nilFast, nilGeneral, nilFP, sf, body(reserveDoc, "", reserveVars(open, "1", p+"-o1", 2000)))
	if !served || !strings.Contains(string(got.body), `"message":"internal error","path":["reserveVoucher"],"extensions":{"code":"INTERNAL"}`) {
		t.Errorf("panic: served %v, answer %s", served, got.body)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestFastPath_LeavesWhatItDoesNotRecogniseToTheExecutor: every other
// shape of request is answered by the general executor, unchanged.
func TestFastPath_LeavesWhatItDoesNotRecogniseToTheExecutor(t *testing.T) {
	tw := testTwin(t)
	p := run()
	now := time.Now()
	code := p + "-open"
	createVoucher(t, tw.svc, code, 100, now.Add(-time.Hour), now.Add(time.Hour))
	vars := reserveVars(code, "1", p+"-o1", 2000)
	input := vars["input"].(map[string]any)
	with := func(k string, v any) map[string]any {
		in := map[string]any{}
		for kk, vv := range input {
			in[kk] = vv
		}
		if v == nil {
			delete(in, k)
		} else {
			in[k] = v
		}
		return map[string]any{"input": in}
	}
	raw := func(s string) []byte { return []byte(s) }
	q := jsonString(reserveDoc)
	inputJSON, _ := json.Marshal(input)
	for _, c := range []struct {
		desc string
		body []byte
	}{
		{"inline literals", body(`mutation { reserveVoucher(input: {code: "`+code+`", customerId: "1", orderId: "`+p+`-o1", orderAmount: 2000}) { reservation { orderId } error { code } } }`, "", nil)},
		{"a fragment", body(`mutation R($input: ReserveVoucherInput!) { reserveVoucher(input: $input) { ...P } } fragment P on ReservationPayload { reservation { orderId } error { code } }`, "", vars)},
		{"an inline fragment", body(`mutation R($input: ReserveVoucherInput!) { reserveVoucher(input: $input) { ... on ReservationPayload { error { code } } } }`, "", vars)},
		{"a directive", body(`mutation R($input: ReserveVoucherInput!) { reserveVoucher(input: $input) { error @include(if: true) { code } } }`, "", vars)},
		{"a field twice", body(`mutation R($input: ReserveVoucherInput!) { reserveVoucher(input: $input) { error { code code } } }`, "", vars)},
		{"two root fields", body(`mutation R($input: ReserveVoucherInput!) { a: reserveVoucher(input: $input) { error { code } } b: reserveVoucher(input: $input) { error { code } } }`, "", vars)},
		{"two operations", body(reserveDoc+` query Q { __typename }`, "Reserve", vars)},
		{"another operationName", body(reserveDoc, "Other", vars)},
		{"an invalid document", body(`mutation R($input: ReserveVoucherInput!) { reserveVoucher(input: $input) { nope } }`, "", vars)},
		{"not a mutation", body(`query { voucher(code: "`+code+`") { code } }`, "", nil)},
		{"another mutation", body(`mutation C($input: CreateVoucherInput!) { createVoucher(input: $input) { error { code } } }`, "", map[string]any{"input": map[string]any{"code": "x"}})},
		{"orderAmount a string", body(reserveDoc, "", with("orderAmount", "2000"))},
		{"orderAmount a float", raw(`{"query":` + q + `,"variables":{"input":{"code":"` + code + `","customerId":"1","orderId":"x","orderAmount":2000.0}}}`)},
		{"orderAmount an exponent", raw(`{"query":` + q + `,"variables":{"input":{"code":"` + code + `","customerId":"1","orderId":"x","orderAmount":2e3}}}`)},
		{"orderAmount too big", raw(`{"query":` + q + `,"variables":{"input":{"code":"` + code + `","customerId":"1","orderId":"x","orderAmount":9223372036854775808}}}`)},
		{"orderAmount with a leading zero", raw(`{"query":` + q + `,"variables":{"input":{"code":"` + code + `","customerId":"1","orderId":"x","orderAmount":02000}}}`)},
		{"customerId a number", body(reserveDoc, "", with("customerId", 1))},
		{"a field missing", body(reserveDoc, "", with("orderId", nil))},
		{"an extra field", body(reserveDoc, "", with("extra", "x"))},
		{"a field null", raw(`{"query":` + q + `,"variables":{"input":{"code":null,"customerId":"1","orderId":"x","orderAmount":1}}}`)},
		{"a field twice in JSON", raw(`{"query":` + q + `,"variables":{"input":{"code":"a","code":"` + code + `","customerId":"1","orderId":"x","orderAmount":1}}}`)},
		{"a key escaped", raw(`{"query":` + q + `,"variables":{"input":{"\u0063ode":"` + code + `","customerId":"1","orderId":"x","orderAmount":1}}}`)},
		{"another variable", raw(`{"query":` + q + `,"variables":{"in":` + string(inputJSON) + `}}`)},
		{"two variables", raw(`{"query":` + q + `,"variables":{"input":` + string(inputJSON) + `,"more":1}}`)},
		{"variables null", raw(`{"query":` + q + `,"variables":null}`)},
		{"no variables", raw(`{"query":` + q + `}`)},
		{"Query capitalised", raw(`{"Query":` + q + `,"variables":{"input":` + string(inputJSON) + `}}`)},
		{"query twice", raw(`{"query":"{ __typename }","query":` + q + `,"variables":{"input":` + string(inputJSON) + `}}`)},
		{"extensions", raw(`{"query":` + q + `,"variables":{"input":` + string(inputJSON) + `},"extensions":{}}`)},
		{"a persisted query", raw(`{"variables":{"input":` + string(inputJSON) + `},"extensions":{"persistedQuery":{"version":1,"sha256Hash":"00"}}}`)},
		{"trailing bytes", raw(`{"query":` + q + `,"variables":{"input":` + string(inputJSON) + `}} x`)},
		{"a control character", raw(`{"query":` + q + `,"variables":{"input":{"code":"` + code + `","customerId":"1","orderId":"a` + "\x01" + `","orderAmount":1}}}`)},
		{"invalid UTF-8 in orderId", raw(`{"query":` + q + `,"variables":{"input":{"code":"` + code + `","customerId":"1","orderId":"a` + "\xff" + `","orderAmount":1}}}`)},
		{"a batch", raw(`[{"query":` + q + `}]`)},
	} {
		served, _ := tw.differ(t, voucher.RoleStorefront, c.body)
		// Invalid UTF-8 is decoded by encoding/json in both paths: the fast
		// path may serve it (the server refuses such bodies earlier).
		if served && c.desc != "invalid UTF-8 in orderId" {
			t.Errorf("%s: the fast path answered %s", c.desc, c.body)
		}
	}
}

// TestFastPath_ServesTheBenchmarksRequestWithFewAllocations: the point of
// the fast path, as a resource bound (bytes, not time).
func TestFastPath_ServesTheBenchmarksRequestWithFewAllocations(t *testing.T) {
	tw := testTwin(t)
	b := body(reserveDoc, "Reserve", reserveVars("none-such", "1", "o-1", 2000))
	fast := testing.AllocsPerRun(50, func() { send(tw.fast, voucher.RoleStorefront, b) })
	general := testing.AllocsPerRun(50, func() { send(tw.general, voucher.RoleStorefront, b) })
	t.Logf("allocations per request: fast %.0f, general %.0f", fast, general)
	if fast*2 > general {
		t.Errorf("fast path allocates %.0f times a request, the executor %.0f: want less than half", fast, general)
	}
}

// BenchmarkStorefrontReserve is the cost of the transport alone for the
// benchmark's reserve, with the fast path and with the general executor:
// the input is refused by the service before any store call (customerId
// is not a number), so the answer is a payload with an error, rendered by
// each path.
//
//	go test -run '^$' -bench StorefrontReserve -benchmem ./graph/
func BenchmarkStorefrontReserve(b *testing.B) {
	tw := testTwin(b)
	req := body(reserveDoc, "Reserve", reserveVars("flash-1", "x", "o-1", 25000))
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"fast path", tw.fast}, {"general executor", tw.general}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r := send(c.h, voucher.RoleStorefront, req); r.status != http.StatusOK {
					b.Fatal(r.status)
				}
			}
		})
	}
}

// TestFastPath_ServesNoOperationALimitRefused: a reserve whose selection is
// over the complexity limit is refused every time it is sent, and takes no
// use: the fast path serves only texts that passed every limit, although
// gqlgen's query cache holds the text once it is validated. (The handler's
// limit is lowered here: at MaxComplexity no operation the fast path could
// serve is over it, as the document limits keep its selection under 500
// fields.)
func TestFastPath_ServesNoOperationALimitRefused(t *testing.T) {
	tw := testTwin(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, fp := newHandler(tw.svc, Options{Logger: logger, maxComplexity: 200})
	p := run()
	code := p + "-aliases"
	createVoucher(t, tw.svc, code, 10, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	var sel strings.Builder
	for i := range 210 {
		fmt.Fprintf(&sel, " o%d: orderId", i)
	}
	doc := `mutation Reserve($input: ReserveVoucherInput!) { reserveVoucher(input: $input) { reservation {` + sel.String() + ` } error { code } } }`
	for i := range 3 {
		a := send(h, voucher.RoleStorefront, body(doc, "Reserve", reserveVars(code, "1", p+"-o1", 2000)))
		if a.status != http.StatusOK || !strings.Contains(string(a.body), `"COMPLEXITY_LIMIT_EXCEEDED"`) || !strings.Contains(string(a.body), `"data":null`) {
			t.Fatalf("send %d: %d %s, want COMPLEXITY_LIMIT_EXCEEDED and data null", i+1, a.status, a.body)
		}
	}
	if n := fp.served.Load(); n != 0 {
		t.Errorf("the fast path served %d of the refused requests", n)
	}
	v, err := tw.svc.Voucher(context.Background(), code)
	if err != nil || v.UsedCount != 0 {
		t.Fatalf("voucher after the refusals: used %d (%v), want 0", v.UsedCount, err)
	}
	// The same reserve within the limit is served by the fast path from its
	// second request on.
	for range 2 {
		a := send(h, voucher.RoleStorefront, body(reserveDoc, "Reserve", reserveVars(code, "1", p+"-o1", 2000)))
		if !strings.Contains(string(a.body), `"status":"RESERVED"`) {
			t.Fatalf("a reserve within the limit: %s", a.body)
		}
	}
	if n := fp.served.Load(); n != 1 {
		t.Errorf("the fast path served %d requests within the limit, want 1 (the second)", n)
	}
}

// TestFastPath_RunsNothingForAClientThatIsGone: a reserve whose request's
// context is cancelled (the client closed its connection) takes no use on
// the fast path, and is answered as the executor answers it.
func TestFastPath_RunsNothingForAClientThatIsGone(t *testing.T) {
	tw := testTwin(t)
	p := run()
	code := p + "-gone"
	createVoucher(t, tw.svc, code, 10, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	// The text is planned once a first reserve has run.
	if a := send(tw.fast, voucher.RoleStorefront, body(reserveDoc, "Reserve", reserveVars(code, "1", p+"-o1", 2000))); !strings.Contains(string(a.body), `"RESERVED"`) {
		t.Fatalf("first reserve: %s", a.body)
	}
	answers := map[string][]byte{}
	for name, h := range map[string]http.Handler{"fast": tw.fast, "general": tw.general} {
		order := p + "-" + name
		r := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body(reserveDoc, "Reserve", reserveVars(code, "2", order, 2000))))
		r.Header.Set("Content-Type", "application/json")
		ctx, cancel := context.WithCancel(voucher.WithCaller(r.Context(), voucher.Caller{Role: voucher.RoleStorefront, Name: "token"}))
		cancel()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r.WithContext(ctx))
		answers[name] = w.Body.Bytes()
		if _, err := tw.svc.Reservation(context.Background(), order); voucher.ErrorCodeOf(err) != voucher.NotFound {
			t.Errorf("%s: the reservation of a request whose client is gone: %v, want NOT_FOUND", name, err)
		}
	}
	if !bytes.Equal(answers["fast"], answers["general"]) {
		t.Errorf("fast answered %q, the executor %q", answers["fast"], answers["general"])
	}
	v, err := tw.svc.Voucher(context.Background(), code)
	if err != nil || v.UsedCount != 1 {
		t.Fatalf("used %d (%v), want 1", v.UsedCount, err)
	}
}
