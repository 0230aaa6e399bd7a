package gate_test

import (
	"context"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// extension is a raise of a voucher's total from old to new, its end kept.
func extension(code string, old, new int, ends time.Time) voucher.GateExtension {
	return voucher.GateExtension{Code: code, OldTotal: old, NewTotal: new, OldEndsAt: ends, NewEndsAt: ends, ExpireAt: voucher.GateExpireAt(ends)}
}

func extend(t *testing.T, g interface {
	Extend(context.Context, voucher.GateExtension) (bool, error)
}, x voucher.GateExtension, want bool) {
	t.Helper()
	got, err := g.Extend(context.Background(), x)
	if err != nil || got != want {
		t.Fatalf("Extend(%+v) = %v, %v; want %v", x, got, err, want)
	}
}

// TestExtend_RaisesTheStockByTheDifferenceOnce: a raise adds exactly the
// difference to the stock; the same raise again, an older one arriving
// late, or a gate loaded from a snapshot that holds the new total already,
// add nothing more; and a raise made while nothing was loaded is added to a
// snapshot read before it but installed after.
func TestExtend_RaisesTheStockByTheDifferenceOnce(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	ends := time.Now().Add(time.Hour)

	code := newCode(t)
	snap := snapshot(code, 0, 1) // sold out at 10
	snap.Total = 10
	load(t, g, snap)
	extend(t, g, extension(code, 10, 15, ends), true)
	if got := remaining(t, g, code); got != 5 {
		t.Fatalf("after raising 10 to 15: %d remaining, want 5", got)
	}
	extend(t, g, extension(code, 10, 15, ends), true) // a retry
	extend(t, g, extension(code, 10, 12, ends), true) // an older raise, late
	if got := remaining(t, g, code); got != 5 {
		t.Errorf("after a retried and a late raise: %d remaining, want still 5", got)
	}
	extend(t, g, extension(code, 15, 20, ends), true)
	if got := remaining(t, g, code); got != 10 {
		t.Errorf("after raising 15 to 20: %d remaining, want 10", got)
	}

	// Loaded from a snapshot read after the change: it holds 15 already.
	after := newCode(t)
	snap = snapshot(after, 5, 1)
	snap.Total = 15
	load(t, g, snap)
	extend(t, g, extension(after, 10, 15, ends), true)
	if got := remaining(t, g, after); got != 5 {
		t.Errorf("a gate loaded with the new total, then told of the raise: %d remaining, want 5", got)
	}

	// Nothing loaded at the raise; the snapshot was read before it.
	late := newCode(t)
	extend(t, g, extension(late, 10, 15, ends), false)
	snap = snapshot(late, 0, 1)
	snap.Total = 10
	load(t, g, snap)
	if got := remaining(t, g, late); got != 5 {
		t.Errorf("a snapshot of the old total installed after the raise: %d remaining, want 5", got)
	}
	extend(t, g, extension(late, 10, 15, ends), true)
	if got := remaining(t, g, late); got != 5 {
		t.Errorf("the raise told again after that load: %d remaining, want still 5", got)
	}
}

// TestExtend_MovesTheExpiryLater: the gate's keys, the hashes beside its
// orders included, live until a week after the new end.
func TestExtend_MovesTheExpiryLater(t *testing.T) {
	t.Parallel()
	g, rdb := newGate(t)
	code := newCode(t)
	ends := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	snap := snapshot(code, 3, 1)
	snap.Total, snap.ExpireAt = 3, voucher.GateExpireAt(ends)
	load(t, g, snap)
	// The hashes load.lua gives the orders hash's deadline (a campaign's
	// codes, the orders' periods and own discounts) move with it.
	ctx := context.Background()
	with := []string{"codes", "ordercodes", "orderperiods", "orderdiscounts"}
	for _, key := range with {
		name := "voucher:{" + code + "}:" + key
		if err := rdb.HSet(ctx, name, "x", "1").Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.PExpireAt(ctx, name, voucher.GateExpireAt(ends)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	later := ends.Add(48 * time.Hour)
	extend(t, g, voucher.GateExtension{Code: code, OldTotal: 3, NewTotal: 3, OldEndsAt: ends, NewEndsAt: later, ExpireAt: voucher.GateExpireAt(later)}, true)
	for _, key := range append([]string{"stock", "meta"}, with...) {
		at, err := rdb.PExpireTime(context.Background(), "voucher:{"+code+"}:"+key).Result()
		if err != nil || at.Milliseconds() != voucher.GateExpireAt(later).UnixMilli() {
			t.Errorf("%s expires at %v (%v), want %v", key, at, err, voucher.GateExpireAt(later))
		}
	}
	if got := remaining(t, g, code); got != 3 {
		t.Errorf("the stock after moving the end: %d, want 3", got)
	}
}

// TestExtend_ARebuildFromASnapshotBeforeTheRaiseKeepsIt: an operator's
// rebuild whose snapshot was read before the raise, installed after it,
// still holds the raised stock.
func TestExtend_ARebuildFromASnapshotBeforeTheRaiseKeepsIt(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	ends := time.Now().Add(time.Hour)
	code := newCode(t)
	old := snapshot(code, 0, 1)
	old.Total = 10
	load(t, g, old)
	extend(t, g, extension(code, 10, 15, ends), true)
	if err := g.Replace(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if got := remaining(t, g, code); got != 5 {
		t.Errorf("a rebuild from the snapshot read before the raise: %d remaining, want 5", got)
	}
	fresh := snapshot(code, 5, 1)
	fresh.Total = 15
	if err := g.Replace(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	if got := remaining(t, g, code); got != 5 {
		t.Errorf("a rebuild from a snapshot after the raise: %d remaining, want 5", got)
	}
}
