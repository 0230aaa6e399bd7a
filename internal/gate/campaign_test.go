package gate_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"voucherd/internal/gate"
	"voucherd/internal/voucher"
)

// newCampaignGate is the code of a campaign's gate no other test uses
// (~C<id>, as a campaign's voucher row is named).
func newCampaignGate(t *testing.T) string {
	t.Helper()
	return voucher.CampaignGateCode(900_000_000 + codes.Add(1))
}

// campaignSnapshot is an empty campaign gate: remaining uses across its
// codes, perUserLimit across its codes, usesPerCode each.
func campaignSnapshot(code string, remaining, perUserLimit, usesPerCode int) voucher.GateSnapshot {
	snap := snapshot(code, remaining, perUserLimit)
	snap.UsesPerCode = usesPerCode
	return snap
}

// reserveCode reserves campaign code on the campaign's gate.
func reserveCode(t *testing.T, g *gate.Gate, gateCode string, limit int, r voucher.ReserveRequest, want voucher.GateVerdict) {
	t.Helper()
	got, err := g.Reserve(context.Background(), gateCode, limit, 0, r)
	if err != nil || got != want {
		t.Fatalf("Reserve(%s: %s, %s, customer %d) = %q, %v; want %q", gateCode, r.Code, r.OrderID, r.CustomerID, got, err, want)
	}
}

func TestCampaignGate_PerCodeUsesAreDecidedWithTheStockInOneScript(t *testing.T) {
	g, _ := newGate(t)
	ctx := context.Background()
	c := newCampaignGate(t)
	load(t, g, campaignSnapshot(c, 3, 1, 1)) // 3 uses across the codes, 1 a code, 1 a customer

	reserveCode(t, g, c, 1, req("CODE-A", "o1", 1, 100), voucher.GateAdmitted)
	// Another customer on the same code: the code is used up, the campaign is not.
	reserveCode(t, g, c, 1, req("CODE-A", "o2", 2, 100), voucher.GateCodeUsedUp)
	if n := remaining(t, g, c); n != 2 {
		t.Fatalf("remaining after a used-up code's refusal = %d, want 2 (the refusal takes nothing)", n)
	}
	// The same customer on another code: the per-customer count spans the codes.
	reserveCode(t, g, c, 1, req("CODE-B", "o3", 1, 100), voucher.GateAlreadyUsed)
	// A retry of o1 on another code is another order.
	reserveCode(t, g, c, 1, req("CODE-B", "o1", 1, 100), voucher.GateOrderConflict)
	reserveCode(t, g, c, 1, req("CODE-A", "o1", 1, 100), voucher.GateDuplicate)
	reserveCode(t, g, c, 1, req("CODE-B", "o4", 2, 100), voucher.GateAdmitted)
	reserveCode(t, g, c, 1, req("CODE-C", "o5", 3, 100), voucher.GateAdmitted)
	// The campaign's stock before a fresh code.
	reserveCode(t, g, c, 1, req("CODE-D", "o6", 4, 100), voucher.GateOutOfStock)

	snap := snapshotOf(t, g, c)
	if diff := cmp.Diff(map[string]int{"CODE-A": 1, "CODE-B": 1, "CODE-C": 1}, snap.Codes); diff != "" {
		t.Fatalf("code uses (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"o1": "CODE-A", "o4": "CODE-B", "o5": "CODE-C"}, snap.OrderCodes); diff != "" {
		t.Fatalf("order codes (-want +got):\n%s", diff)
	}

	// A release gives the code's use back with the campaign's and the customer's.
	release(t, g, c, "o1", true)
	release(t, g, c, "o1", false) // once
	reserveCode(t, g, c, 1, req("CODE-A", "o7", 2+5, 100), voucher.GateAdmitted)
	reserveCode(t, g, c, 1, req("CODE-A", "o8", 1, 100), voucher.GateOutOfStock) // the campaign is sold out again
	if n := remaining(t, g, c); n != 0 {
		t.Fatalf("remaining = %d, want 0", n)
	}

	// Drop (the database sold out): the campaign's use stays out, the
	// code's comes back. DropCode (the database's code used up): the
	// code's stays out, the campaign's comes back.
	if ok, err := g.Drop(ctx, c, "o4", 0); err != nil || !ok {
		t.Fatalf("Drop = %v, %v", ok, err)
	}
	if ok, err := g.DropCode(ctx, c, "o5", 0); err != nil || !ok {
		t.Fatalf("DropCode = %v, %v", ok, err)
	}
	snap = snapshotOf(t, g, c)
	if snap.Remaining != 1 {
		t.Fatalf("remaining after Drop and DropCode = %d, want 1", snap.Remaining)
	}
	if diff := cmp.Diff(map[string]int{"CODE-A": 1, "CODE-C": 1}, snap.Codes); diff != "" {
		t.Fatalf("code uses after Drop and DropCode (-want +got):\n%s", diff)
	}
	reserveCode(t, g, c, 1, req("CODE-C", "o9", 20, 100), voucher.GateCodeUsedUp)
	reserveCode(t, g, c, 1, req("CODE-B", "o10", 21, 100), voucher.GateAdmitted)
}

func TestCampaignGate_ConcurrentCustomersOnOneCodeOneWins(t *testing.T) {
	g, _ := newGate(t)
	c := newCampaignGate(t)
	load(t, g, campaignSnapshot(c, 100, 1, 1))
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		verdicts = map[voucher.GateVerdict]int{}
		start    = make(chan struct{})
	)
	for i := range 50 {
		wg.Go(func() {
			<-start
			v, err := g.Reserve(context.Background(), c, 1, 0, req("ONE-CODE", fmt.Sprintf("o%d", i), int64(i+1), 100))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			verdicts[v]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	if verdicts[voucher.GateAdmitted] != 1 || verdicts[voucher.GateCodeUsedUp] != 49 {
		t.Fatalf("verdicts = %v; want 1 ADMITTED and 49 CODE_USED_UP", verdicts)
	}
}

func TestCampaignGate_LoadInstallsCodeUsesAndOrderCodes(t *testing.T) {
	g, _ := newGate(t)
	c := newCampaignGate(t)
	snap := campaignSnapshot(c, 5000, 1, 2)
	snap.Codes, snap.OrderCodes = map[string]int{}, map[string]string{}
	// More than one chunk of each, so they are staged.
	for i := range 4500 {
		code, order := fmt.Sprintf("C%05d", i), fmt.Sprintf("o%05d", i)
		snap.Codes[code] = 1
		snap.OrderCodes[order] = code
		snap.Customers[int64(i+1)] = 1
		snap.Orders = append(snap.Orders, voucher.GateOrder{OrderID: order, CustomerID: int64(i + 1), OrderAmount: 100})
	}
	snap.Codes["FULL"] = 2 // confirmed uses count too
	load(t, g, snap)

	got := snapshotOf(t, g, c)
	if diff := cmp.Diff(snap.Codes, got.Codes); diff != "" {
		t.Fatalf("code uses read back (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(snap.OrderCodes, got.OrderCodes); diff != "" {
		t.Fatalf("order codes read back (-want +got):\n%s", diff)
	}
	if got.UsesPerCode != 2 {
		t.Fatalf("usesPerCode = %d, want 2", got.UsesPerCode)
	}
	reserveCode(t, g, c, 1, req("FULL", "x1", 999_999, 100), voucher.GateCodeUsedUp)
	reserveCode(t, g, c, 1, req("C00001", "x2", 999_998, 100), voucher.GateAdmitted) // 1 of 2 held
	reserveCode(t, g, c, 1, req("C00001", "x3", 999_997, 100), voucher.GateCodeUsedUp)
	// Releasing a loaded order gives its code's use back.
	release(t, g, c, "o00001", true)
	reserveCode(t, g, c, 1, req("C00001", "x4", 999_996, 100), voucher.GateAdmitted)
}

// TestCampaignGate_AvailabilityReadsTheCodesUsesApartFromTheCampaigns: a
// check of a campaign code reads the code's uses left beside the
// campaign's stock (one used up, the campaign not), changing nothing.
func TestCampaignGate_AvailabilityReadsTheCodesUsesApartFromTheCampaigns(t *testing.T) {
	g, _ := newGate(t)
	ctx := context.Background()
	c := newCampaignGate(t)
	load(t, g, campaignSnapshot(c, 5, 1, 2)) // 5 uses across the codes, 2 a code
	reserveCode(t, g, c, 1, req("CODE-A", "o1", 1, 100), voucher.GateAdmitted)
	reserveCode(t, g, c, 1, req("CODE-A", "o2", 2, 100), voucher.GateAdmitted)
	for range 2 { // a read: the same answer every time
		a, loaded, err := g.Availability(ctx, c, "CODE-A", 1)
		if err != nil || !loaded || a.Remaining != 3 || a.CustomerUses != 1 || a.CodeRemaining == nil || *a.CodeRemaining != 0 {
			t.Fatalf("Availability(CODE-A) = %+v (code left %v), %v, %v; want 3 left, 1 use, the code used up", a, deref32(a.CodeRemaining), loaded, err)
		}
	}
	if a, _, err := g.Availability(ctx, c, "CODE-B", 3); err != nil || a.Remaining != 3 || a.CustomerUses != 0 || a.CodeRemaining == nil || *a.CodeRemaining != 2 {
		t.Errorf("Availability(CODE-B) = %+v (code left %v), %v; want 3 left and both of the code's uses", a, deref32(a.CodeRemaining), err)
	}
	// A voucher's gate has no code to read.
	v := newCode(t)
	load(t, g, snapshot(v, 4, 1))
	if a, _, err := g.Availability(ctx, v, "CODE-A", 1); err != nil || a.CodeRemaining != nil || a.Remaining != 4 {
		t.Errorf("Availability on a voucher's gate = %+v, %v; want 4 left and no code's count", a, err)
	}
}

func deref32(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
