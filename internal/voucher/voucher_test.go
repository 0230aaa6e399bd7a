package voucher

import (
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestReserveRequest_ValidateNamesTheField(t *testing.T) {
	ok := ReserveRequest{Code: "SALE_1-x", CustomerID: 1, OrderID: "o-1", OrderAmount: 0}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid request: %v", err)
	}
	for _, tc := range []struct {
		desc  string
		edit  func(*ReserveRequest)
		field string
	}{
		{"empty code", func(r *ReserveRequest) { r.Code = "" }, "code"},
		{"code of 33 characters", func(r *ReserveRequest) { r.Code = strings.Repeat("A", 33) }, "code"},
		{"code with a dot", func(r *ReserveRequest) { r.Code = "a.b" }, "code"},
		{"customer 0", func(r *ReserveRequest) { r.CustomerID = 0 }, "customerId"},
		{"negative customer", func(r *ReserveRequest) { r.CustomerID = -1 }, "customerId"},
		{"empty orderId", func(r *ReserveRequest) { r.OrderID = "" }, "orderId"},
		{"orderId of 65 characters", func(r *ReserveRequest) { r.OrderID = strings.Repeat("o", 65) }, "orderId"},
		{"orderId with a control character", func(r *ReserveRequest) { r.OrderID = "o\n1" }, "orderId"},
		{"orderId not UTF-8", func(r *ReserveRequest) { r.OrderID = "o\xff" }, "orderId"},
		{"negative amount", func(r *ReserveRequest) { r.OrderAmount = -1 }, "orderAmount"},
		{"currency in lower case", func(r *ReserveRequest) { r.Currency = "usd" }, "currency"},
		{"currency that is none", func(r *ReserveRequest) { r.Currency = "XYZ" }, "currency"},
	} {
		r := ok
		tc.edit(&r)
		e := AsError(r.Validate())
		if e.Code != InvalidInput || e.Field != tc.field {
			t.Errorf("%s: %v, want INVALID_INPUT on %s", tc.desc, e, tc.field)
		}
	}
	// 64 characters of any script are fine.
	r := ok
	r.OrderID = strings.Repeat("é", 64)
	if err := r.Validate(); err != nil {
		t.Errorf("64 two-byte characters: %v", err)
	}
}

func TestReserveRequest_RetryFollowsRuleTwo(t *testing.T) {
	earlier := Reservation{OrderID: "o", VoucherCode: "V", CustomerID: 7, OrderAmount: 100, Status: StatusReserved}
	same := ReserveRequest{Code: "V", CustomerID: 7, OrderID: "o", OrderAmount: 100}
	for _, tc := range []struct {
		desc   string
		req    ReserveRequest
		status Status
		want   ErrorCode
	}{
		{"identical, reserved", same, StatusReserved, ""},
		{"identical, confirmed", same, StatusConfirmed, ""},
		{"identical, released", same, StatusReleased, ReservationReleased},
		{"other amount", ReserveRequest{Code: "V", CustomerID: 7, OrderID: "o", OrderAmount: 101}, StatusReserved, OrderConflict},
		{"other customer", ReserveRequest{Code: "V", CustomerID: 8, OrderID: "o", OrderAmount: 100}, StatusReserved, OrderConflict},
		{"other code", ReserveRequest{Code: "W", CustomerID: 7, OrderID: "o", OrderAmount: 100}, StatusReserved, OrderConflict},
		{"other code, released", ReserveRequest{Code: "W", CustomerID: 7, OrderID: "o", OrderAmount: 100}, StatusReleased, OrderConflict},
	} {
		e := earlier
		e.Status = tc.status
		got, err := tc.req.Retry(e)
		if ErrorCodeOf(err) != tc.want {
			t.Errorf("%s: %v, want %q", tc.desc, err, tc.want)
		}
		if tc.want == "" && got != e {
			t.Errorf("%s: returned %+v, want the earlier reservation unchanged", tc.desc, got)
		}
	}
}

func TestVoucher_CheckEligibleWindowAndMinimum(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	v := Voucher{Code: "V", Currency: "EUR", MinOrderAmount: 500, StartsAt: start, EndsAt: start.Add(time.Hour)}
	for _, tc := range []struct {
		desc     string
		now      time.Time
		amount   int64
		currency string
		want     ErrorCode
	}{
		{"a second early", start.Add(-time.Second), 500, "", NotEligible},
		{"at startsAt", start, 500, "", ""},
		{"at endsAt", start.Add(time.Hour), 500, "", ""},
		{"a second late", start.Add(time.Hour + time.Second), 500, "", NotEligible},
		{"below the minimum", start, 499, "", NotEligible},
		{"in the voucher's currency", start, 500, "EUR", ""},
		{"in another currency", start, 500, "USD", NotEligible},
	} {
		if got := ErrorCodeOf(v.CheckEligible(tc.now, ReserveRequest{OrderAmount: tc.amount, Currency: tc.currency})); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.desc, got, tc.want)
		}
	}
}

func TestNewVoucher_ValidateNamesTheField(t *testing.T) {
	now := time.Now()
	ok := NewVoucher{Code: "V", DiscountAmount: 1, TotalLimit: 1, PerUserLimit: 1, StartsAt: now, EndsAt: now.Add(time.Minute)}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit  func(*NewVoucher)
		field string
	}{
		{func(n *NewVoucher) { n.DiscountAmount = 0 }, "discountAmount"},
		{func(n *NewVoucher) { n.MinOrderAmount = -1 }, "minOrderAmount"},
		{func(n *NewVoucher) { n.TotalLimit = 0 }, "totalLimit"},
		{func(n *NewVoucher) { n.PerUserLimit = 0 }, "perUserLimit"},
		{func(n *NewVoucher) { n.EndsAt = n.StartsAt }, "endsAt"},
	} {
		n := ok
		tc.edit(&n)
		if e := AsError(n.Validate()); e.Code != InvalidInput || e.Field != tc.field {
			t.Errorf("%v, want INVALID_INPUT on %s", e, tc.field)
		}
	}
}

func TestParseCustomerID_DigitsOfAPositiveInt64(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "42": 42, "9223372036854775807": 9223372036854775807} {
		if got, err := ParseCustomerID(in); err != nil || got != want {
			t.Errorf("%q = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "0", "-1", "+1", "1.0", "1e3", " 1", "abc", "9223372036854775808"} {
		if _, err := ParseCustomerID(in); ErrorCodeOf(err) != InvalidInput {
			t.Errorf("%q: %v, want INVALID_INPUT", in, err)
		}
	}
}

// TestSoldOutCache_ASnapshotReadBeforeAForgetIsNotInstalled: a use given
// back while a sold-out snapshot was read may have been sold to another
// order since; installing the snapshot would answer that order's retry
// OUT_OF_STOCK.
func TestSoldOutCache_ASnapshotReadBeforeAForgetIsNotInstalled(t *testing.T) {
	c := newSoldOutCache(time.Minute)
	gen := c.generation("V")
	c.forget("V") // a release, between the read and the install
	c.put(GateSnapshot{Code: "V", PerUserLimit: 1, Customers: map[int64]int{}}, gen)
	if _, ok := c.verdict("V", ReserveRequest{Code: "V", CustomerID: 1, OrderID: "new", OrderAmount: 1}); ok {
		t.Error("a snapshot read before a forget answers from memory")
	}
	c.put(GateSnapshot{Code: "V", PerUserLimit: 1, Customers: map[int64]int{}}, c.generation("V"))
	if v, ok := c.verdict("V", ReserveRequest{Code: "V", CustomerID: 1, OrderID: "new", OrderAmount: 1}); !ok || v != GateOutOfStock {
		t.Errorf("a fresh snapshot: %q %v, want OUT_OF_STOCK from memory", v, ok)
	}
}

func TestSoldOutCache_AnswersAsTheGateWould(t *testing.T) {
	c := newSoldOutCache(time.Minute)
	c.put(GateSnapshot{
		Code: "V", PerUserLimit: 1, Customers: map[int64]int{7: 1},
		Orders: []GateOrder{{OrderID: "won", CustomerID: 7, OrderAmount: 100}, {OrderID: "gone", CustomerID: 8, OrderAmount: 100, Released: true}},
	}, c.generation("V"))
	for _, tc := range []struct {
		desc string
		r    ReserveRequest
		want GateVerdict
	}{
		{"a winner's retry", ReserveRequest{Code: "V", CustomerID: 7, OrderID: "won", OrderAmount: 100}, GateDuplicate},
		{"a winner's retry with another amount", ReserveRequest{Code: "V", CustomerID: 7, OrderID: "won", OrderAmount: 1}, GateOrderConflict},
		{"a released order's retry", ReserveRequest{Code: "V", CustomerID: 8, OrderID: "gone", OrderAmount: 100}, GateReleased},
		{"a customer at the limit", ReserveRequest{Code: "V", CustomerID: 7, OrderID: "new", OrderAmount: 100}, GateAlreadyUsed},
		{"anyone else", ReserveRequest{Code: "V", CustomerID: 9, OrderID: "new", OrderAmount: 100}, GateOutOfStock},
	} {
		if got, ok := c.verdict("V", tc.r); !ok || got != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.desc, got, ok, tc.want)
		}
	}
	if _, ok := c.verdict("OTHER", ReserveRequest{}); ok {
		t.Error("a voucher never sold out was answered from memory")
	}
	if _, ok := newSoldOutCache(-1).verdict("V", ReserveRequest{}); ok {
		t.Error("a disabled cache answered")
	}
}

func TestCaller_RolesMayDoWhatTheContractSays(t *testing.T) {
	for _, tc := range []struct {
		role Role
		op   Operation
		want bool
	}{
		{RoleStorefront, OpCheckout, true},
		{RoleStorefront, OpRead, true},
		{RoleStorefront, OpManageVoucher, false},
		{RoleStorefront, OpOperate, false},
		{RoleAdmin, OpCheckout, true},
		{RoleAdmin, OpManageVoucher, true},
		{RoleAdmin, OpOperate, true},
		{RoleMarketer, OpManageVoucher, true},
		{RoleMarketer, OpOperate, false},
		{RoleMarketer, OpCheckout, false},
		{RoleOperator, OpOperate, true},
		{RoleOperator, OpManageVoucher, false},
	} {
		if got := (Caller{Role: tc.role}).Can(tc.op); got != tc.want {
			t.Errorf("%s may %s = %v, want %v", tc.role, tc.op, got, tc.want)
		}
	}
}

// codeRegexp is the rule ValidateCode spelled as a regexp, as it once was
// implemented: the byte loop must accept exactly what it matches.
var codeRegexp = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

func TestValidateCode_AcceptsWhatTheRegexpMatches(t *testing.T) {
	cases := []string{
		"", "a", "Z", "0", "_", "-", "flash-1", "FLASH_2026-xmas", strings.Repeat("a", 32), strings.Repeat("a", 33),
		strings.Repeat("é", 16), "a b", "a\n", "a\n\n", "\na", "a\x00", "a.b", "a/b", "a+b", "a~", "\xff", "a\xffb",
		"é", "\u212a", "a`", "a[", "a@", "a:", "Ａ",
	}
	for c := 0; c < 256; c++ {
		cases = append(cases, string(rune(c)), "x"+string([]byte{byte(c)}), strings.Repeat("y", 31)+string([]byte{byte(c)}))
	}
	for _, code := range cases {
		want := codeRegexp.MatchString(code)
		err := ValidateCode(code)
		if got := err == nil; got != want {
			t.Errorf("ValidateCode(%q) accepts: %v, the regexp: %v", code, got, want)
		}
		if err != nil && (ErrorCodeOf(err) != InvalidInput || AsError(err).Field != "code" ||
			AsError(err).Message != "code must be 1-32 characters of A-Z, a-z, 0-9, _ and -") {
			t.Errorf("ValidateCode(%q): %v", code, err)
		}
	}
}

func BenchmarkValidateCode(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := ValidateCode("fb-flash-1a2b3c4d5e"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCanonicalCode_IsTheCodeInCapitalsAndRefusesWhatIsNotACode(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"winter25", "WINTER25"},
		{"Winter25", "WINTER25"},
		{"WINTER25", "WINTER25"},
		{"sale_1-x", "SALE_1-X"},
	} {
		if got, err := CanonicalCode(tc.in); err != nil || got != tc.want {
			t.Errorf("CanonicalCode(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	// Not a code: refused, never folded into one (ToUpper would make the
	// Kelvin sign a K and "ß" two letters).
	for _, in := range []string{"", "a.b", "\u212a", "straße", strings.Repeat("a", 33)} {
		if _, err := CanonicalCode(in); ErrorCodeOf(err) != InvalidInput || AsError(err).Field != "code" {
			t.Errorf("CanonicalCode(%q) = %v, want INVALID_INPUT on code", in, err)
		}
	}
}

func TestVoucher_DiscountForRoundsDownCapsAndNeverExceedsTheOrder(t *testing.T) {
	capAt := func(n int64) *int64 { return &n }
	fixed := func(amount int64) Voucher { return Voucher{DiscountType: DiscountFixed, DiscountAmount: amount} }
	percent := func(p int, max *int64) Voucher {
		return Voucher{DiscountType: DiscountPercent, DiscountPercent: p, MaxDiscountAmount: max}
	}
	for _, tc := range []struct {
		desc  string
		v     Voucher
		order int64
		want  int64
	}{
		{"1 % of 99 rounds down to 0", percent(1, nil), 99, 0},
		{"1 % of 100", percent(1, nil), 100, 1},
		{"15 % of 1,999 is 299 (299.85 rounded down)", percent(15, nil), 1999, 299},
		{"15 % of 1,999 under a cap of 300: not hit", percent(15, capAt(300)), 1999, 299},
		{"15 % of 1,999 under a cap of 299: exactly", percent(15, capAt(299)), 1999, 299},
		{"15 % of 1,999 under a cap of 250: hit", percent(15, capAt(250)), 1999, 250},
		{"100 % is the whole order", percent(100, nil), 1999, 1999},
		{"100 % under a cap", percent(100, capAt(500)), 1999, 500},
		{"percent of an order of 0", percent(50, nil), 0, 0},
		{"percent of the largest order does not overflow", percent(100, nil), math.MaxInt64, math.MaxInt64},
		{"99 % of the largest order", percent(99, nil), math.MaxInt64, math.MaxInt64/100*99 + math.MaxInt64%100*99/100},
		{"fixed below the order", fixed(1000), 2500, 1000},
		{"fixed equal to the order", fixed(1000), 1000, 1000},
		{"fixed larger than the order is the order", fixed(1000), 400, 400},
		{"fixed on an order of 0", fixed(1000), 0, 0},
	} {
		if got := tc.v.DiscountFor(tc.order); got != tc.want {
			t.Errorf("%s: DiscountFor(%d) = %d, want %d", tc.desc, tc.order, got, tc.want)
		}
	}
}

func TestNewVoucher_OnlyValidDiscountCombinations(t *testing.T) {
	now := time.Now()
	capAt := func(n int64) *int64 { return &n }
	base := NewVoucher{Code: "V", TotalLimit: 1, PerUserLimit: 1, StartsAt: now, EndsAt: now.Add(time.Minute)}
	for _, tc := range []struct {
		desc  string
		edit  func(*NewVoucher)
		field string // "" for valid
	}{
		{"fixed", func(n *NewVoucher) { n.DiscountAmount = 500 }, ""},
		{"fixed by name", func(n *NewVoucher) { n.DiscountType, n.DiscountAmount = DiscountFixed, 500 }, ""},
		{"fixed without an amount", func(n *NewVoucher) { n.DiscountType = DiscountFixed }, "discountAmount"},
		{"fixed with a percent", func(n *NewVoucher) { n.DiscountAmount, n.DiscountPercent = 500, 10 }, "discountPercent"},
		{"fixed with a cap", func(n *NewVoucher) { n.DiscountAmount, n.MaxDiscountAmount = 500, capAt(100) }, "maxDiscountAmount"},
		{"percent", func(n *NewVoucher) { n.DiscountType, n.DiscountPercent = DiscountPercent, 15 }, ""},
		{"percent with a cap", func(n *NewVoucher) {
			n.DiscountType, n.DiscountPercent, n.MaxDiscountAmount = DiscountPercent, 15, capAt(1000)
		}, ""},
		{"percent 100", func(n *NewVoucher) { n.DiscountType, n.DiscountPercent = DiscountPercent, 100 }, ""},
		{"percent 0", func(n *NewVoucher) { n.DiscountType = DiscountPercent }, "discountPercent"},
		{"percent 101", func(n *NewVoucher) { n.DiscountType, n.DiscountPercent = DiscountPercent, 101 }, "discountPercent"},
		{"percent with an amount", func(n *NewVoucher) {
			n.DiscountType, n.DiscountPercent, n.DiscountAmount = DiscountPercent, 15, 500
		}, "discountAmount"},
		{"percent with a cap of 0", func(n *NewVoucher) {
			n.DiscountType, n.DiscountPercent, n.MaxDiscountAmount = DiscountPercent, 15, capAt(0)
		}, "maxDiscountAmount"},
		{"an unknown type", func(n *NewVoucher) { n.DiscountType, n.DiscountAmount = "BOGO", 500 }, "discountType"},
		{"in euros", func(n *NewVoucher) { n.DiscountAmount, n.Currency = 500, "EUR" }, ""},
		{"a currency in lower case", func(n *NewVoucher) { n.DiscountAmount, n.Currency = 500, "eur" }, "currency"},
		{"a currency that is none", func(n *NewVoucher) { n.DiscountAmount, n.Currency = 500, "ZZZ" }, "currency"},
		{"a currency of four letters", func(n *NewVoucher) { n.DiscountAmount, n.Currency = 500, "EURO" }, "currency"},
	} {
		n := base
		tc.edit(&n)
		err := n.Validate()
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v, want valid", tc.desc, err)
			}
			continue
		}
		if ErrorCodeOf(err) != InvalidInput || AsError(err).Field != tc.field {
			t.Errorf("%s: %v, want INVALID_INPUT on %s", tc.desc, err, tc.field)
		}
	}
}

func TestCurrencyDigits_ComeFromTheCurrencyTable(t *testing.T) {
	for code, want := range map[string]int{"USD": 2, "EUR": 2, "JPY": 0, "KRW": 0, "BHD": 3, "KWD": 3} {
		if got := CurrencyDigits(code); got != want {
			t.Errorf("CurrencyDigits(%s) = %d, want %d", code, got, want)
		}
	}
}

// The dashboard's script reads a typed currency's decimals from this table
// (2 for a code not in it), so it must agree with CurrencyDigits.
func TestUncommonCurrencyDigits_ListsTheCurrenciesWithoutTwoDecimals(t *testing.T) {
	table := UncommonCurrencyDigits()
	for code, want := range map[string]int{"JPY": 0, "KRW": 0, "BHD": 3, "KWD": 3} {
		if got, ok := table[code]; !ok || got != want {
			t.Errorf("the table has %s = %d (%v), want %d", code, got, ok, want)
		}
	}
	for _, code := range []string{"USD", "EUR", "GBP"} {
		if _, ok := table[code]; ok {
			t.Errorf("the table lists %s, which has 2 decimals", code)
		}
	}
	for code, digits := range table {
		if CurrencyDigits(code) != digits || digits == 2 {
			t.Errorf("the table has %s = %d, CurrencyDigits says %d", code, digits, CurrencyDigits(code))
		}
	}
}

func TestVoucher_CheckDecidesInTheReservesOrderOfRules(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	v := Voucher{Code: "V", DiscountType: DiscountPercent, DiscountPercent: 10, Currency: "USD", MinOrderAmount: 100,
		PerUserLimit: 1, StartsAt: start, EndsAt: start.Add(time.Hour)}
	left := func(n int64) *int64 { return &n }
	in := start.Add(time.Minute)
	for _, tc := range []struct {
		desc     string
		now      time.Time
		amount   int64
		currency string
		a        Availability
		want     ErrorCode
		discount int64
	}{
		{"a success", in, 1999, "", Availability{Remaining: 1, BudgetLeft: left(199)}, "", 199},
		{"not eligible before all else", start.Add(-time.Second), 1999, "", Availability{CustomerUses: 1}, NotEligible, 0},
		{"another currency", in, 1999, "EUR", Availability{Remaining: 1}, NotEligible, 0},
		{"at the limit before sold out", in, 1999, "", Availability{CustomerUses: 1}, AlreadyUsed, 0},
		{"sold out before the budget", in, 1999, "", Availability{BudgetLeft: left(0)}, OutOfStock, 0},
		{"the budget", in, 1999, "", Availability{Remaining: 1, BudgetLeft: left(198)}, BudgetExhausted, 0},
		{"no budget", in, 1999, "", Availability{Remaining: 1}, "", 199},
	} {
		d, err := v.Check(tc.now, CheckRequest{Code: "V", CustomerID: 1, OrderAmount: tc.amount, Currency: tc.currency}, tc.a)
		if ErrorCodeOf(err) != tc.want || d != tc.discount {
			t.Errorf("%s: %d, %v; want %d, %q", tc.desc, d, err, tc.discount, tc.want)
		}
	}
}
