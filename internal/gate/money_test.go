package gate_test

import (
	"context"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// roomOf reads the room the gate holds for a voucher (voucher.MoneyRoom).
func roomOf(t *testing.T, snap voucher.GateSnapshot) int64 {
	t.Helper()
	if snap.Room == nil {
		t.Fatalf("the gate of %s keeps no room", snap.Code)
	}
	return *snap.Room
}

// The gate keeps budgetUsed's room below voucher.MaxMoney with the stock:
// a discount past it is SUM_TOO_LARGE, before the budget; amounts next to
// 2^53 are taken and given back exactly (Lua's doubles never round them).
func TestReserve_TheRoomBelowMaxMoneyIsKeptExactly(t *testing.T) {
	g, _ := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	snap := snapshot(code, 5, 5)
	room, budget := voucher.MaxMoney, voucher.MaxMoney // a budget of MaxMoney, nothing held
	snap.Room, snap.Budget = &room, &budget
	load(t, g, snap)
	take := func(order string, discount int64, want voucher.GateVerdict) {
		t.Helper()
		if got, err := g.Reserve(ctx, code, 5, discount, req(code, order, 7, discount)); err != nil || got != want {
			t.Fatalf("Reserve(%s, discount %d) = %q, %v; want %q", order, discount, got, err, want)
		}
	}
	take("a", voucher.MaxMoney-1, voucher.GateAdmitted)
	if got := roomOf(t, snapshotOf(t, g, code)); got != 1 {
		t.Fatalf("room after taking MaxMoney-1 = %d, want 1", got)
	}
	take("b", 2, voucher.GateSumTooLarge) // the sum first, though the budget cannot cover it either
	take("c", 1, voucher.GateAdmitted)
	s := snapshotOf(t, g, code)
	if roomOf(t, s) != 0 || *s.Budget != 0 {
		t.Fatalf("room %d, budget %d after reaching MaxMoney; want 0 and 0", roomOf(t, s), *s.Budget)
	}
	take("d", 0, voucher.GateAdmitted) // a discount of 0 always fits
	if ok, err := g.Release(ctx, code, "a", voucher.MaxMoney-1); err != nil || !ok {
		t.Fatalf("Release(a) = %v, %v", ok, err)
	}
	if got := roomOf(t, snapshotOf(t, g, code)); got != voucher.MaxMoney-1 {
		t.Fatalf("room after the release = %d, want MaxMoney-1", got)
	}
	a, loaded, err := g.Availability(ctx, code, "", 7)
	if err != nil || !loaded || a.Room == nil || *a.Room != voucher.MaxMoney-1 {
		t.Fatalf("Availability = %+v, %v, %v; want room MaxMoney-1", a, loaded, err)
	}

	// Without a budget the room still bounds the sum.
	free := newCode(t)
	snap = snapshot(free, 5, 5)
	small := int64(100)
	snap.Room = &small
	load(t, g, snap)
	if got, err := g.Reserve(ctx, free, 5, 101, req(free, "x", 1, 101)); err != nil || got != voucher.GateSumTooLarge {
		t.Fatalf("a discount of 101 with a room of 100 = %q, %v; want SUM_TOO_LARGE", got, err)
	}
	if got, err := g.Reserve(ctx, free, 5, 100, req(free, "y", 1, 100)); err != nil || got != voucher.GateAdmitted {
		t.Fatalf("a discount of 100 with a room of 100 = %q, %v; want ADMITTED", got, err)
	}
}

// In kafka mode admit.lua refuses a discount past the room before the 201,
// and a void gives the room back.
func TestAdmit_ADiscountPastTheRoomIsRefusedBeforeAnyUseIsTaken(t *testing.T) {
	g, _ := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	room := int64(1000)
	loadKafkaGate(t, g, voucher.GateSnapshot{Code: code, Remaining: 5, PerUserLimit: 5, Room: &room}, 15*time.Minute)
	admit := func(order string, discount int64, want voucher.GateVerdict) voucher.Admission {
		t.Helper()
		a, err := g.Admit(ctx, code, req(code, order, 1, discount), discount)
		if err != nil || a.Verdict != want {
			t.Fatalf("Admit(%s, discount %d) = %+v, %v; want %q", order, discount, a, err, want)
		}
		return a
	}
	admit("a", 1001, voucher.GateSumTooLarge)
	a := admit("b", 1000, voucher.GateAdmitted)
	admit("c", 1, voucher.GateSumTooLarge)
	s := snapshotOf(t, g, code)
	if roomOf(t, s) != 0 || s.Remaining != 4 {
		t.Fatalf("after admitting 1,000: room %d, remaining %d; want 0 and 4", roomOf(t, s), s.Remaining)
	}
	if ans, _, err := g.Settle(ctx, code, voucher.SettleForget, a.Order, a.Epoch, 1000); err != nil || ans != voucher.SettleOK {
		t.Fatalf("Settle(forget) = %q, %v", ans, err)
	}
	if got := roomOf(t, snapshotOf(t, g, code)); got != 1000 {
		t.Fatalf("room after the forget = %d, want 1000", got)
	}
}
