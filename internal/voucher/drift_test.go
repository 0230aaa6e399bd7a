package voucher

import (
	"slices"
	"testing"
	"time"
)

// codesDiffering counts the gate's orders in flight and the database's
// orders the gate released already, so a sale in motion differs nowhere;
// what is left over is named, sorted, at most maxCodesDiffering codes.
func TestCodesDiffering_CountsOrdersInFlightAndReleasedSince(t *testing.T) {
	db := GateSnapshot{
		Codes:      map[string]int{"A": 1, "B": 2, "R": 1},
		OrderCodes: map[string]string{"o1": "A", "o2": "B", "o3": "B", "r1": "R"},
	}
	gate := GateSnapshot{
		// o4 on C is in flight (not in the database yet); r1 was released
		// at the gate, the database not told yet.
		Codes:      map[string]int{"A": 1, "B": 2, "C": 1},
		OrderCodes: map[string]string{"o1": "A", "o2": "B", "o3": "B", "o4": "C"},
	}
	if got := codesDiffering(db, gate, []string{"o4"}, []string{"r1"}); len(got) != 0 {
		t.Errorf("a sale in motion: %v differ, want none", got)
	}
	gate.Codes["B"] = 1     // forgot a use the database holds
	gate.Codes["Z"] = 1     // counts a use the database does not
	delete(gate.Codes, "C") // lost the in-flight order's use
	if got, want := codesDiffering(db, gate, []string{"o4"}, []string{"r1"}), []string{"B", "C", "Z"}; !slices.Equal(got, want) {
		t.Errorf("codesDiffering = %v, want %v", got, want)
	}
	many := GateSnapshot{Codes: map[string]int{}}
	for i := range maxCodesDiffering + 10 {
		many.Codes[string(rune('a'+i%26))+string(rune('a'+i/26))] = 1
	}
	if got := codesDiffering(GateSnapshot{}, many, nil, nil); len(got) != maxCodesDiffering || !slices.IsSorted(got) {
		t.Errorf("%d codes named (sorted %v), want the first %d", len(got), slices.IsSorted(got), maxCodesDiffering)
	}
}

// periodsDiffering counts the gate's orders in flight (their periods as the
// gate recorded them) and the database's orders the gate released already,
// so a sale in motion differs nowhere; what is left over is named.
func TestPeriodsDiffering_CountsOrdersInFlightAndReleasedSince(t *testing.T) {
	day := GatePeriod{Limit: 0, Scope: ScopeCustomer, Period: PeriodDay, Start: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), Max: 3}
	week := GatePeriod{Limit: 1, Scope: ScopeVoucher, Period: PeriodWeek, Start: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), Max: 10}
	db := GateSnapshot{
		Orders: []GateOrder{{OrderID: "o1", CustomerID: 7}, {OrderID: "r1", CustomerID: 8}},
		Periods: []GatePeriodCount{
			{GatePeriod: day, Uses: map[int64]int{7: 1, 8: 1}},
			{GatePeriod: week, Uses: map[int64]int{0: 2}},
		},
		OrderPeriods: map[string][]int{"o1": {0, 1}, "r1": {0, 1}},
	}
	// o4 of customer 7 is in flight (at the gate only); r1 was released at
	// the gate, the database not told yet.
	gateSnap := GateSnapshot{Orders: []GateOrder{{OrderID: "o1", CustomerID: 7}, {OrderID: "o4", CustomerID: 7}}}
	gate := []GatePeriodCount{
		{GatePeriod: day, Uses: map[int64]int{7: 2}},
		{GatePeriod: week, Uses: map[int64]int{0: 2}},
	}
	held := map[string][]int{"o4": {0, 1}}
	if got := periodsDiffering(db, gateSnap, gate, held, []string{"o4"}, []string{"r1"}); len(got) != 0 {
		t.Errorf("a sale in motion: %v differ, want none", got)
	}
	gate[0].Uses[9] = 1 // a use the database does not hold
	gate[1].Uses[0] = 1 // forgot one the database holds
	want := []string{
		"CUSTOMER DAY 2026-12-06T00:00:00Z customer 9: gate 1, database 0",
		"VOUCHER WEEK 2026-11-30T00:00:00Z customer 0: gate 1, database 2",
	}
	if got := periodsDiffering(db, gateSnap, gate, held, []string{"o4"}, []string{"r1"}); !slices.Equal(got, want) {
		t.Errorf("periodsDiffering = %q, want %q", got, want)
	}
}

// discountsDiffering compares the discounts of the orders both sides hold
// live: a kept discount (appliesTo) against the row's, an order without
// one at its amount's; in-flight, released, void and lost orders are not
// compared.
func TestDiscountsDiffering_ComparesTheKeptDiscountsOfLiveOrders(t *testing.T) {
	v := Voucher{DiscountType: DiscountFixed, DiscountAmount: 1000}
	d := func(n int64) *int64 { return &n }
	db := GateSnapshot{Orders: []GateOrder{
		{OrderID: "kept", OrderAmount: 5000, Discount: d(300)},
		{OrderID: "plain", OrderAmount: 5000},
		{OrderID: "lostkept", OrderAmount: 5000, Discount: d(300)},
		{OrderID: "readmitted", OrderAmount: 5000},
	}}
	gate := GateSnapshot{Orders: []GateOrder{
		{OrderID: "kept", OrderAmount: 5000, Discount: d(300)},
		{OrderID: "plain", OrderAmount: 5000},
		{OrderID: "inflight", OrderAmount: 5000, Discount: d(200)},
		{OrderID: "lostkept", OrderAmount: 5000},
		// apply_check.lua keeps a re-admission's discount even when it is
		// its amount's: the same figure.
		{OrderID: "readmitted", OrderAmount: 5000, Discount: d(1000)},
	}}
	if !keepsDiscounts(db, gate) || keepsDiscounts(GateSnapshot{Orders: []GateOrder{{OrderID: "x"}}}, GateSnapshot{}) {
		t.Error("keepsDiscounts: want true with kept discounts, false without")
	}
	if got, want := discountsDiffering(v, db, gate), []string{"order lostkept: gate 1000, database 300"}; !slices.Equal(got, want) {
		t.Errorf("discountsDiffering = %v, want %v", got, want)
	}
	gate.Orders[0].Released = true // released at the gate, the database not told yet
	gate.Orders[1].Discount = d(999)
	if got, want := discountsDiffering(v, db, gate), []string{"order lostkept: gate 1000, database 300", "order plain: gate 999, database 1000"}; !slices.Equal(got, want) {
		t.Errorf("discountsDiffering = %v, want %v", got, want)
	}
}
