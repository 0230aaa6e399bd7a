package gate_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// A kafka-mode gate numbers its admissions after the count it was loaded
// with (the database's admitted_count), each once, however many arrive at
// once; a retry answers its admission's number, a refusal takes none, a
// settle keeps it, and a gate loaded again continues from the count it is
// given, with the orders it holds keeping theirs.
func TestAdmit_NumbersEachAdmissionOnceAfterTheLoadedCount(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	epoch := loadKafkaGate(t, g, voucher.GateSnapshot{Code: code, Remaining: 20, PerUserLimit: 1, Admitted: 40}, 15*time.Minute)

	var mu sync.Mutex
	admitted := map[string]voucher.Admission{}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			r := voucher.ReserveRequest{Code: code, OrderID: fmt.Sprintf("%s-%d", code, i), CustomerID: int64(i + 1), OrderAmount: 5000}
			a, err := g.Admit(ctx, code, r, 100)
			if err != nil {
				t.Error(err)
				return
			}
			if a.Verdict == voucher.GateAdmitted {
				mu.Lock()
				admitted[r.OrderID] = a
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var got []int
	for _, a := range admitted {
		got = append(got, a.Order.Position)
	}
	slices.Sort(got)
	want := make([]int, 20)
	for i := range want {
		want[i] = 41 + i
	}
	if !slices.Equal(got, want) {
		t.Fatalf("30 admits on 20 uses after 40 admitted: positions %v, want 41..60 each once", got)
	}

	var first voucher.Admission
	for _, a := range admitted {
		if a.Order.Position == 41 {
			first = a
		}
	}
	r := voucher.ReserveRequest{Code: code, OrderID: first.Order.OrderID, CustomerID: first.Order.CustomerID, OrderAmount: 5000}
	if again, err := g.Admit(ctx, code, r, 100); err != nil || again.Verdict != voucher.GatePending || again.Order.Position != 41 {
		t.Fatalf("a retry while pending: %+v %v, want PENDING with position 41", again, err)
	}
	if ans, after, err := g.Settle(ctx, code, voucher.SettleFinalize, first.Order, epoch, 100); err != nil || ans != voucher.SettleOK || after.Position != 41 {
		t.Fatalf("finalize: %q %+v %v, want OK keeping position 41", ans, after, err)
	}
	if again, err := g.Admit(ctx, code, r, 100); err != nil || again.Verdict != voucher.GateDuplicate || again.Order.Position != 41 {
		t.Fatalf("a retry once live: %+v %v, want DUPLICATE with position 41", again, err)
	}
	if _, o, err := g.Confirm(ctx, code, r.OrderID); err != nil || o.Position != 41 {
		t.Fatalf("its confirm: %+v %v, want position 41 kept", o, err)
	}
	snap, _, err := g.Snapshot(ctx, code)
	if err != nil || snap.Admitted != 60 {
		t.Fatalf("the gate's count after 20 admissions and 10 refusals: %d %v, want 60", snap.Admitted, err)
	}

	// Loaded again (Redis lost it; the database holds 60 admitted): the
	// orders keep their numbers and the next admission is 61.
	snap.Remaining = 1
	if _, err := g.Recover(ctx, snap, voucher.GateTerms{Epoch: "e2-" + code, StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour),
		DatabaseNow: time.Now(), TTL: 15 * time.Minute, Lease: 5 * time.Second}, "replace"); err != nil {
		t.Fatal(err)
	}
	if o, ok, err := g.Order(ctx, code, r.OrderID); err != nil || !ok || o.Position != 41 {
		t.Fatalf("the reloaded gate's order: %+v %v %v, want position 41", o, ok, err)
	}
	next, err := g.Admit(ctx, code, voucher.ReserveRequest{Code: code, OrderID: code + "-next", CustomerID: 999, OrderAmount: 5000}, 100)
	if err != nil || next.Verdict != voucher.GateAdmitted || next.Order.Position != 61 {
		t.Fatalf("an admission on the reloaded gate: %+v %v, want position 61", next, err)
	}
}

// A kafka-mode gate loaded before positions were kept (no count in its
// meta) gives no numbers rather than start at 1 again over the ones the
// database gave: the consumer numbers those rows; the next load brings the
// count.
func TestAdmit_AGateLoadedWithoutTheCountGivesNoNumbers(t *testing.T) {
	t.Parallel()
	g, rdb := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	loadKafkaGate(t, g, voucher.GateSnapshot{Code: code, Remaining: 5, PerUserLimit: 1, Admitted: 7}, 15*time.Minute)
	if err := rdb.HDel(ctx, "voucher:{"+code+"}:meta", "admitted").Err(); err != nil {
		t.Fatal(err)
	}
	a, err := g.Admit(ctx, code, voucher.ReserveRequest{Code: code, OrderID: code + "-a", CustomerID: 1, OrderAmount: 5000}, 100)
	if err != nil || a.Verdict != voucher.GateAdmitted || a.Order.Position != 0 {
		t.Fatalf("an admission on a gate without the count: %+v %v, want ADMITTED without a position", a, err)
	}
	if n, err := rdb.HExists(ctx, "voucher:{"+code+"}:meta", "admitted").Result(); err != nil || n {
		t.Fatalf("the gate's count after it: exists %v (%v), want still absent", n, err)
	}
}
