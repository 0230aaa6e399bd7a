package gate_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// An order's own discount (appliesTo: taken on the eligible items, not the
// amount): the admitting script keeps it (voucher:{CODE}:orderdiscounts),
// every give-back returns exactly it whatever the caller passes, and an
// order without a record (written before it was kept, or whose discount is
// its amount's) gives back what the caller passes, as before.

func keeping(r voucher.ReserveRequest) voucher.ReserveRequest {
	r.GateKeepsDiscount = true
	return r
}

func budgetLeft(t *testing.T, g interface {
	Snapshot(context.Context, string) (voucher.GateSnapshot, bool, error)
}, code string, want int64) {
	t.Helper()
	s, ok, err := g.Snapshot(context.Background(), code)
	if err != nil || !ok || s.Budget == nil || *s.Budget != want {
		t.Fatalf("budget left = %v (%v, %v), want %d", deref(s.Budget), ok, err, want)
	}
}

func orderDiscount(t *testing.T, s voucher.GateSnapshot, orderID string) *int64 {
	t.Helper()
	for _, o := range s.Orders {
		if o.OrderID == orderID {
			return o.Discount
		}
	}
	t.Fatalf("snapshot holds no order %s", orderID)
	return nil
}

func TestDiscount_KeptWithTheOrderAndGivenBackExactlyOnRelease(t *testing.T) {
	t.Parallel()
	g, rdb := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	snap := snapshot(code, 5, 5)
	budget := int64(1000)
	snap.Budget = &budget
	load(t, g, snap)

	// An order of 500 whose eligible items give a discount of 70.
	if v, err := g.Reserve(ctx, code, 5, 70, keeping(req(code, "items", 1, 500))); err != nil || v != voucher.GateAdmitted {
		t.Fatalf("Reserve = %q, %v", v, err)
	}
	// One whose discount is its amount's: nothing kept.
	if v, err := g.Reserve(ctx, code, 5, 50, req(code, "plain", 2, 500)); err != nil || v != voucher.GateAdmitted {
		t.Fatalf("Reserve = %q, %v", v, err)
	}
	budgetLeft(t, g, code, 880)
	if d, err := rdb.HGet(ctx, "voucher:{"+code+"}:orderdiscounts", "items").Result(); err != nil || d != "70" {
		t.Fatalf("kept discount of items = %q, %v; want 70", d, err)
	}
	if n, _ := rdb.HExists(ctx, "voucher:{"+code+"}:orderdiscounts", "plain").Result(); n {
		t.Fatal("a discount that is the amount's was kept")
	}
	// Same deadline as the orders hash.
	ordersTTL, _ := rdb.PTTL(ctx, "voucher:{"+code+"}:orders").Result()
	discountsTTL, _ := rdb.PTTL(ctx, "voucher:{"+code+"}:orderdiscounts").Result()
	if discountsTTL <= 0 || discountsTTL > ordersTTL+time.Second || discountsTTL < ordersTTL-time.Minute {
		t.Fatalf("orderdiscounts expires in %v, the orders in %v", discountsTTL, ordersTTL)
	}
	s := snapshotOf(t, g, code)
	if d := orderDiscount(t, s, "items"); d == nil || *d != 70 {
		t.Fatalf("Snapshot's discount of items = %v, want 70", deref(d))
	}
	if d := orderDiscount(t, s, "plain"); d != nil {
		t.Fatalf("Snapshot's discount of plain = %d, want none", *d)
	}
	if o, ok, err := g.Order(ctx, code, "items"); err != nil || !ok || o.Discount == nil || *o.Discount != 70 {
		t.Fatalf("Order(items) = %+v, %v, %v; want discount 70", o, ok, err)
	}

	// The caller passes its amount's discount (50): the kept 70 goes back.
	release(t, g, code, "items", true)
	budgetLeft(t, g, code, 950)
	release(t, g, code, "items", false) // never twice
	budgetLeft(t, g, code, 950)
	// Without a record, what the caller passes, as before.
	if ok, err := g.Release(ctx, code, "plain", 50); err != nil || !ok {
		t.Fatalf("Release(plain) = %v, %v", ok, err)
	}
	budgetLeft(t, g, code, 1000)

	// Forget deletes the record with the order.
	if v, err := g.Reserve(ctx, code, 5, 30, keeping(req(code, "gone", 3, 500))); err != nil || v != voucher.GateAdmitted {
		t.Fatalf("Reserve = %q, %v", v, err)
	}
	budgetLeft(t, g, code, 970)
	if ok, err := g.Forget(ctx, code, "gone", 50); err != nil || !ok {
		t.Fatalf("Forget = %v, %v", ok, err)
	}
	budgetLeft(t, g, code, 1000)
	if n, _ := rdb.HExists(ctx, "voucher:{"+code+"}:orderdiscounts", "gone").Result(); n {
		t.Fatal("a forgotten order's discount stayed")
	}
}

func TestDiscount_LoadWritesTheOrdersDiscountsAndOldRecordsStillParse(t *testing.T) {
	t.Parallel()
	g, rdb := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	snap := snapshot(code, 5, 5)
	budget := int64(900)
	snap.Budget = &budget
	seventy := int64(70)
	snap.Customers = map[int64]int{1: 1, 2: 1}
	snap.Orders = []voucher.GateOrder{
		{OrderID: "kept", CustomerID: 1, OrderAmount: 500, Discount: &seventy},
		{OrderID: "old", CustomerID: 2, OrderAmount: 500},
	}
	load(t, g, snap)
	s := snapshotOf(t, g, code)
	if d := orderDiscount(t, s, "kept"); d == nil || *d != 70 {
		t.Fatalf("loaded discount of kept = %v, want 70", deref(d))
	}
	if d := orderDiscount(t, s, "old"); d != nil {
		t.Fatalf("loaded discount of old = %d, want none", *d)
	}
	release(t, g, code, "kept", true) // passes 0: the record's 70 goes back
	budgetLeft(t, g, code, 970)

	// A record written before discounts were kept, in every layout, parses
	// with no discount and gives back what the caller passes.
	legacy := newCode(t)
	load(t, g, snapshot(legacy, 5, 5))
	created := time.Now().UnixMilli()
	for id, value := range map[string]string{
		"sync": "4:300", "released": "4:300:released",
		"kafka":  "4:300:live:" + itoa(created) + ":" + itoa(created+60000),
		"placed": "4:300:confirmed:" + itoa(created) + ":" + itoa(created+60000) + ":7",
	} {
		if err := rdb.HSet(ctx, "voucher:{"+legacy+"}:orders", id, value).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range snapshotOf(t, g, legacy).Orders {
		if o.Discount != nil || o.CustomerID != 4 || o.OrderAmount != 300 {
			t.Fatalf("legacy order %+v", o)
		}
	}
}

func TestDiscount_KafkaAdmissionKeepsItAndAVoidGivesItBack(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	snap := snapshot(code, 5, 5)
	budget := int64(1000)
	snap.Budget = &budget
	now := time.Now()
	epoch := "e-" + code
	terms := voucher.GateTerms{Epoch: epoch, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), DatabaseNow: now, TTL: 15 * time.Minute, Lease: 5 * time.Second}
	if ok, err := g.Recover(ctx, snap, terms, "load"); err != nil || !ok {
		t.Fatalf("Recover = %v, %v", ok, err)
	}
	a, err := g.Admit(ctx, code, keeping(req(code, "k1", 1, 500)), 70)
	if err != nil || a.Verdict != voucher.GateAdmitted || a.Order.Discount == nil || *a.Order.Discount != 70 {
		t.Fatalf("Admit = %+v, %v; want ADMITTED with discount 70", a, err)
	}
	budgetLeft(t, g, code, 930)
	// A retry is answered with the kept discount.
	if _, _, err := g.Settle(ctx, code, voucher.SettleFinalize, a.Order, a.Epoch, 0); err != nil {
		t.Fatal(err)
	}
	d, err := g.Admit(ctx, code, keeping(req(code, "k1", 1, 500)), 70)
	if err != nil || d.Verdict != voucher.GateDuplicate || d.Order.Discount == nil || *d.Order.Discount != 70 {
		t.Fatalf("Admit again = %+v, %v; want DUPLICATE with discount 70", d, err)
	}
	// The confirm's answer carries it too.
	if dec, o, err := g.Confirm(ctx, code, "k1"); err != nil || dec != voucher.DecisionConfirmedNow || o.Discount == nil || *o.Discount != 70 {
		t.Fatalf("Confirm = %q, %+v, %v; want CONFIRMED_NOW with discount 70", dec, o, err)
	}

	// A pending admission given back (forget) returns the kept discount,
	// whatever the caller passes.
	b, err := g.Admit(ctx, code, keeping(req(code, "k2", 2, 500)), 40)
	if err != nil || b.Verdict != voucher.GateAdmitted {
		t.Fatalf("Admit(k2) = %+v, %v", b, err)
	}
	budgetLeft(t, g, code, 890)
	if ans, _, err := g.Settle(ctx, code, voucher.SettleForget, b.Order, b.Epoch, 50); err != nil || ans != voucher.SettleOK {
		t.Fatalf("forget = %q, %v", ans, err)
	}
	budgetLeft(t, g, code, 930)
	// Admitted afresh without appliesTo's difference: the old record goes.
	c, err := g.Admit(ctx, code, req(code, "k2", 2, 500), 50)
	if err != nil || c.Verdict != voucher.GateAdmitted || c.Order.Discount != nil {
		t.Fatalf("Admit(k2) afresh = %+v, %v; want ADMITTED without a kept discount", c, err)
	}
	budgetLeft(t, g, code, 880)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
