package voucher

import (
	"strings"
	"testing"
	"time"
)

func TestPeriodBounds_CalendarPeriodsInTheZoneWeeksFromMonday(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc       string
		at         time.Time
		loc        *time.Location
		period     LimitPeriod
		start, end string
	}{
		{"a day in UTC", time.Date(2026, 12, 6, 17, 0, 0, 0, time.UTC), time.UTC, PeriodDay, "2026-12-06T00:00:00Z", "2026-12-07T00:00:00Z"},
		{"23:30 UTC is the next day in Berlin", time.Date(2026, 12, 6, 23, 30, 0, 0, time.UTC), berlin, PeriodDay, "2026-12-06T23:00:00Z", "2026-12-07T23:00:00Z"},
		{"a Sunday is in the week from Monday", time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC), time.UTC, PeriodWeek, "2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z"},
		{"a Monday starts its week", time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), time.UTC, PeriodWeek, "2026-12-07T00:00:00Z", "2026-12-14T00:00:00Z"},
		{"December ends at January", time.Date(2026, 12, 31, 23, 59, 0, 0, time.UTC), time.UTC, PeriodMonth, "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"the day clocks go forward is 23 hours", time.Date(2026, 3, 29, 12, 0, 0, 0, berlin), berlin, PeriodDay, "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"},
	} {
		start, end := PeriodBounds(tc.at, tc.loc, tc.period)
		if got := start.UTC().Format(time.RFC3339); got != tc.start {
			t.Errorf("%s: start %s, want %s", tc.desc, got, tc.start)
		}
		if got := end.UTC().Format(time.RFC3339); got != tc.end {
			t.Errorf("%s: end %s, want %s", tc.desc, got, tc.end)
		}
	}
}

func TestNewVoucher_RestrictionsAreValidatedWithTheirField(t *testing.T) {
	t.Parallel()
	base := NewVoucher{Code: "A", DiscountAmount: 5, TotalLimit: 10, PerUserLimit: 1,
		StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)}
	day := PeriodLimit{Scope: ScopeCustomer, Period: PeriodDay, Max: 1}
	for _, tc := range []struct {
		desc  string
		r     Restrictions
		field string
	}{
		{"max under 1", Restrictions{PeriodLimits: []PeriodLimit{{Scope: ScopeVoucher, Period: PeriodDay, Max: 0}}}, "periodLimits"},
		{"more than 5 limits", Restrictions{PeriodLimits: []PeriodLimit{day, day, day, day, day, day}}, "periodLimits"},
		{"twice the same scope and period", Restrictions{PeriodLimits: []PeriodLimit{day, {Scope: ScopeCustomer, Period: PeriodDay, Max: 2}}}, "periodLimits"},
		{"an unknown scope", Restrictions{PeriodLimits: []PeriodLimit{{Scope: "SHOP", Period: PeriodDay, Max: 1}}}, "periodLimits"},
		{"an unknown time zone", Restrictions{TimeZone: "Mars/Olympus"}, "timeZone"},
		{"Local is no zone", Restrictions{TimeZone: "Local"}, "timeZone"},
		{"a segment in capitals", Restrictions{EligibleSegments: []string{"VIP"}}, "eligibleSegments"},
		{"an empty appliesTo", Restrictions{AppliesTo: &AppliesTo{}}, "appliesTo"},
		{"a SKU with a control character", Restrictions{AppliesTo: &AppliesTo{SKUs: []string{"a\x01"}}}, "appliesTo"},
	} {
		n := base
		n.Restrictions = tc.r
		err := n.Validate()
		if e := AsError(err); err == nil || e.Code != InvalidInput || e.Field != tc.field {
			t.Errorf("%s: %v, want INVALID_INPUT on %s", tc.desc, err, tc.field)
		}
	}
	n := base
	n.Restrictions = Restrictions{PeriodLimits: []PeriodLimit{day, {Scope: ScopeVoucher, Period: PeriodMonth, Max: 100}}, TimeZone: "America/New_York",
		EligibleSegments: []string{"vip", "tier:gold", "b2b_eu-1"}, AppliesTo: &AppliesTo{SKUs: []string{"SKU-1"}, Categories: []string{"shoes"}}}
	if err := n.Validate(); err != nil {
		t.Errorf("valid restrictions: %v", err)
	}
}

func TestReserveRequest_SegmentsAndItemsAreValidatedWithTheirField(t *testing.T) {
	t.Parallel()
	many := make([]LineItem, MaxItems+1)
	for i := range many {
		many[i] = LineItem{SKU: "s", Quantity: 1, UnitAmount: 1}
	}
	for _, tc := range []struct {
		desc  string
		r     ReserveRequest
		field string
	}{
		{"a segment with a space", ReserveRequest{OrderAmount: 10, CustomerSegments: []string{"v ip"}}, "customerSegments"},
		{"a segment of 65 characters", ReserveRequest{OrderAmount: 10, CustomerSegments: []string{strings.Repeat("a", 65)}}, "customerSegments"},
		{"items that do not add up", ReserveRequest{OrderAmount: 10, Items: []LineItem{{SKU: "a", Quantity: 2, UnitAmount: 4}}}, "items"},
		{"more than 100 items", ReserveRequest{OrderAmount: MaxItems + 1, Items: many}, "items"},
		{"an empty SKU", ReserveRequest{OrderAmount: 0, Items: []LineItem{{SKU: "", Quantity: 1}}}, "items"},
		{"a SKU that is not UTF-8", ReserveRequest{OrderAmount: 1, Items: []LineItem{{SKU: "\xff", Quantity: 1, UnitAmount: 1}}}, "items"},
		{"a quantity of 0", ReserveRequest{OrderAmount: 0, Items: []LineItem{{SKU: "a", Quantity: 0, UnitAmount: 1}}}, "items"},
		{"a line past Money", ReserveRequest{OrderAmount: 10, Items: []LineItem{{SKU: "a", Quantity: 2, UnitAmount: MaxMoney}}}, "items"},
	} {
		r := tc.r
		r.Code, r.CustomerID, r.OrderID = "A", 1, "o-1"
		err := r.Validate()
		if e := AsError(err); err == nil || e.Code != InvalidInput || e.Field != tc.field {
			t.Errorf("%s: %v, want INVALID_INPUT on %s", tc.desc, err, tc.field)
		}
	}
}

func TestDiscount_AppliesToTakesTheEligibleSubtotalAndSegmentsDecideEligibility(t *testing.T) {
	t.Parallel()
	now := time.Now()
	items := []LineItem{{SKU: "shoe-1", Category: "shoes", Quantity: 2, UnitAmount: 3000}, {SKU: "sock-1", Category: "socks", Quantity: 1, UnitAmount: 4000}}
	fixed := Voucher{Code: "A", DiscountType: DiscountFixed, DiscountAmount: 10000, MinOrderAmount: 9000, TotalLimit: 10, PerUserLimit: 1,
		StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Hour), Currency: "USD",
		Restrictions: Restrictions{AppliesTo: &AppliesTo{Categories: []string{"shoes"}}, EligibleSegments: []string{"vip"}}}
	percent := fixed
	percent.DiscountType, percent.DiscountAmount, percent.DiscountPercent = DiscountPercent, 0, 10
	percent.AppliesTo = &AppliesTo{SKUs: []string{"sock-1"}}
	for _, tc := range []struct {
		desc string
		v    Voucher
		r    ReserveRequest
		want int64
		code ErrorCode
	}{
		{"FIXED is at most the eligible subtotal", fixed, ReserveRequest{OrderAmount: 10000, Items: items, CustomerSegments: []string{"vip"}}, 6000, ""},
		{"PERCENT is of the eligible subtotal", percent, ReserveRequest{OrderAmount: 10000, Items: items, CustomerSegments: []string{"new", "vip"}}, 400, ""},
		{"no eligible item", fixed, ReserveRequest{OrderAmount: 10000, Items: []LineItem{{SKU: "hat", Quantity: 1, UnitAmount: 10000}}, CustomerSegments: []string{"vip"}}, 0, NotEligible},
		{"no items", fixed, ReserveRequest{OrderAmount: 10000, CustomerSegments: []string{"vip"}}, 0, NotEligible},
		{"no segment of the voucher's", fixed, ReserveRequest{OrderAmount: 10000, Items: items, CustomerSegments: []string{"new"}}, 0, NotEligible},
		{"no segments", fixed, ReserveRequest{OrderAmount: 10000, Items: items}, 0, NotEligible},
		{"minOrderAmount on orderAmount", fixed, ReserveRequest{OrderAmount: 8000, Items: items[:1][:1], CustomerSegments: []string{"vip"}}, 0, NotEligible},
	} {
		r := tc.r
		r.Code = "A"
		err := tc.v.CheckEligible(now, r)
		if ErrorCodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %q", tc.desc, err, tc.code)
			continue
		}
		if err == nil {
			if got := tc.v.DiscountOf(r); got != tc.want {
				t.Errorf("%s: discount %d, want %d", tc.desc, got, tc.want)
			}
		}
	}
}

func TestCheck_AnswersPeriodLimitReachedAfterAlreadyUsedAndBeforeOutOfStock(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 17, 0, 0, 0, time.UTC)
	v := Voucher{Code: "A", DiscountType: DiscountFixed, DiscountAmount: 100, TotalLimit: 10, PerUserLimit: 2, Currency: "USD",
		StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Hour),
		Restrictions: Restrictions{TimeZone: "Europe/Berlin", PeriodLimits: []PeriodLimit{{Scope: ScopeVoucher, Period: PeriodDay, Max: 3}}}}
	c := CheckRequest{Code: "A", CustomerID: 1, OrderAmount: 500}
	if _, err := v.Check(now, c, Availability{Remaining: 0, CustomerUses: 2, PeriodUses: PeriodUses{3}}); ErrorCodeOf(err) != AlreadyUsed {
		t.Errorf("customer at their limit: %v, want ALREADY_USED", err)
	}
	_, err := v.Check(now, c, Availability{Remaining: 0, PeriodUses: PeriodUses{3}})
	if ErrorCodeOf(err) != PeriodLimitReached {
		t.Fatalf("period full and sold out: %v, want PERIOD_LIMIT_REACHED", err)
	}
	if want := time.Date(2026, 12, 6, 23, 0, 0, 0, time.UTC); !AsError(err).AvailableAt.Equal(want) {
		t.Errorf("availableAt %s, want %s (midnight in Berlin)", AsError(err).AvailableAt, want)
	}
	if _, err := v.Check(now, c, Availability{Remaining: 0, PeriodUses: PeriodUses{2}}); ErrorCodeOf(err) != OutOfStock {
		t.Errorf("period with room, sold out: %v, want OUT_OF_STOCK", err)
	}
	if d, err := v.Check(now, c, Availability{Remaining: 5, PeriodUses: PeriodUses{2}}); err != nil || d != 100 {
		t.Errorf("room everywhere: %d, %v", d, err)
	}
}

// TestPeriodsRefuseBeforeStock: the sold-out memory answers for a voucher
// only when no period limit can refuse before its stock or the customer's
// per-user limit does.
func TestPeriodsRefuseBeforeStock(t *testing.T) {
	limits := func(ls ...PeriodLimit) Voucher {
		return Voucher{PerUserLimit: 2, Restrictions: Restrictions{PeriodLimits: ls}}
	}
	for _, c := range []struct {
		v    Voucher
		want bool
	}{
		{limits(), false},
		{limits(PeriodLimit{ScopeCustomer, PeriodDay, 2}), false},
		{limits(PeriodLimit{ScopeCustomer, PeriodWeek, 5}), false},
		{limits(PeriodLimit{ScopeCustomer, PeriodDay, 1}), true},
		{limits(PeriodLimit{ScopeVoucher, PeriodDay, 100}), true},
		{limits(PeriodLimit{ScopeCustomer, PeriodMonth, 3}, PeriodLimit{ScopeVoucher, PeriodDay, 100}), true},
	} {
		if got := c.v.periodsRefuseBeforeStock(); got != c.want {
			t.Errorf("%v with perUserLimit 2: %v, want %v", c.v.PeriodLimits, got, c.want)
		}
	}
}
