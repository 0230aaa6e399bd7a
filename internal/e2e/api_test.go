package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// result is the answer to a checkout call, whichever transport carried it.
type result struct {
	Error       string // the contract's error code, "" on success
	Field       string
	Reservation map[string]any
	HTTPStatus  int
}

func (r result) status() string { return str(r.Reservation["status"]) }

// assertSameReservation fails t where retry's reservation differs from
// first's in a field an identical retry must keep.
func assertSameReservation(t testing.TB, first, retry result) {
	t.Helper()
	for _, k := range []string{"orderId", "status", "createdAt", "expiresAt", "discountAmount", "position"} {
		if str(first.Reservation[k]) != str(retry.Reservation[k]) {
			t.Errorf("retry changed %s: %v -> %v", k, first.Reservation[k], retry.Reservation[k])
		}
	}
}

// checkoutAPI is reserve/confirm/release over one transport.
type checkoutAPI interface {
	name() string
	reserve(t testing.TB, code string, customerID any, orderID string, amount any) result
	confirm(t testing.TB, code, orderID string) result
	release(t testing.TB, code, orderID string) result
}

// transports are both ways a storefront can call the service.
func transports(s *server) []checkoutAPI {
	return []checkoutAPI{graphqlAPI{s}, restAPI{s}}
}

type graphqlAPI struct{ s *server }

func (graphqlAPI) name() string { return "graphql" }

const reservationFields = `reservation { orderId voucherCode customerId orderAmount discountAmount status createdAt expiresAt position } error { code message field }`

func (g graphqlAPI) payload(t testing.TB, op string, r response) result {
	t.Helper()
	if r.Status != http.StatusOK || path(r.Body, "errors") != nil {
		t.Fatalf("%s: HTTP %d, GraphQL errors: %s", op, r.Status, r.Raw)
	}
	p := path(r.Body, "data", op)
	out := result{HTTPStatus: r.Status}
	if e, ok := path(p, "error").(map[string]any); ok {
		out.Error, out.Field = str(e["code"]), str(e["field"])
		if path(p, "reservation") != nil {
			t.Errorf("%s: a refused call carries a reservation: %s", op, r.Raw)
		}
		if str(e["message"]) == "" {
			t.Errorf("%s: an error without a message: %s", op, r.Raw)
		}
		return out
	}
	res, ok := path(p, "reservation").(map[string]any)
	if !ok {
		t.Fatalf("%s: neither reservation nor error: %s", op, r.Raw)
	}
	out.Reservation = res
	return out
}

func (g graphqlAPI) reserve(t testing.TB, code string, customerID any, orderID string, amount any) result {
	t.Helper()
	r := gql(t, g.s, storefrontToken, `mutation($in: ReserveVoucherInput!) { reserveVoucher(input: $in) { `+reservationFields+` } }`,
		map[string]any{"in": map[string]any{"code": code, "customerId": fmt.Sprint(customerID), "orderId": orderID, "orderAmount": amount}})
	return g.payload(t, "reserveVoucher", r)
}

func (g graphqlAPI) confirm(t testing.TB, code, orderID string) result {
	t.Helper()
	r := gql(t, g.s, storefrontToken, `mutation($in: ReservationInput!) { confirmReservation(input: $in) { `+reservationFields+` } }`,
		map[string]any{"in": map[string]any{"code": code, "orderId": orderID}})
	return g.payload(t, "confirmReservation", r)
}

func (g graphqlAPI) release(t testing.TB, code, orderID string) result {
	t.Helper()
	r := gql(t, g.s, storefrontToken, `mutation($in: ReservationInput!) { releaseReservation(input: $in) { `+reservationFields+` } }`,
		map[string]any{"in": map[string]any{"code": code, "orderId": orderID}})
	return g.payload(t, "releaseReservation", r)
}

type restAPI struct{ s *server }

func (restAPI) name() string { return "rest" }

// restStatus is the contract's REST status for each outcome.
var restStatus = map[string]int{
	"":                     http.StatusOK,
	"OUT_OF_STOCK":         http.StatusConflict,
	"BUDGET_EXHAUSTED":     http.StatusConflict,
	"ALREADY_USED":         http.StatusConflict,
	"ORDER_CONFLICT":       http.StatusConflict,
	"RESERVATION_RELEASED": http.StatusConflict,
	"ALREADY_CONFIRMED":    http.StatusConflict,
	"NOT_CONFIRMED":        http.StatusConflict,
	"PERIOD_LIMIT_REACHED": http.StatusConflict,
	"NOT_ELIGIBLE":         http.StatusUnprocessableEntity,
	"NOT_FOUND":            http.StatusNotFound,
	"INVALID_INPUT":        http.StatusBadRequest,
	"UNAVAILABLE":          http.StatusServiceUnavailable,
}

func (a restAPI) result(t testing.TB, r response, success int) result {
	t.Helper()
	out := result{HTTPStatus: r.Status}
	if code := str(r.Body["error"]); code != "" {
		out.Error, out.Field = code, str(r.Body["field"])
		if want := restStatus[code]; r.Status != want {
			t.Errorf("REST %s answered HTTP %d, the contract says %d: %s", code, r.Status, want, r.Raw)
		}
		return out
	}
	if r.Status != success {
		t.Fatalf("REST success answered HTTP %d, want %d: %s", r.Status, success, r.Raw)
	}
	out.Reservation = r.Body
	return out
}

func (a restAPI) reserve(t testing.TB, code string, customerID any, orderID string, amount any) result {
	t.Helper()
	r := do(t, http.MethodPost, a.s.URL+"/vouchers/"+url.PathEscape(code)+"/reservations", storefrontToken,
		map[string]any{"customerId": customerID, "orderId": orderID, "orderAmount": amount})
	return a.result(t, r, http.StatusCreated)
}

func (a restAPI) confirm(t testing.TB, code, orderID string) result {
	t.Helper()
	r := do(t, http.MethodPost, a.s.URL+"/vouchers/"+url.PathEscape(code)+"/reservations/"+url.PathEscape(orderID)+"/confirm", storefrontToken, nil)
	return a.result(t, r, http.StatusOK)
}

func (a restAPI) release(t testing.TB, code, orderID string) result {
	t.Helper()
	r := do(t, http.MethodDelete, a.s.URL+"/vouchers/"+url.PathEscape(code)+"/reservations/"+url.PathEscape(orderID), storefrontToken, nil)
	return a.result(t, r, http.StatusOK)
}

// voucherSpec is a voucher to create; zero values take test defaults.
type voucherSpec struct {
	Code           string
	Discount       int64
	MinOrderAmount int64
	TotalLimit     int
	PerUserLimit   int
	StartsAt       time.Time
	EndsAt         time.Time
	Flash          bool
}

// createVoucher creates a voucher through the admin GraphQL API.
func createVoucher(t testing.TB, s *server, v voucherSpec) string {
	t.Helper()
	if v.Code == "" {
		v.Code = uniqueCode("v")
	}
	if v.Discount == 0 {
		v.Discount = 1000
	}
	if v.TotalLimit == 0 {
		v.TotalLimit = 10
	}
	if v.PerUserLimit == 0 {
		v.PerUserLimit = 1
	}
	if v.StartsAt.IsZero() {
		v.StartsAt = time.Now().Add(-time.Hour)
	}
	if v.EndsAt.IsZero() {
		v.EndsAt = time.Now().Add(24 * time.Hour)
	}
	r := gql(t, s, adminToken, `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { voucher { code } error { code message field } } }`,
		map[string]any{"in": map[string]any{
			"code": v.Code, "discountAmount": v.Discount, "minOrderAmount": v.MinOrderAmount,
			"totalLimit": v.TotalLimit, "perUserLimit": v.PerUserLimit,
			"startsAt": v.StartsAt.Format(time.RFC3339Nano), "endsAt": v.EndsAt.Format(time.RFC3339Nano), "flash": v.Flash,
		}})
	if got := str(path(r.Body, "data", "createVoucher", "voucher", "code")); got != v.Code {
		t.Fatalf("createVoucher: %s", r.Raw)
	}
	return v.Code
}

// voucherState is what the API says of a voucher's counters.
type voucherState struct {
	Used, Reserved, Confirmed, Remaining int
	GateRemaining                        *int
}

func readVoucher(t testing.TB, s *server, code string) voucherState {
	t.Helper()
	r := gql(t, s, adminToken, `query($c: String!) { voucher(code: $c) { usedCount reservedCount confirmedCount remaining gateRemaining } }`, map[string]any{"c": code})
	v, ok := path(r.Body, "data", "voucher").(map[string]any)
	if !ok {
		t.Fatalf("voucher %s: %s", code, r.Raw)
	}
	st := voucherState{
		Used: int(num(t, v["usedCount"])), Reserved: int(num(t, v["reservedCount"])),
		Confirmed: int(num(t, v["confirmedCount"])), Remaining: int(num(t, v["remaining"])),
	}
	if g := v["gateRemaining"]; g != nil {
		n := int(num(t, g))
		st.GateRemaining = &n
	}
	return st
}

// kinds runs a test on an ordinary voucher and on a flash voucher.
func kinds(t *testing.T, fn func(t *testing.T, flash bool)) {
	for _, flash := range []bool{false, true} {
		name := "ordinary"
		if flash {
			name = "flash"
		}
		t.Run(name, func(t *testing.T) {
			fn(t, flash)
		})
	}
}

// each runs a test over every transport and both kinds of voucher.
func each(t *testing.T, s *server, fn func(t *testing.T, api checkoutAPI, flash bool)) {
	for _, api := range transports(s) {
		t.Run(api.name(), func(t *testing.T) {
			kinds(t, func(t *testing.T, flash bool) { fn(t, api, flash) })
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// deref shows an optional figure in failure messages.
func deref(p *int) string {
	if p == nil {
		return "null"
	}
	return itoa(int64(*p))
}
