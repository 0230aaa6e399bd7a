package e2e

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// The contract's Money bound (issue #24, item 7): every Money input is at
// most 2^53 - 1, and a reserve whose discount would take budgetUsed past it
// is INVALID_INPUT on orderAmount; nothing answers INTERNAL for an amount.

const maxMoney = voucher.MaxMoney

// refusedOnOrderAmount fails t unless r is INVALID_INPUT on orderAmount.
func refusedOnOrderAmount(t testing.TB, what string, r result) {
	t.Helper()
	if r.Error != "INVALID_INPUT" || r.Field != "orderAmount" {
		t.Errorf("%s: %q on %q (HTTP %d), want INVALID_INPUT on orderAmount", what, r.Error, r.Field, r.HTTPStatus)
	}
}

// reviewersVoucher is the reviewer's reproduction, through REST: a PERCENT
// voucher without a cap, reserved with orderAmount 2^63-1 (now refused, and
// nothing changes), then with 2^53-1, confirmed; later reserves keep being
// answered, and its budgetUsed reaches 2^53-1 exactly and never passes it.
func reviewersVoucher(t *testing.T, s *server, flash, kafka bool) {
	api := restAPI{s}
	code := discountVoucher(t, s, flash, map[string]any{"discountType": "PERCENT", "discountPercent": 50})
	half := maxMoney / 2 // floor((2^53-1) * 50 / 100)

	order := uniqueOrder()
	refusedOnOrderAmount(t, "orderAmount 2^63-1", api.reserve(t, code, 1, order, int64(math.MaxInt64)))
	if st := readVoucher(t, s, code); st.Used != 0 || budgetUsed(t, s, code) != 0 || dbStatus(t, s, order) != "" {
		t.Fatalf("after the refused 2^63-1: %+v, budgetUsed %d, row %q; want nothing changed", st, budgetUsed(t, s, code), dbStatus(t, s, order))
	}

	first := uniqueOrder()
	r := api.reserve(t, code, 2, first, maxMoney)
	if r.Error != "" || num(t, r.Reservation["discountAmount"]) != half {
		t.Fatalf("orderAmount 2^53-1: %q %v, want held with a discount of %d", r.Error, r.Reservation, half)
	}
	if r := api.confirm(t, code, first); r.Error != "" {
		t.Fatalf("confirm: %s", r.Error)
	}
	small := uniqueOrder()
	if r := api.reserve(t, code, 3, small, 1000); r.Error != "" {
		t.Fatalf("a later reserve: %s", r.Error)
	}
	// half + 500 + half is past 2^53-1.
	refusedOnOrderAmount(t, "a second 2^53-1 with 500 held besides", api.reserve(t, code, 4, uniqueOrder(), maxMoney))
	if _, e := check(t, api, code, 4, maxMoney, ""); e != "INVALID_INPUT" {
		t.Errorf("the same as a check: %q, want INVALID_INPUT", e)
	}
	if r := api.release(t, code, small); r.Error != "" {
		t.Fatalf("release: %s", r.Error)
	}
	if r := api.reserve(t, code, 5, uniqueOrder(), maxMoney); r.Error != "" {
		t.Fatalf("a second 2^53-1 once the 500 is released: %s", r.Error)
	}
	// 2*half = 2^53-2: a discount of 1 fills it, exactly.
	if r := api.reserve(t, code, 6, uniqueOrder(), 3); r.Error != "" || num(t, r.Reservation["discountAmount"]) != 1 {
		t.Fatalf("a discount of 1 to reach 2^53-1: %q %v", r.Error, r.Reservation)
	}
	refusedOnOrderAmount(t, "a discount of 1 past 2^53-1", api.reserve(t, code, 7, uniqueOrder(), 2))
	if r := api.reserve(t, code, 8, uniqueOrder(), 1); r.Error != "" {
		t.Errorf("a discount of 0 at 2^53-1: %q, want it held", r.Error)
	}
	if kafka {
		waitCounters(t, s, code, 4, 3, 1)
		assertNoDeadLetters(t, s.db, code)
	}
	if got := budgetUsed(t, s, code); got != maxMoney || heldDiscounts(t, s, code) != maxMoney {
		t.Errorf("budgetUsed %d (rows %d), want exactly %d", got, heldDiscounts(t, s, code), maxMoney)
	}
	if st := readVoucher(t, s, code); st.Used != 4 {
		t.Errorf("uses held: %+v, want 4", st)
	}
}

func TestMoney_TheReviewersVoucherIsRefusedNotInternal(t *testing.T) {
	s := sharedServer(t)
	kinds(t, func(t *testing.T, flash bool) { reviewersVoucher(t, s, flash, false) })
}

func TestMoney_TheReviewersVoucherIsRefusedNotInternalInKafkaMode(t *testing.T) {
	t.Parallel()
	s := kafkaServer(t, nil)
	reviewersVoucher(t, s, true, true)
}

// budgetNearMaxMoney: a budget just under 2^53-1, nearly spent. A discount
// the budget cannot cover but whose sum stays within 2^53-1 is
// BUDGET_EXHAUSTED; one whose sum passes 2^53-1 is INVALID_INPUT on
// orderAmount (the sum first), and neither takes anything.
func budgetNearMaxMoney(t *testing.T, s *server, api checkoutAPI, flash, kafka bool) {
	code := discountVoucher(t, s, flash, map[string]any{"discountType": "PERCENT", "discountPercent": 100, "budgetAmount": maxMoney - 5})
	if r := api.reserve(t, code, 1, uniqueOrder(), maxMoney-10); r.Error != "" {
		t.Fatalf("reserve 2^53-11: %s", r.Error)
	}
	if r := api.reserve(t, code, 2, uniqueOrder(), 6); r.Error != "BUDGET_EXHAUSTED" {
		t.Errorf("a discount of 6 with 5 of the budget left: %q, want BUDGET_EXHAUSTED", r.Error)
	}
	refusedOnOrderAmount(t, "a discount of 11 with budgetUsed at 2^53-11", api.reserve(t, code, 3, uniqueOrder(), 11))
	if d, e := check(t, api, code, 3, 11, ""); e != "INVALID_INPUT" {
		t.Errorf("the same as a check: %d %q, want INVALID_INPUT", d, e)
	}
	if r := api.reserve(t, code, 4, uniqueOrder(), 5); r.Error != "" {
		t.Errorf("a discount of exactly the 5 left: %q, want it held", r.Error)
	}
	if kafka {
		waitCounters(t, s, code, 2, 2, 0)
		assertNoDeadLetters(t, s.db, code)
	}
	if got := budgetUsed(t, s, code); got != maxMoney-5 {
		t.Errorf("budgetUsed %d, want %d", got, maxMoney-5)
	}
}

func TestMoney_ASumPastMaxMoneyIsInvalidInputBeforeTheBudget(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) { budgetNearMaxMoney(t, s, api, flash, false) })
}

func TestMoney_ASumPastMaxMoneyIsInvalidInputBeforeTheBudgetInKafkaMode(t *testing.T) {
	t.Parallel()
	s := kafkaServer(t, nil)
	kafkaEach(t, s, func(t *testing.T, api checkoutAPI) { budgetNearMaxMoney(t, s, api, true, true) })
}

// 2^53 in every Money input, GraphQL (variables and literals) and REST, is
// INVALID_INPUT naming its field, and creates or holds nothing; 2^53-1 fits.
func TestMoney_2To53IsInvalidInputOnEveryMoneyField(t *testing.T) {
	s := sharedServer(t)
	const over = "9007199254740992"
	now := time.Now()
	window := fmt.Sprintf(`"startsAt": %q, "endsAt": %q`, now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	gqlBoth := func(t *testing.T, op, query, varType, in string) response {
		t.Helper()
		// in is a JSON object's members; the literal form is the same
		// object with its keys unquoted.
		body := fmt.Sprintf(`{"query": %q, "variables": {"in": {%s}}}`, fmt.Sprintf(`mutation($in: %s!) { %s(input: $in) { %s } }`, varType, op, query), in)
		if op == "checkVoucher" {
			body = strings.Replace(body, "mutation", "query", 1)
		}
		token := adminToken
		return rawRequest(t, http.MethodPost, s.URL+"/graphql", token, "application/json", []byte(body))
	}
	literal := func(t *testing.T, op, query, in string) response {
		t.Helper()
		lit := in
		for _, k := range []string{"code", "name", "customerId", "orderId", "orderAmount", "discountAmount", "discountType", "discountPercent",
			"maxDiscountAmount", "minOrderAmount", "budgetAmount", "totalLimit", "perUserLimit", "codeCount", "startsAt", "endsAt"} {
			lit = strings.ReplaceAll(lit, `"`+k+`":`, k+":")
		}
		lit = strings.ReplaceAll(lit, `"PERCENT"`, "PERCENT")
		kind := "mutation"
		if op == "checkVoucher" {
			kind = "query"
		}
		return gql(t, s, adminToken, fmt.Sprintf(`%s { %s(input: {%s}) { %s } }`, kind, op, lit, query), nil)
	}

	type input struct {
		op, varType, query, in, field string
		created                       func(t testing.TB, code string) bool
	}
	reservable := discountVoucher(t, s, false, nil)
	gqlOrder, restOrder := uniqueOrder(), uniqueOrder()
	started := createVoucher(t, s, voucherSpec{StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour)})
	var cases []input
	for _, field := range []string{"discountAmount", "minOrderAmount", "budgetAmount"} {
		code := uniqueCode("m53")
		in := fmt.Sprintf(`"code": %q, "discountAmount": 100, "totalLimit": 5, %s, %q: %s`, code, window, field, over)
		in = strings.Replace(in, `"discountAmount": 100, `, "", strings.Count(in, `"discountAmount"`)-1)
		cases = append(cases, input{"createVoucher", "CreateVoucherInput", "voucher { code } error { code field }", in, field, voucherExists})
	}
	code := uniqueCode("m53")
	cases = append(cases,
		input{"createVoucher", "CreateVoucherInput", "voucher { code } error { code field }",
			fmt.Sprintf(`"code": %q, "discountType": "PERCENT", "discountPercent": 10, "totalLimit": 5, %s, "maxDiscountAmount": %s`, code, window, over), "maxDiscountAmount", voucherExists},
		input{"updateVoucher", "UpdateVoucherInput", "voucher { code } error { code field }", fmt.Sprintf(`"code": %q, "discountAmount": %s`, started, over), "discountAmount", nil},
		input{"updateVoucher", "UpdateVoucherInput", "voucher { code } error { code field }", fmt.Sprintf(`"code": %q, "minOrderAmount": %s`, started, over), "minOrderAmount", nil},
		input{"createCampaign", "CreateCampaignInput", "campaign { id } error { code field }", fmt.Sprintf(`"name": "m53", "codeCount": 1, %s, "discountAmount": %s`, window, over), "discountAmount", nil},
		input{"createCampaign", "CreateCampaignInput", "campaign { id } error { code field }", fmt.Sprintf(`"name": "m53", "codeCount": 1, "discountAmount": 5, %s, "budgetAmount": %s`, window, over), "budgetAmount", nil},
		input{"reserveVoucher", "ReserveVoucherInput", "reservation { orderId } error { code field }",
			fmt.Sprintf(`"code": %q, "customerId": "1", "orderId": %q, "orderAmount": %s`, reservable, gqlOrder, over), "orderAmount", nil},
		input{"checkVoucher", "CheckVoucherInput", "discountAmount error { code field }",
			fmt.Sprintf(`"code": %q, "customerId": "1", "orderAmount": %s`, reservable, over), "orderAmount", nil},
	)
	for _, tc := range cases {
		for _, form := range []string{"variables", "literal"} {
			var r response
			if form == "variables" {
				r = gqlBoth(t, tc.op, tc.query, tc.varType, tc.in)
			} else {
				r = literal(t, tc.op, tc.query, tc.in)
			}
			if c, f := gqlRefusal(t, r, tc.op); c != "INVALID_INPUT" || !strings.HasSuffix(f, tc.field) {
				t.Errorf("%s %s %s = 2^53: %s, want INVALID_INPUT on %s", form, tc.op, tc.field, r.Raw, tc.field)
			}
			assertNothingLeaked(t, r.Raw)
		}
		if tc.created != nil {
			if m := strings.SplitN(tc.in, `"`, 5); tc.created(t, m[3]) {
				t.Errorf("%s %s = 2^53 created %s", tc.op, tc.field, m[3])
			}
		}
	}
	if st := readVoucher(t, s, reservable); st.Used != 0 {
		t.Errorf("the refused reserves held %d uses", st.Used)
	}

	// REST: the reserve and the check.
	for _, p := range []string{"/reservations", "/checks"} {
		body := `{"customerId": 1, "orderId": "` + restOrder + `", "orderAmount": ` + over + `}`
		if p == "/checks" {
			body = `{"customerId": 1, "orderAmount": ` + over + `}`
		}
		r := rawRequest(t, http.MethodPost, s.URL+"/vouchers/"+url.PathEscape(reservable)+p, storefrontToken, "application/json", []byte(body))
		if r.Status != http.StatusBadRequest || str(r.Body["error"]) != "INVALID_INPUT" || str(r.Body["field"]) != "orderAmount" {
			t.Errorf("REST %s orderAmount 2^53: HTTP %d %s, want 400 INVALID_INPUT on orderAmount", p, r.Status, r.Raw)
		}
	}
	if dbStatus(t, s, restOrder) != "" || dbStatus(t, s, gqlOrder) != "" {
		t.Error("a refused reserve left a row")
	}

	// 2^53-1 fits every Money field.
	edge := uniqueCode("m53")
	r := gql(t, s, adminToken, createVoucherOp, map[string]any{"in": map[string]any{
		"code": edge, "discountAmount": maxMoney, "minOrderAmount": maxMoney, "budgetAmount": maxMoney, "totalLimit": 5,
		"startsAt": now.Add(-time.Hour).Format(time.RFC3339), "endsAt": now.Add(time.Hour).Format(time.RFC3339)}})
	if str(path(r.Body, "data", "createVoucher", "voucher", "discountAmount")) != "9007199254740991" {
		t.Errorf("amounts of 2^53-1: %s", r.Raw)
	}
	if res := (restAPI{s}).reserve(t, edge, 1, uniqueOrder(), maxMoney); res.Error != "" || num(t, res.Reservation["discountAmount"]) != maxMoney {
		t.Errorf("orderAmount 2^53-1 on a discount of 2^53-1: %q %v", res.Error, res.Reservation)
	}
}

// A campaign's codes share its budgetUsed: once one code's discount brings
// it to 2^53-1, another code's discount of 1 is INVALID_INPUT on
// orderAmount, on the database path and behind the campaign's gate.
func TestMoney_ACampaignsSumStaysWithinMaxMoneyAcrossItsCodes(t *testing.T) {
	s := sharedServer(t)
	kinds(t, func(t *testing.T, flash bool) {
		id, codes := readyCampaign(t, s, campaignSpec{CodeCount: 3, PerUserLimit: 3, Discount: maxMoney, Flash: flash})
		api := restAPI{s}
		if r := api.reserve(t, codes[0], 1, uniqueOrder(), maxMoney); r.Error != "" {
			t.Fatalf("a discount of 2^53-1 on %s: %s", codes[0], r.Error)
		}
		refusedOnOrderAmount(t, "a discount of 1 on another code", api.reserve(t, codes[1], 1, uniqueOrder(), 1))
		if r := api.reserve(t, codes[2], 1, uniqueOrder(), 0); r.Error != "" {
			t.Errorf("a discount of 0 on a third code: %q, want it held", r.Error)
		}
		c := readCampaign(t, s, id)
		if num(t, c["budgetUsed"]) != maxMoney || num(t, c["usedCount"]) != 2 {
			t.Errorf("the campaign after it: budgetUsed %v, usedCount %v; want 2^53-1 and 2", c["budgetUsed"], c["usedCount"])
		}
	})
}
