package e2e

import (
	"net/http"
	"net/url"
	"testing"
	"time"
)

// check calls checkVoucher over the transport api stands for and returns
// the discount, or the refusal's code.
func check(t testing.TB, api checkoutAPI, code string, customer int64, amount int64, currency string) (discount int64, errCode string) {
	t.Helper()
	switch a := api.(type) {
	case graphqlAPI:
		in := map[string]any{"code": code, "customerId": itoa(customer), "orderAmount": amount}
		if currency != "" {
			in["currency"] = currency
		}
		r := gql(t, a.s, storefrontToken, `query($in: CheckVoucherInput!) { checkVoucher(input: $in) { discountAmount error { code message field } } }`, map[string]any{"in": in})
		if r.Status != http.StatusOK || path(r.Body, "errors") != nil {
			t.Fatalf("checkVoucher: %s", r.Raw)
		}
		p := path(r.Body, "data", "checkVoucher")
		if e := path(p, "error"); e != nil {
			if path(p, "discountAmount") != nil || str(path(e, "message")) == "" {
				t.Errorf("checkVoucher: a refusal with a discount or without a message: %s", r.Raw)
			}
			return 0, str(path(e, "code"))
		}
		return num(t, path(p, "discountAmount")), ""
	case restAPI:
		body := map[string]any{"customerId": customer, "orderAmount": amount}
		if currency != "" {
			body["currency"] = currency
		}
		r := do(t, http.MethodPost, a.s.URL+"/vouchers/"+url.PathEscape(code)+"/checks", storefrontToken, body)
		if e := str(r.Body["error"]); e != "" {
			if want := restStatus[e]; r.Status != want {
				t.Errorf("REST check %s answered HTTP %d, the contract says %d", e, r.Status, want)
			}
			return 0, e
		}
		if r.Status != http.StatusOK {
			t.Fatalf("REST check answered %d: %s", r.Status, r.Raw)
		}
		return num(t, r.Body["discountAmount"]), ""
	}
	t.Fatalf("unknown transport %T", api)
	return 0, ""
}

func TestCheck_ThousandChecksTakeNoUseAndNoBudget(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		code := discountVoucher(t, s, flash, map[string]any{"discountType": "PERCENT", "discountPercent": 15, "totalLimit": 10, "perUserLimit": 1, "budgetAmount": 10_000})
		counts := stampede(1000, func(i int) string {
			d, e := check(t, api, code, int64(1+i%50), 1999, "")
			if e == "" && d != 299 {
				return "wrong discount"
			}
			return e
		})
		if counts[""] != 1000 {
			t.Errorf("1,000 checks: %v, want 1,000 answers of 299", counts)
		}
		st := readVoucher(t, s, code)
		if st.Used != 0 || st.Reserved != 0 || budgetUsed(t, s, code) != 0 || (flash && (st.GateRemaining == nil || *st.GateRemaining != 10)) {
			t.Errorf("after 1,000 checks: %+v, budgetUsed %d, gate %s; want nothing taken", st, budgetUsed(t, s, code), deref(st.GateRemaining))
		}
		if heldDiscounts(t, s, code) != 0 || liveRows(t, s.db, code) != 0 {
			t.Error("checks wrote reservations")
		}
		// And the uses are all there for reserves.
		counts = stampede(20, func(i int) string { return api.reserve(t, code, int64(100+i), uniqueOrder(), 1999).Error })
		if counts[""] != 10 || counts["OUT_OF_STOCK"] != 10 {
			t.Errorf("20 reserves after the checks: %v, want 10 successes", counts)
		}
	})
}

// checkAgrees asks a check, then the reserve the check describes, and wants
// the same answer; then the check again, now after the reserve.
func checkAgrees(t *testing.T, api checkoutAPI, desc, code string, customer, amount int64, currency, want string) {
	t.Helper()
	d, e := check(t, api, code, customer, amount, currency)
	r := reserveIn(t, api, code, customer, uniqueOrder(), amount, currency)
	if e != want || r.Error != want {
		t.Errorf("%s: check %q, reserve %q; want both %q", desc, e, r.Error, want)
	}
	if want == "" && num(t, r.Reservation["discountAmount"]) != d {
		t.Errorf("%s: check said a discount of %d, the reserve held %v", desc, d, r.Reservation["discountAmount"])
	}
}

func checkRules(t *testing.T, s *server, api checkoutAPI, flash bool) {
	percent := discountVoucher(t, s, flash, map[string]any{"discountType": "PERCENT", "discountPercent": 15, "minOrderAmount": 1000, "perUserLimit": 1})
	checkAgrees(t, api, "a success", percent, 1, 1999, "", "")
	checkAgrees(t, api, "in the voucher's currency", percent, 2, 5000, "USD", "")
	checkAgrees(t, api, "the customer at the limit", percent, 1, 1999, "", "ALREADY_USED")
	checkAgrees(t, api, "under the minimum", percent, 3, 999, "", "NOT_ELIGIBLE")
	checkAgrees(t, api, "in another currency", percent, 3, 1999, "EUR", "NOT_ELIGIBLE")
	checkAgrees(t, api, "an unknown code", uniqueCode("nope"), 3, 1999, "", "NOT_FOUND")
	checkAgrees(t, api, "a malformed currency", percent, 3, 1999, "eur", "INVALID_INPUT")

	later := discountVoucher(t, s, flash, map[string]any{
		"startsAt": time.Now().Add(time.Hour).Format(time.RFC3339), "endsAt": time.Now().Add(2 * time.Hour).Format(time.RFC3339),
	})
	checkAgrees(t, api, "before the window", later, 1, 5000, "", "NOT_ELIGIBLE")

	one := discountVoucher(t, s, flash, map[string]any{"totalLimit": 1, "perUserLimit": 1})
	checkAgrees(t, api, "the last use", one, 1, 5000, "", "")
	checkAgrees(t, api, "sold out", one, 2, 5000, "", "OUT_OF_STOCK")
	checkAgrees(t, api, "sold out, again (the sold-out snapshot)", one, 3, 5000, "", "OUT_OF_STOCK")
	checkAgrees(t, api, "sold out, a customer at the limit", one, 1, 5000, "", "ALREADY_USED")

	{ // a budget
		budget := discountVoucher(t, s, flash, map[string]any{"discountAmount": 1000, "budgetAmount": 1500})
		checkAgrees(t, api, "within the budget", budget, 1, 5000, "", "")
		checkAgrees(t, api, "over the budget", budget, 2, 5000, "", "BUDGET_EXHAUSTED")
		checkAgrees(t, api, "a smaller discount the budget covers", budget, 3, 500, "", "")
	}
}

func TestCheck_AgreesWithTheReserveThatFollowsInEveryOutcome(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) { checkRules(t, s, api, flash) })
}

func TestCheck_AgreesWithTheReserveThatFollowsInKafkaMode(t *testing.T) {
	t.Parallel()
	s := kafkaServer(t, nil)
	kafkaEach(t, s, func(t *testing.T, api checkoutAPI) { checkRules(t, s, api, true) })
}

// The late crowd's checks of a sold-out flash voucher are answered from the
// instance's sold-out snapshot, as its reserves are: the gate is asked a few
// times, not once a check.
func TestCheck_TheLateCrowdOfASoldOutFlashVoucherIsAnsweredFromMemory(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil) // its own counters
	api := restAPI{s}
	code := createVoucher(t, s, voucherSpec{TotalLimit: 3, Flash: true})
	for i := range 3 {
		if r := api.reserve(t, code, int64(1+i), uniqueOrder(), 1000); r.Error != "" {
			t.Fatalf("reserve %d of 3: %s", i+1, r.Error)
		}
	}
	const calls = `voucher_gate_calls_total{op="availability",result="ok"}`
	before := metricValue(t, s, calls)
	for i := range 200 {
		if _, errCode := check(t, api, code, int64(100+i), 1000, ""); errCode != "OUT_OF_STOCK" {
			t.Fatalf("check %d on a sold-out voucher = %q, want OUT_OF_STOCK", i, errCode)
		}
	}
	// A customer who holds a use is still told so, from the snapshot.
	if _, errCode := check(t, api, code, 1, 1000, ""); errCode != "ALREADY_USED" {
		t.Errorf("check of a customer at their limit = %q, want ALREADY_USED", errCode)
	}
	if got := metricValue(t, s, calls) - before; got > 10 {
		t.Errorf("201 checks of a sold-out voucher asked the gate %v times; want them answered from the sold-out snapshot", got)
	}
}
