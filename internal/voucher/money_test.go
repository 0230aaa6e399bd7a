package voucher

import (
	"math"
	"testing"
	"time"
)

// Every Money input of the domain is refused above MaxMoney, naming its field.
func TestMoneyInputs_AboveMaxMoneyAreInvalidInputOnTheirField(t *testing.T) {
	now := time.Now()
	fixed := NewVoucher{Code: "V", DiscountAmount: MaxMoney, MinOrderAmount: MaxMoney, BudgetAmount: ptr(MaxMoney),
		TotalLimit: 1, PerUserLimit: 1, StartsAt: now, EndsAt: now.Add(time.Minute)}
	percent := NewVoucher{Code: "V", DiscountType: DiscountPercent, DiscountPercent: 10, MaxDiscountAmount: ptr(MaxMoney),
		TotalLimit: 1, PerUserLimit: 1, StartsAt: now, EndsAt: now.Add(time.Minute)}
	for _, n := range []NewVoucher{fixed, percent} {
		if err := n.Validate(); err != nil {
			t.Fatalf("amounts of MaxMoney: %v", err)
		}
	}
	if err := (ReserveRequest{Code: "V", CustomerID: 1, OrderID: "o", OrderAmount: MaxMoney}).Validate(); err != nil {
		t.Fatalf("an orderAmount of MaxMoney: %v", err)
	}
	for _, over := range []int64{MaxMoney + 1, math.MaxInt64} {
		for _, tc := range []struct {
			field string
			n     NewVoucher
			edit  func(*NewVoucher)
		}{
			{"discountAmount", fixed, func(n *NewVoucher) { n.DiscountAmount = over }},
			{"minOrderAmount", fixed, func(n *NewVoucher) { n.MinOrderAmount = over }},
			{"budgetAmount", fixed, func(n *NewVoucher) { n.BudgetAmount = &over }},
			{"maxDiscountAmount", percent, func(n *NewVoucher) { n.MaxDiscountAmount = &over }},
		} {
			n := tc.n
			tc.edit(&n)
			if e := AsError(n.Validate()); e.Code != InvalidInput || e.Field != tc.field {
				t.Errorf("%s = %d: %v, want INVALID_INPUT on %s", tc.field, over, e, tc.field)
			}
			c := NewCampaign{Name: "c", CodeCount: 1, CodeLength: 8, UsesPerCode: 1, PerUserLimit: 1, Terms: n}
			if e := AsError(c.Validate()); e.Code != InvalidInput || e.Field != tc.field {
				t.Errorf("campaign %s = %d: %v, want INVALID_INPUT on %s", tc.field, over, e, tc.field)
			}
		}
		r := ReserveRequest{Code: "V", CustomerID: 1, OrderID: "o", OrderAmount: over}
		if e := AsError(r.Validate()); e.Code != InvalidInput || e.Field != "orderAmount" {
			t.Errorf("reserve orderAmount = %d: %v, want INVALID_INPUT on orderAmount", over, e)
		}
		c := CheckRequest{Code: "V", CustomerID: 1, OrderAmount: over}
		if e := AsError(c.Validate()); e.Code != InvalidInput || e.Field != "orderAmount" {
			t.Errorf("check orderAmount = %d: %v, want INVALID_INPUT on orderAmount", over, e)
		}
	}
}

// A discount that would take budgetUsed past MaxMoney is INVALID_INPUT on
// orderAmount, before the budget; the arithmetic never overflows, even for a
// budgetUsed stored above the bound before it existed.
func TestVoucher_BudgetRefusalKeepsTheSumWithinMaxMoney(t *testing.T) {
	budget := Voucher{Code: "V", BudgetAmount: ptr(MaxMoney)}
	none := Voucher{Code: "V"}
	for _, tc := range []struct {
		desc           string
		v              Voucher
		used, discount int64
		want           ErrorCode
	}{
		{"no budget, the sum reaches MaxMoney", none, MaxMoney - 10, 10, ""},
		{"no budget, one past MaxMoney", none, MaxMoney - 10, 11, InvalidInput},
		{"no budget, MaxMoney twice", none, MaxMoney, MaxMoney, InvalidInput},
		{"a budget of MaxMoney: the sum first", budget, MaxMoney - 10, 11, InvalidInput},
		{"a budget of MaxMoney, filled exactly", budget, MaxMoney - 10, 10, ""},
		{"a smaller budget", Voucher{Code: "V", BudgetAmount: ptr(int64(100))}, 90, 11, BudgetExhausted},
		{"a row stored past the bound takes nothing more", none, math.MaxInt64, 1, InvalidInput},
	} {
		err := tc.v.BudgetRefusal(tc.used, tc.discount)
		var got ErrorCode
		if err != nil {
			got = ErrorCodeOf(err)
		}
		if got != tc.want {
			t.Errorf("%s: %v, want %q", tc.desc, err, tc.want)
		}
		if tc.want == InvalidInput && AsError(err).Field != "orderAmount" {
			t.Errorf("%s: field %q, want orderAmount", tc.desc, AsError(err).Field)
		}
	}
}

func TestVoucher_CheckRefusesASumPastMaxMoneyBeforeTheBudget(t *testing.T) {
	start := time.Now().Add(-time.Minute)
	v := Voucher{Code: "V", DiscountAmount: 100, Currency: "USD", PerUserLimit: 1, StartsAt: start, EndsAt: start.Add(time.Hour)}
	c := CheckRequest{Code: "V", CustomerID: 1, OrderAmount: 1000}
	if _, err := v.Check(time.Now(), c, Availability{Remaining: 1, Room: ptr(int64(99)), BudgetLeft: ptr(int64(0))}); AsError(err).Code != InvalidInput || AsError(err).Field != "orderAmount" {
		t.Errorf("room 99 for a discount of 100: %v, want INVALID_INPUT on orderAmount", err)
	}
	if d, err := v.Check(time.Now(), c, Availability{Remaining: 1, Room: ptr(int64(100))}); err != nil || d != 100 {
		t.Errorf("room 100 for a discount of 100: %d, %v", d, err)
	}
}

func TestSumMoney_NeverWraps(t *testing.T) {
	if s, ok := SumMoney(MaxMoney-1, 1); !ok || s != MaxMoney {
		t.Errorf("MaxMoney-1 + 1 = %d, %v", s, ok)
	}
	for _, in := range [][]int64{{MaxMoney, 1}, {math.MaxInt64, math.MaxInt64}, {-1}, {MaxMoney + 1}} {
		if s, ok := SumMoney(in...); ok {
			t.Errorf("SumMoney(%v) = %d, want refused", in, s)
		}
	}
}

func ptr[T any](v T) *T { return &v }
