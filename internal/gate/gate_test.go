package gate_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"voucherd/internal/gate"
	"voucherd/internal/testredis"
	"voucherd/internal/voucher"
)

// shared is one throwaway redis-server for the tests that only touch their
// own voucher codes; tests that flush or restart Redis start their own.
var shared *testredis.Server

func TestMain(m *testing.M) {
	var err error
	if shared, err = testredis.Launch(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// newGate returns a gate over the shared server and a client for inspection.
// The shared server answers every test of the package while the race
// detector and other packages share two cores: a stall past the product's
// 500 ms read timeout there is the machine, not what these tests are about
// (a 4,500-order snapshot timed out in CI so). Tests of a slow or failing
// Redis use gateAt with servers of their own.
func newGate(t *testing.T) (*gate.Gate, redis.UniversalClient) {
	t.Helper()
	return gateAt(t, shared.URL+"?read_timeout=5s&write_timeout=5s")
}

func gateAt(t *testing.T, url string) (*gate.Gate, redis.UniversalClient) {
	t.Helper()
	rdb, err := gate.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return gate.New(rdb), rdb
}

var codes atomic.Int64

// newCode returns a voucher code no other test uses.
func newCode(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("T%d-%s", codes.Add(1), hex.EncodeToString(b))
}

// snapshot is an empty gate of remaining uses that expires in an hour.
func snapshot(code string, remaining, perUserLimit int) voucher.GateSnapshot {
	return voucher.GateSnapshot{
		Code: code, Remaining: remaining, PerUserLimit: perUserLimit,
		Customers: map[int64]int{},
		ExpireAt:  time.Now().Add(time.Hour).Truncate(time.Millisecond),
	}
}

func load(t *testing.T, g *gate.Gate, snap voucher.GateSnapshot) {
	t.Helper()
	loaded, err := g.Load(context.Background(), snap)
	if err != nil || !loaded {
		t.Fatalf("Load(%s) = %v, %v; want true, nil", snap.Code, loaded, err)
	}
}

func req(code, orderID string, customerID, amount int64) voucher.ReserveRequest {
	return voucher.ReserveRequest{Code: code, OrderID: orderID, CustomerID: customerID, OrderAmount: amount}
}

func reserve(t *testing.T, g *gate.Gate, limit int, r voucher.ReserveRequest, want voucher.GateVerdict) {
	t.Helper()
	got, err := g.Reserve(context.Background(), r.Code, limit, 0, r)
	if err != nil || got != want {
		t.Fatalf("Reserve(%s, %s, customer %d, amount %d) = %q, %v; want %q", r.Code, r.OrderID, r.CustomerID, r.OrderAmount, got, err, want)
	}
}

func release(t *testing.T, g *gate.Gate, code, orderID string, want bool) {
	t.Helper()
	got, err := g.Release(context.Background(), code, orderID, 0)
	if err != nil || got != want {
		t.Fatalf("Release(%s, %s) = %v, %v; want %v", code, orderID, got, err, want)
	}
}

func remaining(t *testing.T, g *gate.Gate, code string) int {
	t.Helper()
	n, ok, err := g.Remaining(context.Background(), code)
	if err != nil || !ok {
		t.Fatalf("Remaining(%s) = %d, %v, %v; want loaded", code, n, ok, err)
	}
	return n
}

func snapshotOf(t *testing.T, g *gate.Gate, code string) voucher.GateSnapshot {
	t.Helper()
	snap, ok, err := g.Snapshot(context.Background(), code)
	if err != nil || !ok {
		t.Fatalf("Snapshot(%s) = %v, %v; want loaded", code, ok, err)
	}
	if snap.Version == "" {
		t.Fatalf("Snapshot(%s) has no version", code)
	}
	snap.Version = "" // each load's own: compared by the tests of Lower
	return snap
}

func TestReserve_Verdicts(t *testing.T) {
	t.Parallel()
	const limit = 1
	tests := []struct {
		desc      string
		remaining int
		unloaded  bool
		paused    bool
		orders    []voucher.GateOrder // in the loaded snapshot
		customers map[int64]int       // in the loaded snapshot
		before    []voucher.ReserveRequest
		release   []string // orderIds released after before
		req       voucher.ReserveRequest
		want      voucher.GateVerdict
	}{
		{desc: "an unloaded voucher is NOT_LOADED", unloaded: true, req: req("", "o1", 1, 100), want: voucher.GateNotLoaded},
		{desc: "a paused voucher is PAUSED", remaining: 5, paused: true, req: req("", "o1", 1, 100), want: voucher.GatePaused},
		{desc: "a new order with stock is ADMITTED", remaining: 5, req: req("", "o1", 1, 100), want: voucher.GateAdmitted},
		{desc: "the same order, customer and amount is DUPLICATE", remaining: 5,
			before: []voucher.ReserveRequest{req("", "o1", 1, 100)}, req: req("", "o1", 1, 100), want: voucher.GateDuplicate},
		{desc: "a duplicate is answered before the stock", remaining: 1,
			before: []voucher.ReserveRequest{req("", "o1", 1, 100)}, req: req("", "o1", 1, 100), want: voucher.GateDuplicate},
		{desc: "a released order with the same customer and amount is RELEASED", remaining: 5,
			before: []voucher.ReserveRequest{req("", "o1", 1, 100)}, release: []string{"o1"}, req: req("", "o1", 1, 100), want: voucher.GateReleased},
		{desc: "the same order for another customer is ORDER_CONFLICT", remaining: 5,
			before: []voucher.ReserveRequest{req("", "o1", 1, 100)}, req: req("", "o1", 2, 100), want: voucher.GateOrderConflict},
		{desc: "the same order with another amount is ORDER_CONFLICT", remaining: 5,
			before: []voucher.ReserveRequest{req("", "o1", 1, 100)}, req: req("", "o1", 1, 101), want: voucher.GateOrderConflict},
		{desc: "a released order with another amount is ORDER_CONFLICT", remaining: 5,
			before: []voucher.ReserveRequest{req("", "o1", 1, 100)}, release: []string{"o1"}, req: req("", "o1", 1, 99), want: voucher.GateOrderConflict},
		{desc: "a customer at the limit is ALREADY_USED", remaining: 5,
			before: []voucher.ReserveRequest{req("", "o1", 1, 100)}, req: req("", "o2", 1, 100), want: voucher.GateAlreadyUsed},
		{desc: "the limit is answered before the stock", remaining: 1,
			before: []voucher.ReserveRequest{req("", "o1", 1, 100)}, req: req("", "o2", 1, 100), want: voucher.GateAlreadyUsed},
		{desc: "a released use no longer counts for the customer", remaining: 5,
			before: []voucher.ReserveRequest{req("", "o1", 1, 100)}, release: []string{"o1"}, req: req("", "o2", 1, 100), want: voucher.GateAdmitted},
		{desc: "no stock left is OUT_OF_STOCK", remaining: 1,
			before: []voucher.ReserveRequest{req("", "o1", 1, 100)}, req: req("", "o2", 2, 100), want: voucher.GateOutOfStock},
		{desc: "a zero snapshot is OUT_OF_STOCK", remaining: 0, req: req("", "o1", 1, 100), want: voucher.GateOutOfStock},
		{desc: "a live order of the snapshot is DUPLICATE", remaining: 0,
			orders:    []voucher.GateOrder{{OrderID: "o1", CustomerID: 1, OrderAmount: 100}},
			customers: map[int64]int{1: 1}, req: req("", "o1", 1, 100), want: voucher.GateDuplicate},
		{desc: "a released order of the snapshot is RELEASED", remaining: 3,
			orders: []voucher.GateOrder{{OrderID: "o1", CustomerID: 1, OrderAmount: 100, Released: true}},
			req:    req("", "o1", 1, 100), want: voucher.GateReleased},
		{desc: "a customer count of the snapshot is ALREADY_USED", remaining: 3,
			customers: map[int64]int{1: 1}, req: req("", "o9", 1, 100), want: voucher.GateAlreadyUsed},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			g, rdb := newGate(t)
			ctx := context.Background()
			code := newCode(t)
			if !tt.unloaded {
				snap := snapshot(code, tt.remaining, limit)
				snap.Orders = tt.orders
				if tt.customers != nil {
					snap.Customers = tt.customers
				}
				load(t, g, snap)
			}
			for _, r := range tt.before {
				r.Code = code
				reserve(t, g, limit, r, voucher.GateAdmitted)
			}
			for _, id := range tt.release {
				release(t, g, code, id, true)
			}
			if tt.paused {
				if err := g.Pause(ctx, code, 0); err != nil {
					t.Fatal(err)
				}
			}
			before, _, _ := g.Snapshot(ctx, code)
			r := tt.req
			r.Code = code
			reserve(t, g, limit, r, tt.want)

			after, loaded, err := g.Snapshot(ctx, code)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want != voucher.GateAdmitted {
				// A refusal takes nothing and remembers nothing.
				if diff := cmp.Diff(before, after); diff != "" {
					t.Errorf("a %s changed the gate (-before +after):\n%s", tt.want, diff)
				}
				if tt.unloaded {
					if loaded {
						t.Error("a NOT_LOADED reserve loaded the gate")
					}
					if n, _ := rdb.Exists(ctx, "voucher:{"+code+"}:customers", "voucher:{"+code+"}:orders").Result(); n != 0 {
						t.Errorf("a NOT_LOADED reserve created %d keys", n)
					}
				}
				return
			}
			if after.Remaining != before.Remaining-1 || after.Customers[r.CustomerID] != before.Customers[r.CustomerID]+1 {
				t.Errorf("ADMITTED: remaining %d -> %d, customer %d -> %d; want one use taken",
					before.Remaining, after.Remaining, before.Customers[r.CustomerID], after.Customers[r.CustomerID])
			}
		})
	}
}

func TestReserve_DuplicateOrderTakesNoSecondUse(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	code := newCode(t)
	load(t, g, snapshot(code, 10, 5))
	r := req(code, "o1", 7, 2500)
	reserve(t, g, 5, r, voucher.GateAdmitted)
	for range 3 {
		reserve(t, g, 5, r, voucher.GateDuplicate)
	}
	snap := snapshotOf(t, g, code)
	if snap.Remaining != 9 || snap.Customers[7] != 1 || len(snap.Orders) != 1 {
		t.Errorf("after one order and three retries: remaining %d, customer count %d, orders %d; want 9, 1, 1",
			snap.Remaining, snap.Customers[7], len(snap.Orders))
	}
}

func TestReserve_ConcurrentDuplicatesTakeOneUse(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	code := newCode(t)
	load(t, g, snapshot(code, 10, 1))
	counts := reserveAll(t, g, 1, 100, func(int) voucher.ReserveRequest { return req(code, "same", 3, 100) })
	want := map[voucher.GateVerdict]int{voucher.GateAdmitted: 1, voucher.GateDuplicate: 99}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("100 identical reserves at once (-want +got):\n%s", diff)
	}
	if n := remaining(t, g, code); n != 9 {
		t.Errorf("remaining %d; want 9", n)
	}
}

func TestReserve_PerUserLimitOfTwo(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	code := newCode(t)
	load(t, g, snapshot(code, 10, 2))
	reserve(t, g, 2, req(code, "a1", 1, 100), voucher.GateAdmitted)
	reserve(t, g, 2, req(code, "a2", 1, 100), voucher.GateAdmitted)
	reserve(t, g, 2, req(code, "a3", 1, 100), voucher.GateAlreadyUsed)
	reserve(t, g, 2, req(code, "b1", 2, 100), voucher.GateAdmitted)
	release(t, g, code, "a1", true)
	reserve(t, g, 2, req(code, "a3", 1, 100), voucher.GateAdmitted)
	reserve(t, g, 2, req(code, "a4", 1, 100), voucher.GateAlreadyUsed)
	snap := snapshotOf(t, g, code)
	if diff := cmp.Diff(map[int64]int{1: 2, 2: 1}, snap.Customers); diff != "" {
		t.Errorf("customer counts (-want +got):\n%s", diff)
	}
	if snap.Remaining != 7 {
		t.Errorf("remaining %d; want 7", snap.Remaining)
	}
}

// reserveAll runs n reserves at once, each on its own goroutine, and counts
// the verdicts.
func reserveAll(t *testing.T, g *gate.Gate, limit, n int, r func(i int) voucher.ReserveRequest) map[voucher.GateVerdict]int {
	t.Helper()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts = map[voucher.GateVerdict]int{}
		start  = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			rq := r(i)
			v, err := g.Reserve(context.Background(), rq.Code, limit, 0, rq)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			counts[v]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return counts
}

func TestReserve_ConcurrentReservesNeverOversell(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	code := newCode(t)
	load(t, g, snapshot(code, 50, 1))
	counts := reserveAll(t, g, 1, 1000, func(i int) voucher.ReserveRequest {
		return req(code, "o"+strconv.Itoa(i), int64(i+1), 100)
	})
	want := map[voucher.GateVerdict]int{voucher.GateAdmitted: 50, voucher.GateOutOfStock: 950}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("1,000 reserves at once on 50 uses (-want +got):\n%s", diff)
	}
	snap := snapshotOf(t, g, code)
	if snap.Remaining != 0 || len(snap.Orders) != 50 || len(snap.Customers) != 50 {
		t.Errorf("remaining %d, orders %d, customers %d; want 0, 50, 50", snap.Remaining, len(snap.Orders), len(snap.Customers))
	}
}

func TestRelease_GivesTheUseBackOnce(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	code := newCode(t)
	load(t, g, snapshot(code, 2, 1))
	reserve(t, g, 1, req(code, "o1", 1, 100), voucher.GateAdmitted)
	reserve(t, g, 1, req(code, "o2", 2, 100), voucher.GateAdmitted)
	release(t, g, code, "o1", true)
	release(t, g, code, "o1", false)
	release(t, g, code, "o1", false)
	snap := snapshotOf(t, g, code)
	if snap.Remaining != 1 {
		t.Errorf("remaining %d after one release (and two repeats); want 1", snap.Remaining)
	}
	if diff := cmp.Diff(map[int64]int{2: 1}, snap.Customers); diff != "" {
		t.Errorf("customer counts (-want +got):\n%s", diff)
	}
	want := []voucher.GateOrder{
		{OrderID: "o1", CustomerID: 1, OrderAmount: 100, Released: true},
		{OrderID: "o2", CustomerID: 2, OrderAmount: 100},
	}
	if diff := cmp.Diff(want, snap.Orders); diff != "" {
		t.Errorf("orders (-want +got):\n%s", diff)
	}
}

// Drop takes out an order the database refused as sold out: its customer's
// count and discount come back, its use does not (the gate was a use too
// high), and a retry of the order is decided afresh.
func TestDrop_KeepsTheUseOutAndGivesTheCustomerAndBudgetBack(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	snap := snapshot(code, 2, 1)
	budget := int64(1000)
	snap.Budget = &budget
	load(t, g, snap)
	if got, err := g.Reserve(ctx, code, 1, 300, req(code, "o1", 1, 3000)); err != nil || got != voucher.GateAdmitted {
		t.Fatalf("Reserve(o1) = %q, %v", got, err)
	}
	if ok, err := g.Drop(ctx, code, "o1", 300); err != nil || !ok {
		t.Fatalf("Drop(o1) = %v, %v", ok, err)
	}
	after := snapshotOf(t, g, code)
	if after.Remaining != 1 || len(after.Customers) != 0 || len(after.Orders) != 0 || after.Budget == nil || *after.Budget != 1000 {
		t.Errorf("after Drop: remaining %d (want 1: the use stays out), customers %v, orders %v, budget %v (want 1000)",
			after.Remaining, after.Customers, after.Orders, deref(after.Budget))
	}
	if ok, err := g.Drop(ctx, code, "o1", 300); err != nil || ok {
		t.Errorf("a second Drop(o1) = %v, %v; want nothing", ok, err)
	}
	// The customer may try again: decided afresh, on the one use left.
	if got, err := g.Reserve(ctx, code, 1, 300, req(code, "o1", 1, 3000)); err != nil || got != voucher.GateAdmitted {
		t.Errorf("Reserve(o1) again = %q, %v; want ADMITTED", got, err)
	}
}

func TestRelease_UnknownOrderGivesNothing(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	code := newCode(t)
	load(t, g, snapshot(code, 0, 1))
	release(t, g, code, "never-reserved", false)
	if n := remaining(t, g, code); n != 0 {
		t.Errorf("remaining %d after releasing an unknown order; want 0", n)
	}
}

func TestRelease_UnloadedVoucherDoesNothing(t *testing.T) {
	t.Parallel()
	g, rdb := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	load(t, g, snapshot(code, 5, 1))
	reserve(t, g, 1, req(code, "o1", 1, 100), voucher.GateAdmitted)
	// Only the stock key gone (as if evicted): the gate is not loaded.
	if err := rdb.Del(ctx, "voucher:{"+code+"}:stock").Err(); err != nil {
		t.Fatal(err)
	}
	release(t, g, code, "o1", false)
	if n, _ := rdb.Exists(ctx, "voucher:{"+code+"}:stock").Result(); n != 0 {
		t.Error("a release on an unloaded voucher created its stock key")
	}
	if v, _ := rdb.HGet(ctx, "voucher:{"+code+"}:orders", "o1").Result(); v != "1:100" {
		t.Errorf("a release on an unloaded voucher changed the order to %q", v)
	}
}

func TestLoad_NeverRaisesALoadedGate(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	load(t, g, snapshot(code, 5, 1))
	for i := range 3 {
		reserve(t, g, 1, req(code, "o"+strconv.Itoa(i), int64(i+1), 100), voucher.GateAdmitted)
	}
	before := snapshotOf(t, g, code)
	loaded, err := g.Load(ctx, snapshot(code, 50, 9))
	if err != nil || loaded {
		t.Fatalf("Load over a loaded gate = %v, %v; want false, nil", loaded, err)
	}
	if diff := cmp.Diff(before, snapshotOf(t, g, code)); diff != "" {
		t.Errorf("Load changed a loaded gate (-before +after):\n%s", diff)
	}
}

func TestLoad_ConcurrentLoadsLoadOnce(t *testing.T) {
	t.Parallel()
	for _, orders := range []int{3, 5000} { // one call each; staged in chunks
		t.Run(strconv.Itoa(orders)+" orders", func(t *testing.T) {
			t.Parallel()
			g, _ := newGate(t)
			code := newCode(t)
			// Each loader has another snapshot; the gate must end up holding
			// exactly one of them, whole.
			const loaders = 8
			snaps := make([]voucher.GateSnapshot, loaders)
			for i := range snaps {
				snaps[i] = bigSnapshot(code, 100+i, orders, fmt.Sprintf("l%d-", i))
			}
			var wg sync.WaitGroup
			won := make([]bool, loaders)
			for i := range loaders {
				wg.Go(func() {
					var err error
					if won[i], err = g.Load(context.Background(), snaps[i]); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			winners := 0
			got := snapshotOf(t, g, code)
			for i, w := range won {
				if !w {
					continue
				}
				winners++
				if diff := cmp.Diff(snaps[i], got); diff != "" {
					t.Errorf("the gate is not the winner's snapshot (-want +got):\n%s", diff)
				}
			}
			if winners != 1 {
				t.Errorf("%d of %d concurrent loads loaded; want 1", winners, loaders)
			}
		})
	}
}

// bigSnapshot holds n orders (every third released) of n customers.
func bigSnapshot(code string, remaining, n int, prefix string) voucher.GateSnapshot {
	snap := snapshot(code, remaining, 2)
	for i := range n {
		id := int64(i + 1)
		o := voucher.GateOrder{OrderID: fmt.Sprintf("%s%06d", prefix, i), CustomerID: id, OrderAmount: id * 10, Released: i%3 == 0}
		if !o.Released {
			snap.Customers[id] = 1
		}
		snap.Orders = append(snap.Orders, o)
	}
	return snap
}

func TestLoad_SnapshotReadsBackWhatWasLoaded(t *testing.T) {
	t.Parallel()
	for _, orders := range []int{0, 4, 4500} {
		t.Run(strconv.Itoa(orders)+" orders", func(t *testing.T) {
			t.Parallel()
			g, _ := newGate(t)
			code := newCode(t)
			want := bigSnapshot(code, 7, orders, "o-with:colon-")
			load(t, g, want)
			if diff := cmp.Diff(want, snapshotOf(t, g, code)); diff != "" {
				t.Errorf("Snapshot after Load (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoad_KeysExpireAtExpireAt(t *testing.T) {
	t.Parallel()
	g, rdb := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	snap := snapshot(code, 5, 1)
	load(t, g, snap)
	// The hashes are created by the first reserve: they expire too.
	reserve(t, g, 1, req(code, "o1", 1, 100), voucher.GateAdmitted)
	for _, suffix := range []string{"stock", "customers", "orders", "meta"} {
		key := "voucher:{" + code + "}:" + suffix
		at, err := rdb.PExpireTime(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := time.UnixMilli(int64(at / time.Millisecond)); got.Sub(snap.ExpireAt).Abs() > time.Second {
			t.Errorf("%s expires at %v; want %v", key, got, snap.ExpireAt)
		}
	}
}

func TestLoad_PastExpireAtLoadsNothing(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	snap := snapshot(code, 5, 1)
	snap.ExpireAt = time.Now().Add(-time.Minute)
	if loaded, err := g.Load(ctx, snap); err != nil || loaded {
		t.Fatalf("Load of an expired snapshot = %v, %v; want false, nil", loaded, err)
	}
	if _, ok, err := g.Remaining(ctx, code); err != nil || ok {
		t.Errorf("Remaining after an expired load: ok %v, %v; want not loaded", ok, err)
	}
}

func TestLoad_LeftoversOfAnEvictedGateAreDropped(t *testing.T) {
	t.Parallel()
	g, rdb := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	// Hashes without a stock key, as if Redis evicted only the counter.
	rdb.HSet(ctx, "voucher:{"+code+"}:customers", "99", "5")
	rdb.HSet(ctx, "voucher:{"+code+"}:orders", "stale", "99:1")
	want := snapshot(code, 3, 1)
	load(t, g, want)
	if diff := cmp.Diff(want, snapshotOf(t, g, code)); diff != "" {
		t.Errorf("Snapshot (-want +got):\n%s", diff)
	}
}

func TestLower_NeverBelowZero(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc          string
		remaining, by int
		want          int
	}{
		{"lowers by n", 10, 3, 7},
		{"stops at zero", 10, 25, 0},
		{"zero stays zero", 0, 4, 0},
		{"a non-positive n changes nothing", 6, 0, 6},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			g, _ := newGate(t)
			code := newCode(t)
			load(t, g, snapshot(code, tt.remaining, 1))
			got, _, err := g.Lower(context.Background(), code, tt.by, version(t, g, code))
			if err != nil || got != tt.want {
				t.Fatalf("Lower(%d) from %d = %d, %v; want %d", tt.by, tt.remaining, got, err, tt.want)
			}
			if n := remaining(t, g, code); n != tt.want {
				t.Errorf("Remaining = %d; want %d", n, tt.want)
			}
		})
	}
}

func TestLower_UnloadedVoucherLoadsNothing(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	if got, _, err := g.Lower(ctx, code, 3, ""); err != nil || got != 0 {
		t.Fatalf("Lower on an unloaded voucher = %d, %v; want 0, nil", got, err)
	}
	if _, ok, _ := g.Remaining(ctx, code); ok {
		t.Error("Lower loaded the voucher")
	}
}

func TestPause_ReserveIsPausedUntilReplace(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	load(t, g, snapshot(code, 1, 1))
	reserve(t, g, 1, req(code, "old", 1, 100), voucher.GateAdmitted)
	if err := g.Pause(ctx, code, 0); err != nil {
		t.Fatal(err)
	}
	reserve(t, g, 1, req(code, "o2", 2, 100), voucher.GatePaused)
	reserve(t, g, 1, req(code, "old", 1, 100), voucher.GatePaused)

	// Replace may raise the gate (it is the operator's rebuild) and drops
	// what the gate held.
	want := snapshot(code, 4, 1)
	want.Orders = []voucher.GateOrder{{OrderID: "db", CustomerID: 5, OrderAmount: 10}}
	want.Customers = map[int64]int{5: 1}
	if err := g.Replace(ctx, want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, snapshotOf(t, g, code)); diff != "" {
		t.Errorf("Snapshot after Replace (-want +got):\n%s", diff)
	}
	reserve(t, g, 1, req(code, "o2", 2, 100), voucher.GateAdmitted)
	reserve(t, g, 1, req(code, "db", 5, 10), voucher.GateDuplicate)
}

// TestHoldPause_ExtendsOnlyAPauseThatIsThere: a pause lapses after its ttl
// unless renewed; a renewal after Replace lifted it, or after it lapsed,
// pauses nothing (a rebuild's renewals never stop a sale its reload resumed).
func TestHoldPause_ExtendsOnlyAPauseThatIsThere(t *testing.T) {
	t.Parallel()
	g, rdb := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	load(t, g, snapshot(code, 3, 1))
	if err := g.Pause(ctx, code, time.Second); err != nil {
		t.Fatal(err)
	}
	if held, err := g.HoldPause(ctx, code, time.Minute); err != nil || !held {
		t.Fatalf("HoldPause of a pause = %v, %v; want held", held, err)
	}
	if ttl := rdb.PTTL(ctx, "voucher:{"+code+"}:paused").Val(); ttl < 30*time.Second {
		t.Fatalf("the held pause lasts %s; want about a minute", ttl)
	}
	reserve(t, g, 1, req(code, "a", 1, 100), voucher.GatePaused)
	if err := g.Replace(ctx, snapshot(code, 3, 1)); err != nil {
		t.Fatal(err)
	}
	if held, err := g.HoldPause(ctx, code, time.Minute); err != nil || held {
		t.Fatalf("HoldPause after Replace = %v, %v; want not held", held, err)
	}
	reserve(t, g, 1, req(code, "a", 1, 100), voucher.GateAdmitted)

	// A short pause lapses by itself.
	if err := g.Pause(ctx, code, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	reserve(t, g, 1, req(code, "b", 2, 100), voucher.GatePaused)
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Exists(ctx, "voucher:{"+code+"}:paused").Val() == 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if held, err := g.HoldPause(ctx, code, time.Minute); err != nil || held {
		t.Fatalf("HoldPause after the pause lapsed = %v, %v; want not held", held, err)
	}
	reserve(t, g, 1, req(code, "b", 2, 100), voucher.GateAdmitted)
}

// TestKeepPaused_HoldsAPauseUntilStopThenLetsItLapse: a rebuild's pause
// outlives its own ttl while KeepPaused renews it, and lapses within the ttl
// once stopped (the rebuild ended or died).
func TestKeepPaused_HoldsAPauseUntilStopThenLetsItLapse(t *testing.T) {
	t.Parallel()
	g, rdb := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	load(t, g, snapshot(code, 3, 1))
	const ttl = 300 * time.Millisecond
	if err := g.Pause(ctx, code, ttl); err != nil {
		t.Fatal(err)
	}
	stop := g.KeepPaused(ctx, code, ttl)
	key := "voucher:{" + code + "}:paused"
	for end := time.Now().Add(4 * ttl); time.Now().Before(end); time.Sleep(ttl / 10) {
		if rdb.Exists(ctx, key).Val() != 1 {
			stop()
			t.Fatal("the pause lapsed while KeepPaused held it")
		}
	}
	stop()
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Exists(ctx, key).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("the pause outlived its ttl after KeepPaused stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	reserve(t, g, 1, req(code, "a", 1, 100), voucher.GateAdmitted)
}

func TestReplace_LoadsAnUnloadedVoucher(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	code := newCode(t)
	want := bigSnapshot(code, 9, 4100, "r")
	if err := g.Replace(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, snapshotOf(t, g, code)); diff != "" {
		t.Errorf("Snapshot after Replace (-want +got):\n%s", diff)
	}
}

func TestUnload_ForgetsTheVoucherUntilTheNextLoad(t *testing.T) {
	t.Parallel()
	g, rdb := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	load(t, g, snapshot(code, 5, 1))
	reserve(t, g, 1, req(code, "o1", 1, 100), voucher.GateAdmitted)
	if err := g.Unload(ctx, code); err != nil {
		t.Fatal(err)
	}
	if keys, _ := rdb.Keys(ctx, "voucher:{"+code+"}:*").Result(); len(keys) != 0 {
		t.Errorf("keys left after Unload: %v", keys)
	}
	if _, ok, err := g.Snapshot(ctx, code); err != nil || ok {
		t.Errorf("Snapshot after Unload: ok %v, %v; want not loaded", ok, err)
	}
	reserve(t, g, 1, req(code, "o1", 1, 100), voucher.GateNotLoaded)
	load(t, g, snapshot(code, 4, 1))
	reserve(t, g, 1, req(code, "o2", 2, 100), voucher.GateAdmitted)
}

func TestReserve_TheBudgetIsKeptWithTheStockAndGivenBackOnRelease(t *testing.T) {
	g, _ := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	snap := snapshot(code, 3, 5)
	budget := int64(1000)
	snap.Budget = &budget
	load(t, g, snap)
	take := func(order string, discount int64, want voucher.GateVerdict) {
		t.Helper()
		r := req(code, order, 7, discount*10)
		if got, err := g.Reserve(ctx, code, 5, discount, r); err != nil || got != want {
			t.Fatalf("Reserve(%s, discount %d) = %q, %v; want %q", order, discount, got, err, want)
		}
	}
	budgetLeft := func(want int64) {
		t.Helper()
		s, ok, err := g.Snapshot(ctx, code)
		if err != nil || !ok || s.Budget == nil || *s.Budget != want {
			t.Fatalf("budget left = %v (%v, %v), want %d", s.Budget, ok, err, want)
		}
	}
	take("a", 600, voucher.GateAdmitted)
	budgetLeft(400)
	take("b", 401, voucher.GateBudgetExhausted) // a use is left, the budget is not
	budgetLeft(400)
	take("c", 400, voucher.GateAdmitted) // exactly what is left
	budgetLeft(0)
	take("d", 0, voucher.GateAdmitted)   // a discount of 0 always fits
	take("e", 1, voucher.GateOutOfStock) // no use left: OUT_OF_STOCK comes first
	if ok, err := g.Release(ctx, code, "a", 600); err != nil || !ok {
		t.Fatalf("Release(a) = %v, %v", ok, err)
	}
	budgetLeft(600)
	if ok, err := g.Release(ctx, code, "a", 600); err != nil || ok {
		t.Fatalf("a second Release(a) = %v, %v; want nothing given back twice", ok, err)
	}
	budgetLeft(600)
	if ok, err := g.Forget(ctx, code, "c", 400); err != nil || !ok {
		t.Fatalf("Forget(c) = %v, %v", ok, err)
	}
	budgetLeft(1000)

	// A voucher without a budget has none at the gate, whatever the discounts.
	free := newCode(t)
	load(t, g, snapshot(free, 2, 5))
	if got, err := g.Reserve(ctx, free, 5, 1<<40, req(free, "x", 1, 1<<41)); err != nil || got != voucher.GateAdmitted {
		t.Fatalf("Reserve on a voucher without a budget = %q, %v", got, err)
	}
	if s, _, _ := g.Snapshot(ctx, free); s.Budget != nil {
		t.Errorf("a voucher without a budget shows a budget of %d at the gate", *s.Budget)
	}
}

func TestAvailability_ReadsStockCustomerAndBudgetAndChangesNothing(t *testing.T) {
	g, _ := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	if _, loaded, err := g.Availability(ctx, code, "", 7); err != nil || loaded {
		t.Fatalf("Availability of a gate not loaded = %v, %v; want not loaded", loaded, err)
	}
	snap := snapshot(code, 3, 2)
	budget := int64(500)
	snap.Budget = &budget
	load(t, g, snap)
	if _, err := g.Reserve(ctx, code, 2, 200, req(code, "a", 7, 2000)); err != nil {
		t.Fatal(err)
	}
	for range 3 { // a read: the same answer every time
		a, loaded, err := g.Availability(ctx, code, "", 7)
		if err != nil || !loaded || a.Remaining != 2 || a.CustomerUses != 1 || a.BudgetLeft == nil || *a.BudgetLeft != 300 {
			t.Fatalf("Availability = %+v (budget %v), %v, %v; want 2 left, 1 use, 300 of budget", a, a.BudgetLeft, loaded, err)
		}
	}
	if a, _, _ := g.Availability(ctx, code, "", 8); a.CustomerUses != 0 {
		t.Errorf("a customer with no use has %d", a.CustomerUses)
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// version reads the gate's version, as a reconciliation pass does first.
func version(t *testing.T, g *gate.Gate, code string) string {
	t.Helper()
	v, err := g.Version(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestLower_RefusedOnceTheGateWasLoadedAgainOrRaised: a reconciliation pass
// reckons its drift against the gate of one version; a reload or an
// extension since makes the drift stale, and lowering the new gate by it
// would undo the reload or the extension (an undersell that the next pass
// reports again). Lower with the old version changes nothing. Before, it
// lowered whatever the gate was by then (issue 30, item 8).
func TestLower_RefusedOnceTheGateWasLoadedAgainOrRaised(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	load(t, g, snapshot(code, 10, 1))
	before := version(t, g, code)
	if before == "" {
		t.Fatal("a loaded gate has no version")
	}
	snap := snapshot(code, 10, 1)
	if err := g.Replace(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if left, lowered, err := g.Lower(ctx, code, 4, before); err != nil || lowered || left != 0 {
		t.Errorf("Lower with the version before a reload = %d, %v, %v; want refused", left, lowered, err)
	}
	if n := remaining(t, g, code); n != 10 {
		t.Errorf("after the refused Lower, remaining %d, want 10", n)
	}

	reloaded := version(t, g, code)
	if reloaded == before {
		t.Fatal("a reload kept the version")
	}
	if ok, err := g.Extend(ctx, voucher.GateExtension{Code: code, OldTotal: 10, NewTotal: 15, OldEndsAt: time.Now().Add(time.Hour), NewEndsAt: time.Now().Add(time.Hour), ExpireAt: time.Now().Add(48 * time.Hour)}); err != nil || !ok {
		t.Fatalf("Extend: %v %v", ok, err)
	}
	if _, lowered, err := g.Lower(ctx, code, 4, reloaded); err != nil || lowered {
		t.Errorf("Lower with the version before a raise: lowered %v, %v; want refused", lowered, err)
	}
	if n := remaining(t, g, code); n != 15 {
		t.Errorf("after the refused Lower, remaining %d, want 15 (the raise kept)", n)
	}
	if left, lowered, err := g.Lower(ctx, code, 4, version(t, g, code)); err != nil || !lowered || left != 11 {
		t.Errorf("Lower with the current version = %d, %v, %v; want 11, lowered", left, lowered, err)
	}
}
