package gate_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"voucherd/internal/gate"
	"voucherd/internal/voucher"
)

// ms is a time as the gate keeps it (Unix milliseconds).
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }

func reserveTimed(t *testing.T, g *gate.Gate, limit int, r voucher.ReserveRequest, created, expires time.Time, want voucher.GateVerdict) {
	t.Helper()
	got, err := g.ReserveTimed(context.Background(), r.Code, limit, 0, r, created, expires)
	if err != nil || got != want {
		t.Fatalf("ReserveTimed(%s, %s) = %q, %v; want %q", r.Code, r.OrderID, got, err, want)
	}
}

func decide(t *testing.T, what string, d voucher.GateDecision, err error, want voucher.GateDecision) {
	t.Helper()
	if err != nil || d != want {
		t.Fatalf("%s = %q, %v; want %q", what, d, err, want)
	}
}

// kafkaLifecycle runs the kafka-mode scripts through one voucher's orders:
// the states, the decisions and the counts they leave.
func kafkaLifecycle(t *testing.T, g *gate.Gate, code string) {
	t.Helper()
	ctx := context.Background()
	now := ms(time.Now())
	created, expires := now, now.Add(15*time.Minute)
	load(t, g, snapshot(code, 5, 1))

	// Admitted with its times; the retry and the conflict as in sync mode.
	reserveTimed(t, g, 1, req(code, "a", 1, 100), created, expires, voucher.GateAdmitted)
	reserveTimed(t, g, 1, req(code, "a", 1, 100), created.Add(time.Second), expires, voucher.GateDuplicate)
	reserveTimed(t, g, 1, req(code, "a", 1, 101), created, expires, voucher.GateOrderConflict)
	o, ok, err := g.Order(ctx, code, "a")
	want := voucher.GateOrder{OrderID: "a", CustomerID: 1, OrderAmount: 100, CreatedAt: created, ExpiresAt: expires}
	if err != nil || !ok || !cmp.Equal(o, want) {
		t.Fatalf("Order(a) = %+v, %v, %v; want %+v (the first request's times)", o, ok, err, want)
	}
	if _, ok, err := g.Order(ctx, code, "nobody"); ok || err != nil {
		t.Fatalf("Order(nobody) = %v, %v; want not found", ok, err)
	}

	// Confirm: in time, once; then idempotent; release refused. The gate
	// decides on its own clock (Redis's TIME): "in time" is an expiresAt
	// ahead of it, "expired" one behind it.
	d, o, err := g.Confirm(ctx, code, "a")
	decide(t, "Confirm(a)", d, err, voucher.DecisionConfirmedNow)
	if !o.Confirmed || o.Released || o.Releasing || !o.ExpiresAt.Equal(expires) {
		t.Fatalf("confirmed order = %+v", o)
	}
	d, _, err = g.Confirm(ctx, code, "a")
	decide(t, "Confirm(a) again", d, err, voucher.DecisionConfirmed)
	d, _, err = g.MarkReleased(ctx, code, "a", false)
	decide(t, "MarkReleased(a) confirmed", d, err, voucher.DecisionConfirmed)
	d, _, err = g.MarkReleased(ctx, code, "a", true)
	decide(t, "expiry of a confirmed order", d, err, voucher.DecisionConfirmed)
	reserveTimed(t, g, 1, req(code, "a", 1, 100), created, expires, voucher.GateDuplicate)

	// Expired: confirm refused without a change; the sweep releases it once
	// due, and not before.
	past := now.Add(-time.Minute)
	reserveTimed(t, g, 1, req(code, "b", 2, 100), past.Add(-15*time.Minute), past, voucher.GateAdmitted)
	d, _, err = g.Confirm(ctx, code, "b")
	decide(t, "Confirm(b) past expiresAt", d, err, voucher.DecisionExpired)
	reserveTimed(t, g, 1, req(code, "b0", 5, 100), created, expires, voucher.GateAdmitted)
	d, _, err = g.MarkReleased(ctx, code, "b0", true)
	decide(t, "expiry of b0 before expiresAt", d, err, voucher.DecisionNotDue)
	d, o, err = g.MarkReleased(ctx, code, "b", true)
	decide(t, "expiry of b past expiresAt", d, err, voucher.DecisionReleasedNow)
	if !o.Releasing || o.Released {
		t.Fatalf("expired order = %+v, want releasing", o)
	}
	d, _, err = g.Confirm(ctx, code, "b")
	decide(t, "Confirm(b) once released", d, err, voucher.DecisionReleased)
	reserveTimed(t, g, 1, req(code, "b", 2, 100), past.Add(-15*time.Minute), past, voucher.GateReleased)

	// A release keeps its use until the database released the row (Release).
	reserveTimed(t, g, 1, req(code, "c", 3, 100), created, expires, voucher.GateAdmitted)
	before := snapshotOf(t, g, code)
	d, _, err = g.MarkReleased(ctx, code, "c", false)
	decide(t, "MarkReleased(c)", d, err, voucher.DecisionReleasedNow)
	d, _, err = g.MarkReleased(ctx, code, "c", false)
	decide(t, "MarkReleased(c) again", d, err, voucher.DecisionReleased)
	after := snapshotOf(t, g, code)
	if after.Remaining != before.Remaining || after.Customers[3] != 1 {
		t.Fatalf("after MarkReleased: remaining %d (was %d), customer 3 holds %d; want the use still held", after.Remaining, before.Remaining, after.Customers[3])
	}
	// The customer's use still counts: perUserLimit 1.
	reserveTimed(t, g, 1, req(code, "c2", 3, 100), created, expires, voucher.GateAlreadyUsed)
	release(t, g, code, "c", true)
	release(t, g, code, "c", false)
	release(t, g, code, "b", true)
	final := snapshotOf(t, g, code)
	if final.Remaining != before.Remaining+2 || final.Customers[3] != 0 || final.Customers[2] != 0 {
		t.Fatalf("after Release: %+v; want both uses back once", final)
	}
	reserveTimed(t, g, 1, req(code, "c2", 3, 100), created, expires, voucher.GateAdmitted)

	// Forget gives back a live order's use whatever its state.
	if ok, err := g.Forget(ctx, code, "c2", 0); err != nil || !ok {
		t.Fatalf("Forget(c2) = %v, %v", ok, err)
	}
	d, _, err = g.Confirm(ctx, code, "c2")
	decide(t, "Confirm of a forgotten order", d, err, voucher.DecisionUnknown)

	// A sync-mode order is left to the database.
	reserve(t, g, 1, req(code, "s", 4, 100), voucher.GateAdmitted)
	d, _, err = g.Confirm(ctx, code, "s")
	decide(t, "Confirm of a sync-mode order", d, err, voucher.DecisionLegacy)
	d, _, err = g.MarkReleased(ctx, code, "s", false)
	decide(t, "MarkReleased of a sync-mode order", d, err, voucher.DecisionLegacy)

	// An orderId claimed for one voucher is not another's.
	order := code + "-claimed"
	for _, step := range []struct {
		op, code, want string
	}{
		{"claim", code, code}, {"claim", code, code}, {"claim", "OTHER", code},
		{"unclaim", "OTHER", ""}, {"claim", "OTHER", code},
		{"unclaim", code, ""}, {"claim", "OTHER", "OTHER"},
	} {
		if step.op == "unclaim" {
			if err := g.UnclaimOrder(ctx, order, step.code); err != nil {
				t.Fatal(err)
			}
			continue
		}
		owner, server, err := g.ClaimOrder(ctx, order, step.code)
		if err != nil || owner != step.want {
			t.Fatalf("ClaimOrder(%s) = %q, %v; want %q", step.code, owner, err, step.want)
		}
		// The claim names the server it was read on (a run_id): a claim
		// found free on a server that lost its data proves nothing
		// (voucher.claimFence).
		if len(server) != 40 {
			t.Fatalf("ClaimOrder(%s) server = %q; want a run_id", step.code, server)
		}
	}
	if owner, ok, _, err := g.OrderOwner(ctx, order); err != nil || !ok || owner != "OTHER" {
		t.Fatalf("OrderOwner = %q, %v, %v; want OTHER", owner, ok, err)
	}
	if _, ok, _, err := g.OrderOwner(ctx, order+"-never"); err != nil || ok {
		t.Fatalf("OrderOwner of an unclaimed order = %v, %v", ok, err)
	}

	// Paused and not loaded.
	if err := g.Pause(ctx, code, 0); err != nil {
		t.Fatal(err)
	}
	d, _, err = g.Confirm(ctx, code, "a")
	decide(t, "Confirm while paused", d, err, voucher.DecisionPaused)
	d, _, err = g.MarkReleased(ctx, code, "a", false)
	decide(t, "MarkReleased while paused", d, err, voucher.DecisionPaused)
	if err := g.Unload(ctx, code); err != nil {
		t.Fatal(err)
	}
	if err := g.Replace(ctx, snapshot(code, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := g.Unload(ctx, code); err != nil {
		t.Fatal(err)
	}
	d, _, err = g.Confirm(ctx, code, "a")
	decide(t, "Confirm when not loaded", d, err, voucher.DecisionNotLoaded)
	d, _, err = g.MarkReleased(ctx, code, "a", true)
	decide(t, "expiry when not loaded", d, err, voucher.DecisionNotLoaded)
}

func TestKafkaScripts_DecideConfirmReleaseAndExpiryAtTheGate(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	kafkaLifecycle(t, g, newCode(t))
}

func TestKafkaScripts_LoadKeepsStatesAndTimes(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	code := newCode(t)
	now := ms(time.Now())
	snap := snapshot(code, 3, 2)
	snap.Customers = map[int64]int{1: 2, 2: 1}
	snap.Orders = []voucher.GateOrder{
		{OrderID: "a", CustomerID: 1, OrderAmount: 10, CreatedAt: now, ExpiresAt: now.Add(time.Minute)},
		{OrderID: "b", CustomerID: 1, OrderAmount: 20, Confirmed: true, CreatedAt: now, ExpiresAt: now.Add(time.Minute)},
		{OrderID: "c", CustomerID: 2, OrderAmount: 30, Releasing: true, CreatedAt: now, ExpiresAt: now.Add(time.Minute)},
		{OrderID: "d", CustomerID: 3, OrderAmount: 40, Released: true, CreatedAt: now, ExpiresAt: now.Add(time.Minute)},
		{OrderID: "e", CustomerID: 4, OrderAmount: 50},
		{OrderID: "f", CustomerID: 5, OrderAmount: 60, Released: true},
	}
	load(t, g, snap)
	if diff := cmp.Diff(snap, snapshotOf(t, g, code)); diff != "" {
		t.Fatalf("Snapshot after Load (-want +got):\n%s", diff)
	}
	ctx := context.Background()
	for id, want := range map[string]voucher.GateDecision{
		"a": voucher.DecisionConfirmedNow, "b": voucher.DecisionConfirmed, "c": voucher.DecisionReleased,
		"d": voucher.DecisionReleased, "e": voucher.DecisionLegacy, "f": voucher.DecisionReleased,
	} {
		d, _, err := g.Confirm(ctx, code, id)
		decide(t, "Confirm("+id+")", d, err, want)
	}
}

// A confirmed order rolled back in the database gets its use back at the
// gate once (Release: stock up one, the customer's count down one); the
// gate then holds it released, so its confirm and its reserve retry are
// answered as a released order's.
func TestKafkaScripts_AConfirmedOrderRolledBackIsGivenBackOnce(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	code := newCode(t)
	ctx := context.Background()
	now := ms(time.Now())
	created, expires := now, now.Add(15*time.Minute)
	load(t, g, snapshot(code, 2, 1))
	reserveTimed(t, g, 1, req(code, "paid", 7, 100), created, expires, voucher.GateAdmitted)
	d, _, err := g.Confirm(ctx, code, "paid")
	decide(t, "Confirm(paid)", d, err, voucher.DecisionConfirmedNow)
	before := snapshotOf(t, g, code)
	release(t, g, code, "paid", true)
	release(t, g, code, "paid", false)
	after := snapshotOf(t, g, code)
	if after.Remaining != before.Remaining+1 || after.Customers[7] != 0 {
		t.Fatalf("after the rollback's give-back: remaining %d (was %d), customer 7 holds %d; want the use back once", after.Remaining, before.Remaining, after.Customers[7])
	}
	d, _, err = g.Confirm(ctx, code, "paid")
	decide(t, "Confirm of the rolled-back order", d, err, voucher.DecisionReleased)
	reserveTimed(t, g, 1, req(code, "paid", 7, 100), created, expires, voucher.GateReleased)
	reserveTimed(t, g, 1, req(code, "again", 7, 100), created, expires, voucher.GateAdmitted)
}
