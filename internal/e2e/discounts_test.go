package e2e

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"voucherd/internal/testenv"
)

// discountVoucher creates a voucher from spec plus the discount terms in
// extra (discountType, discountPercent, ...); discountAmount is dropped
// when extra names a PERCENT type.
func discountVoucher(t testing.TB, s *server, flash bool, extra map[string]any) string {
	t.Helper()
	code := uniqueCode("disc")
	in := voucherInput(code, flash)
	in["totalLimit"], in["perUserLimit"] = 1000, 1000
	if extra["discountType"] == "PERCENT" {
		delete(in, "discountAmount")
	}
	for k, v := range extra {
		in[k] = v
	}
	got, errCode, r := createRaw(t, s, in)
	if got != code || errCode != "" {
		t.Fatalf("createVoucher(%v): %s", extra, r.Raw)
	}
	return code
}

// reserveIn is a reserve naming a currency, over either transport.
func reserveIn(t testing.TB, api checkoutAPI, code string, customer int64, order string, amount int64, currency string) result {
	t.Helper()
	if currency == "" {
		return api.reserve(t, code, customer, order, amount)
	}
	switch a := api.(type) {
	case graphqlAPI:
		r := gql(t, a.s, storefrontToken, `mutation($in: ReserveVoucherInput!) { reserveVoucher(input: $in) { `+reservationFields+` } }`,
			map[string]any{"in": map[string]any{"code": code, "customerId": itoa(customer), "orderId": order, "orderAmount": amount, "currency": currency}})
		return a.payload(t, "reserveVoucher", r)
	case restAPI:
		r := do(t, http.MethodPost, a.s.URL+"/vouchers/"+url.PathEscape(code)+"/reservations", storefrontToken,
			map[string]any{"customerId": customer, "orderId": order, "orderAmount": amount, "currency": currency})
		return a.result(t, r, http.StatusCreated)
	}
	t.Fatalf("unknown transport %T", api)
	return result{}
}

// heldDiscount is the discount stored on the order's row, once it is there
// (kafka mode writes it after the answer).
func heldDiscount(t testing.TB, s *server, order string) int64 {
	t.Helper()
	var d int64
	testenv.Eventually(t, "the reservation of "+order+" in the database", func() (bool, string) {
		err := s.db.QueryRow(context.Background(), `SELECT discount_amount FROM voucher_redemption WHERE order_id = $1`, order).Scan(&d)
		return err == nil, "no row"
	})
	return d
}

// discountRules checks the discount every path holds: the answer's and the
// row's, for percent (rounded down, capped) and fixed (at most the order).
func discountRules(t *testing.T, s *server, api checkoutAPI, flash bool) {
	percent := discountVoucher(t, s, flash, map[string]any{"discountType": "PERCENT", "discountPercent": 15, "maxDiscountAmount": 1000})
	one := discountVoucher(t, s, flash, map[string]any{"discountType": "PERCENT", "discountPercent": 1})
	whole := discountVoucher(t, s, flash, map[string]any{"discountType": "PERCENT", "discountPercent": 100})
	fixed := discountVoucher(t, s, flash, map[string]any{"discountAmount": 1000})
	customer := int64(1)
	for _, tc := range []struct {
		desc  string
		code  string
		order int64
		want  int64
	}{
		{"15 % of 1,999", percent, 1999, 299},
		{"15 % of 5,000 (cap not hit)", percent, 5000, 750},
		{"15 % of 10,000 (cap hit)", percent, 10000, 1000},
		{"1 % of 99", one, 99, 0},
		{"100 % of 1,234", whole, 1234, 1234},
		{"fixed 1,000 on 2,500", fixed, 2500, 1000},
		{"fixed 1,000 on 400", fixed, 400, 400},
	} {
		customer++
		order := uniqueOrder()
		r := api.reserve(t, tc.code, customer, order, tc.order)
		if r.Error != "" {
			t.Errorf("%s: reserve refused: %s", tc.desc, r.Error)
			continue
		}
		if got := num(t, r.Reservation["discountAmount"]); got != tc.want {
			t.Errorf("%s: the answer's discountAmount = %d, want %d", tc.desc, got, tc.want)
		}
		if got := heldDiscount(t, s, order); got != tc.want {
			t.Errorf("%s: the row's discount_amount = %d, want %d", tc.desc, got, tc.want)
		}
		// A retry answers the discount held, unchanged.
		if again := api.reserve(t, tc.code, customer, order, tc.order); again.Error != "" || num(t, again.Reservation["discountAmount"]) != tc.want {
			t.Errorf("%s: retry = %q %v", tc.desc, again.Error, again.Reservation)
		}
	}

	// Currency: the voucher's (the default, USD) or none is eligible;
	// another is NOT_ELIGIBLE and holds nothing; a malformed one is
	// INVALID_INPUT.
	if r := reserveIn(t, api, fixed, 500, uniqueOrder(), 2500, "USD"); r.Error != "" {
		t.Errorf("a reserve in the voucher's currency: %s", r.Error)
	}
	if r := reserveIn(t, api, fixed, 501, uniqueOrder(), 2500, "EUR"); r.Error != "NOT_ELIGIBLE" {
		t.Errorf("a reserve in EUR on a USD voucher = %q, want NOT_ELIGIBLE", r.Error)
	}
	if r := reserveIn(t, api, fixed, 502, uniqueOrder(), 2500, "usd"); r.Error != "INVALID_INPUT" || r.Field != "currency" {
		t.Errorf("a reserve in currency usd = %q %q, want INVALID_INPUT on currency", r.Error, r.Field)
	}
}

func TestDiscounts_PercentRoundsDownAndCapsFixedNeverExceedsTheOrder(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) { discountRules(t, s, api, flash) })
}

func TestDiscounts_PercentRoundsDownAndCapsFixedNeverExceedsTheOrderInKafkaMode(t *testing.T) {
	t.Parallel()
	s := kafkaServer(t, nil)
	kafkaEach(t, s, func(t *testing.T, api checkoutAPI) { discountRules(t, s, api, true) })
}

func TestDiscounts_TheVoucherShowsItsTermsAndCurrencyDefaultsToTheSetting(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"DEFAULT_CURRENCY": "JPY"})
	const terms = `query($c: String!) { voucher(code: $c) { discountType discountAmount discountPercent maxDiscountAmount currency } }`
	percent := discountVoucher(t, s, false, map[string]any{"discountType": "PERCENT", "discountPercent": 15, "maxDiscountAmount": 1000, "currency": "EUR"})
	r := gql(t, s, storefrontToken, terms, map[string]any{"c": percent})
	v := path(r.Body, "data", "voucher")
	if str(path(v, "discountType")) != "PERCENT" || num(t, path(v, "discountPercent")) != 15 || num(t, path(v, "maxDiscountAmount")) != 1000 || str(path(v, "currency")) != "EUR" {
		t.Errorf("a PERCENT voucher in EUR shows %s", r.Raw)
	}
	fixed := discountVoucher(t, s, false, nil)
	r = gql(t, s, storefrontToken, terms, map[string]any{"c": fixed})
	v = path(r.Body, "data", "voucher")
	if str(path(v, "discountType")) != "FIXED" || num(t, path(v, "discountAmount")) != 1000 || path(v, "discountPercent") != nil || path(v, "maxDiscountAmount") != nil || str(path(v, "currency")) != "JPY" {
		t.Errorf("a voucher created without type or currency shows %s, want FIXED in DEFAULT_CURRENCY JPY", r.Raw)
	}
}

func TestDiscounts_InvalidCombinationsAreInvalidInputNamingTheFieldAndCreateNothing(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	for _, tc := range []struct {
		desc  string
		edit  map[string]any
		drop  bool // drop discountAmount
		field string
	}{
		{"FIXED without discountAmount", map[string]any{"discountType": "FIXED"}, true, "discountAmount"},
		{"FIXED with a discountPercent", map[string]any{"discountPercent": 10}, false, "discountPercent"},
		{"FIXED with a cap", map[string]any{"maxDiscountAmount": 10}, false, "maxDiscountAmount"},
		{"PERCENT with a discountAmount", map[string]any{"discountType": "PERCENT", "discountPercent": 10}, false, "discountAmount"},
		{"PERCENT without a discountPercent", map[string]any{"discountType": "PERCENT"}, true, "discountPercent"},
		{"PERCENT of 0", map[string]any{"discountType": "PERCENT", "discountPercent": 0}, true, "discountPercent"},
		{"PERCENT of 101", map[string]any{"discountType": "PERCENT", "discountPercent": 101}, true, "discountPercent"},
		{"PERCENT with a cap of 0", map[string]any{"discountType": "PERCENT", "discountPercent": 10, "maxDiscountAmount": 0}, true, "maxDiscountAmount"},
		{"a currency in lower case", map[string]any{"currency": "eur"}, false, "currency"},
		{"a currency that is none", map[string]any{"currency": "ABC"}, false, "currency"},
	} {
		code := uniqueCode("bad")
		in := voucherInput(code, false)
		if tc.drop {
			delete(in, "discountAmount")
		}
		for k, v := range tc.edit {
			in[k] = v
		}
		_, errCode, r := createRaw(t, s, in)
		if errCode != "INVALID_INPUT" || str(path(r.Body, "data", "createVoucher", "error", "field")) != tc.field {
			t.Errorf("%s: %s, want INVALID_INPUT on %s", tc.desc, r.Raw, tc.field)
		}
		if voucherExists(t, code) {
			t.Errorf("%s: the voucher was created", tc.desc)
		}
	}
}

func TestDiscounts_UpdateVoucherTakesTheNewTermsAndTheAuditRecordsThem(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	code := uniqueCode("updisc")
	in := voucherInput(code, true)
	in["startsAt"], in["endsAt"] = time.Now().Add(time.Hour).Format(time.RFC3339), time.Now().Add(2*time.Hour).Format(time.RFC3339)
	if got, errCode, r := createRaw(t, s, in); got != code || errCode != "" {
		t.Fatalf("create: %s", r.Raw)
	}
	const update = `mutation($in: UpdateVoucherInput!) { updateVoucher(input: $in) { voucher { code discountType discountAmount discountPercent maxDiscountAmount currency budgetAmount budgetUsed } error { code field message } } }`
	r := gql(t, s, adminToken, update, map[string]any{"in": map[string]any{"code": code, "discountType": "PERCENT", "discountPercent": 0}})
	if str(path(r.Body, "data", "updateVoucher", "error", "code")) != "INVALID_INPUT" || str(path(r.Body, "data", "updateVoucher", "error", "field")) != "discountPercent" {
		t.Errorf("a change to PERCENT of 0: %s, want INVALID_INPUT on discountPercent", r.Raw)
	}
	r = gql(t, s, adminToken, update, map[string]any{"in": map[string]any{
		"code": strings.ToLower(code), "discountType": "PERCENT", "discountPercent": 20, "maxDiscountAmount": 700, "currency": "EUR", "budgetAmount": 5000,
	}})
	v := path(r.Body, "data", "updateVoucher", "voucher")
	if str(path(v, "discountType")) != "PERCENT" || num(t, path(v, "discountAmount")) != 0 || num(t, path(v, "discountPercent")) != 20 ||
		num(t, path(v, "maxDiscountAmount")) != 700 || str(path(v, "currency")) != "EUR" || num(t, path(v, "budgetAmount")) != 5000 || num(t, path(v, "budgetUsed")) != 0 {
		t.Fatalf("a change to PERCENT 20 capped at 700, in EUR, with a budget of 5,000: %s", r.Raw)
	}
	var created, updated string
	ctx := context.Background()
	if err := s.db.QueryRow(ctx, `SELECT detail FROM voucher_audit WHERE voucher_code = $1 AND action = 'created'`, code).Scan(&created); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRow(ctx, `SELECT detail FROM voucher_audit WHERE voucher_code = $1 AND action = 'updated'`, code).Scan(&updated); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"discountType FIXED", "currency USD", "budgetAmount none"} {
		if !strings.Contains(created, want) {
			t.Errorf("the creation's audit %q does not say %q", created, want)
		}
	}
	for _, want := range []string{"discountType FIXED → PERCENT", "discountAmount 1000 → 0", "discountPercent 0 → 20", "maxDiscountAmount none → 700", "currency USD → EUR", "budgetAmount none → 5000"} {
		if !strings.Contains(updated, want) {
			t.Errorf("the change's audit %q does not say %q", updated, want)
		}
	}
	// Back to FIXED drops the percent and its cap.
	r = gql(t, s, adminToken, update, map[string]any{"in": map[string]any{"code": code, "discountType": "FIXED", "discountAmount": 300}})
	v = path(r.Body, "data", "updateVoucher", "voucher")
	if str(path(v, "discountType")) != "FIXED" || num(t, path(v, "discountAmount")) != 300 || path(v, "discountPercent") != nil || path(v, "maxDiscountAmount") != nil {
		t.Errorf("a change back to FIXED 300: %s", r.Raw)
	}
}
