package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// positionsOf reads the positions the database holds for a voucher row's
// reservations (released ones too), by order, and its admitted_count.
func positionsOf(t *testing.T, owner string) (map[string]int, int) {
	t.Helper()
	ctx := context.Background()
	rows, err := testPool.Query(ctx, `SELECT order_id, position FROM voucher_redemption WHERE voucher_code = $1`, owner)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var p int
		if err := rows.Scan(&id, &p); err != nil {
			t.Fatal(err)
		}
		out[id] = p
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var admitted int
	if err := testPool.QueryRow(ctx, `SELECT admitted_count FROM voucher WHERE code = $1`, owner).Scan(&admitted); err != nil {
		t.Fatal(err)
	}
	return out, admitted
}

// oneToN fails unless positions are exactly 1..n, each once.
func oneToN(t *testing.T, what string, positions []int, n int) {
	t.Helper()
	got := slices.Sorted(slices.Values(positions))
	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: positions %v, want 1..%d each once", what, got, n)
	}
}

// Winners written in batches (and the ones a batch sets aside, written one
// by one) and plain reserves, all at once on one voucher, get the numbers
// 1..limit, each once, and each answer carries its row's number; a retry
// answers the same number, and a reserve after a release gets the next one,
// never the released one's.
func TestPosition_ConcurrentWritersNumberEveryUseOnceAndNeverReuseANumber(t *testing.T) {
	ctx := context.Background()
	s := New(testPool)
	code := newFlashVoucher(t, s, 150, 1, 0)
	var mu sync.Mutex
	answered := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 240 {
		wg.Go(func() {
			<-start
			r := voucher.ReserveRequest{Code: code, CustomerID: int64(1000 + i), OrderID: unique("o"), OrderAmount: 500}
			var res voucher.Reservation
			var err error
			if i%3 == 0 {
				res, _, err = s.Reserve(ctx, r, 15*time.Minute, voucher.PathDatabase)
			} else {
				res, _, err = s.ReserveAdmitted(ctx, r, 15*time.Minute, voucher.PathGateSync)
			}
			if err == nil {
				mu.Lock()
				answered[res.OrderID] = res.Position
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	stored, admitted := positionsOf(t, code)
	if len(answered) != 150 || admitted != 150 {
		t.Fatalf("%d reserves answered, admitted_count %d; want 150 and 150", len(answered), admitted)
	}
	oneToN(t, "stored", slices.Collect(func(yield func(int) bool) {
		for _, p := range stored {
			if !yield(p) {
				return
			}
		}
	}), 150)
	for id, p := range answered {
		if stored[id] != p {
			t.Fatalf("order %s answered position %d, stored %d", id, p, stored[id])
		}
	}

	// A retry answers the same number; a release gives the use back, not
	// its number.
	var first string
	for id, p := range answered {
		if p == 1 {
			first = id
		}
	}
	var customer int64
	if err := testPool.QueryRow(ctx, `SELECT customer_id FROM voucher_redemption WHERE order_id = $1`, first).Scan(&customer); err != nil {
		t.Fatal(err)
	}
	again, created, err := s.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: customer, OrderID: first, OrderAmount: 500}, 15*time.Minute, voucher.PathDatabase)
	if err != nil || created || again.Position != 1 {
		t.Fatalf("retry of the first order: position %d, created %v, %v; want 1, a retry", again.Position, created, err)
	}
	released, _, err := s.Release(ctx, code, first, voucher.PathDatabase)
	if err != nil || released.Position != 1 {
		t.Fatalf("release of the first order: position %d, %v; want it kept (1)", released.Position, err)
	}
	next, _, err := s.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: 5000, OrderID: unique("after"), OrderAmount: 500}, 15*time.Minute, voucher.PathDatabase)
	if err != nil || next.Position != 151 {
		t.Fatalf("a reserve after a release: position %d, %v; want 151", next.Position, err)
	}
	if stored, admitted := positionsOf(t, code); stored[first] != 1 || admitted != 151 {
		t.Fatalf("after the release and a reserve: the released order holds %d, admitted_count %d; want 1 and 151", stored[first], admitted)
	}
}

// The consumer keeps the number the gate gave each event, and raises the
// voucher's count to at least the highest, so that a gate loaded from it
// continues; an event that came without a number (published before the gate
// kept them) is numbered after it. A repeated event changes nothing.
func TestPosition_TheConsumerKeepsTheGatesNumbers(t *testing.T) {
	ctx := context.Background()
	s := New(testPool)
	code := newFlashVoucher(t, s, 10, 1, 0)
	numbered := func(order string, customer int64, position int) voucher.Event {
		ev := reservedEvent(code, order, customer)
		ev.Position = position
		return ev
	}
	a, b, c := numbered(unique("a"), 1, 3), numbered(unique("b"), 2, 1), numbered(unique("c"), 3, 2)
	if _, err := s.ApplyReservedBatch(ctx, []voucher.Event{a, b, c}); err != nil {
		t.Fatal(err)
	}
	alone := numbered(unique("alone"), 4, 5)
	if _, err := s.ApplyEvent(ctx, alone); err != nil {
		t.Fatal(err)
	}
	old := reservedEvent(code, unique("old"), 5) // no number
	if _, err := s.ApplyEvent(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyReservedBatch(ctx, []voucher.Event{a, b}); err != nil {
		t.Fatal(err)
	}
	stored, admitted := positionsOf(t, code)
	want := map[string]int{a.OrderID: 3, b.OrderID: 1, c.OrderID: 2, alone.OrderID: 5, old.OrderID: 6}
	if fmt.Sprint(stored) != fmt.Sprint(want) || admitted != 6 {
		t.Fatalf("stored %v, admitted_count %d; want %v and 6", stored, admitted, want)
	}
	res, err := s.Reservation(ctx, alone.OrderID)
	if err != nil || res.Position != 5 {
		t.Fatalf("reservation of the event numbered 5: position %d, %v", res.Position, err)
	}
}

// A campaign's codes count on its voucher row: its reservations, of any of
// its codes, are numbered 1..N in the campaign's order.
func TestPosition_ACampaignsCodesShareTheCampaignsNumbers(t *testing.T) {
	ctx := context.Background()
	s := New(ownDatabase(t))
	c, codes := generatedFlashCampaign(t, s, 4, 3, 10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var answered []int
	for i := range 14 {
		wg.Go(func() {
			r := voucher.ReserveRequest{Code: codes[i%len(codes)], CustomerID: int64(100 + i), OrderID: unique("c"), OrderAmount: 500}
			res, _, err := s.Reserve(ctx, r, 15*time.Minute, voucher.PathDatabase)
			if err == nil {
				mu.Lock()
				answered = append(answered, res.Position)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	oneToN(t, "campaign "+c.Name, answered, 10)
}
