package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"voucherd/internal/gate"
	"voucherd/internal/testenv"
)

// budgetUsed reads the voucher's budgetUsed through the API.
func budgetUsed(t testing.TB, s *server, code string) int64 {
	t.Helper()
	r := gql(t, s, adminToken, `query($c: String!) { voucher(code: $c) { budgetAmount budgetUsed } }`, map[string]any{"c": code})
	return num(t, path(r.Body, "data", "voucher", "budgetUsed"))
}

// heldDiscounts sums the discounts of the voucher's RESERVED and CONFIRMED rows.
func heldDiscounts(t testing.TB, s *server, code string) int64 {
	t.Helper()
	var sum int64
	if err := s.db.QueryRow(context.Background(),
		`SELECT coalesce(sum(discount_amount), 0) FROM voucher_redemption WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED')`, code).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	return sum
}

// budgetUnderConcurrency: 1,000 uses, a budget of 10,000 and 10 % off; 500
// reserves of order amounts from 1,000 to 2,999 at once (discounts 100-299,
// about 100,000 asked): the held discounts never add up to more than the
// budget, every refusal is one the budget left could not cover, and a
// release gives its discount back.
// In kafka mode the database follows the answers: kafka waits for it.
func budgetUnderConcurrency(t *testing.T, s *server, api checkoutAPI, flash, kafka bool) {
	const budget = 10_000
	code := discountVoucher(t, s, flash, map[string]any{"discountType": "PERCENT", "discountPercent": 10, "budgetAmount": budget})
	amount := func(i int) int64 { return 1000 + int64(i*337%2000) }
	var mu sync.Mutex
	won := map[int]string{}
	counts := stampede(500, func(i int) string {
		order := uniqueOrder()
		r := api.reserve(t, code, int64(10_000+i), order, amount(i))
		if r.Error == "" {
			if got, want := num(t, r.Reservation["discountAmount"]), amount(i)/10; got != want {
				t.Errorf("order of %d: discount %d, want %d", amount(i), got, want)
			}
			mu.Lock()
			won[i] = order
			mu.Unlock()
		}
		return r.Error
	})
	if counts[""]+counts["BUDGET_EXHAUSTED"] != 500 || counts[""] == 0 || counts["BUDGET_EXHAUSTED"] == 0 {
		t.Fatalf("500 reserves asking ~100,000 of a 10,000 budget: %v, want successes and BUDGET_EXHAUSTED only", counts)
	}
	if kafka {
		waitCounters(t, s, code, counts[""], counts[""], 0)
	}
	held := heldDiscounts(t, s, code)
	if held > budget {
		t.Fatalf("the held discounts add up to %d, over the budget of %d", held, budget)
	}
	var sum int64
	for i := range won {
		sum += amount(i) / 10
	}
	if held != sum || budgetUsed(t, s, code) != held {
		t.Errorf("held discounts: rows %d, answers %d, budgetUsed %d; want all equal", held, sum, budgetUsed(t, s, code))
	}
	// Nothing was refused that the budget could cover: no release happened
	// meanwhile, so the budget left at the end was left all along.
	for i := range 500 {
		if _, ok := won[i]; !ok && amount(i)/10 <= budget-held {
			t.Errorf("order of %d (discount %d) was refused with %d of the budget left", amount(i), amount(i)/10, budget-held)
		}
	}
	t.Logf("%d reserves held %d of the %d budget", counts[""], held, budget)

	// A release gives its discount back, and it sells again; a confirm
	// keeps it spent.
	var released, confirmed int
	var freed int64
	for i, order := range won {
		switch {
		case released < 5:
			if r := api.release(t, code, order); r.Error != "" {
				t.Fatalf("release: %s", r.Error)
			}
			released++
			freed += amount(i) / 10
		case confirmed < 5:
			if r := api.confirm(t, code, order); r.Error != "" {
				t.Fatalf("confirm: %s", r.Error)
			}
			confirmed++
		}
	}
	if kafka {
		waitCounters(t, s, code, counts[""]-released, counts[""]-released-confirmed, confirmed)
	}
	if got := budgetUsed(t, s, code); got != held-freed || heldDiscounts(t, s, code) != got {
		t.Errorf("budgetUsed after releasing %d of discount = %d (rows %d), want %d", freed, got, heldDiscounts(t, s, code), held-freed)
	}
	left := budget - (held - freed)
	if r := api.reserve(t, code, 99_999, uniqueOrder(), left*10); r.Error != "" || num(t, r.Reservation["discountAmount"]) != left {
		t.Errorf("a reserve whose discount is exactly the %d given back = %q %v, want it held", left, r.Error, r.Reservation)
	}
	if r := api.reserve(t, code, 99_998, uniqueOrder(), 10); r.Error != "BUDGET_EXHAUSTED" {
		t.Errorf("a discount of 1 with nothing left = %q, want BUDGET_EXHAUSTED", r.Error)
	}
	if r := api.reserve(t, code, 99_997, uniqueOrder(), 9); r.Error != "" {
		t.Errorf("a discount of 0 with nothing left = %q, want it held", r.Error)
	}
}

func TestBudget_HeldDiscountsNeverPassTheBudgetUnderConcurrency(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) { budgetUnderConcurrency(t, s, api, flash, false) })
}

func TestBudget_OutOfStockComesBeforeBudgetExhausted(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		code := discountVoucher(t, s, flash, map[string]any{"totalLimit": 1, "budgetAmount": 1000})
		if r := api.reserve(t, code, 1, uniqueOrder(), 5000); r.Error != "" {
			t.Fatalf("first reserve: %s", r.Error)
		}
		if r := api.reserve(t, code, 2, uniqueOrder(), 5000); r.Error != "OUT_OF_STOCK" {
			t.Errorf("no use and no budget left: %q, want OUT_OF_STOCK", r.Error)
		}
	})
}

func TestBudget_HeldDiscountsNeverPassTheBudgetUnderConcurrencyInKafkaMode(t *testing.T) {
	t.Parallel()
	s := kafkaServer(t, nil)
	kafkaEach(t, s, func(t *testing.T, api checkoutAPI) { budgetUnderConcurrency(t, s, api, true, true) })
}

func TestBudget_TheFlashGateRefusesWhatTheBudgetCannotCoverWithoutTheDatabase(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil) // its own counters
	code := discountVoucher(t, s, true, map[string]any{"discountAmount": 100, "budgetAmount": 2000})
	const writes = `voucher_database_writes_total{op="reserve"}`
	before := metricValue(t, s, writes)
	counts := stampede(300, func(i int) string {
		return restAPI{s}.reserve(t, code, int64(1+i), uniqueOrder(), 5000).Error
	})
	if counts[""] != 20 || counts["BUDGET_EXHAUSTED"] != 280 {
		t.Errorf("300 reserves of 100 off on a budget of 2,000: %v, want 20 successes and 280 BUDGET_EXHAUSTED", counts)
	}
	if got := metricValue(t, s, writes) - before; got > 25 {
		t.Errorf("the database got %v reserve writes for 20 winners: the gate let the budget's refusals through", got)
	}
}

// rebuiltGateKeepsTheBudget: the gate of a flash voucher with a budget loses
// its keys mid-sale; the gate rebuilt from the database's snapshot keeps
// what the held discounts spent, so it refuses what the budget left cannot
// cover and never lets the held discounts pass the budget.
func rebuiltGateKeepsTheBudget(t *testing.T, s *server, kafka bool) {
	api := restAPI{s}
	code := discountVoucher(t, s, true, map[string]any{"discountAmount": 1000, "budgetAmount": 3500})
	for i := range 3 {
		if r := api.reserve(t, code, int64(1+i), uniqueOrder(), 5000); r.Error != "" {
			t.Fatalf("reserve %d: %s", i, r.Error)
		}
	}
	if kafka {
		waitCounters(t, s, code, 3, 3, 0)
	}
	rdb, err := gate.NewClient(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if err := gate.New(rdb).Unload(context.Background(), code); err != nil {
		t.Fatal(err)
	}
	// 500 of the budget is left: a discount of 1,000 does not fit, one of
	// 500 (an order of 500) does, once.
	var first result
	testenv.Eventually(t, "a reserve on the rebuilt gate", func() (bool, string) {
		first = api.reserve(t, code, 10, uniqueOrder(), 5000)
		return first.Error != "UNAVAILABLE", first.Error
	})
	if first.Error != "BUDGET_EXHAUSTED" {
		t.Errorf("a discount of 1,000 with 500 of the budget left after the rebuild = %q, want BUDGET_EXHAUSTED", first.Error)
	}
	if r := api.reserve(t, code, 11, uniqueOrder(), 500); r.Error != "" {
		t.Errorf("a discount of 500 with 500 left = %q, want it held", r.Error)
	}
	if r := api.reserve(t, code, 12, uniqueOrder(), 1); r.Error != "BUDGET_EXHAUSTED" {
		t.Errorf("a discount of 1 with nothing left = %q, want BUDGET_EXHAUSTED", r.Error)
	}
	if kafka {
		waitCounters(t, s, code, 4, 4, 0)
	}
	if held := heldDiscounts(t, s, code); held != 3500 {
		t.Errorf("held discounts after the rebuild = %d, want the whole budget of 3,500 and no more", held)
	}
}

func TestBudget_ARebuiltGateKeepsWhatTheHeldDiscountsSpent(t *testing.T) {
	t.Parallel()
	rebuiltGateKeepsTheBudget(t, sharedServer(t), false)
}

func TestBudget_ARebuiltGateKeepsWhatTheHeldDiscountsSpentInKafkaMode(t *testing.T) {
	t.Parallel()
	rebuiltGateKeepsTheBudget(t, kafkaServer(t, nil), true)
}

// The expiry sweep gives a reservation's discount back to the budget, in the
// database and at the flash gate: a budget spent by reservations that
// expired serves new orders again.
func TestExpiry_GivesTheDiscountsBackToTheBudget(t *testing.T) {
	t.Parallel()
	dbURL, _ := ownDatabase(t) // the sweep acts on every row of its database
	s := startServer(t, map[string]string{"RESERVATION_TTL": "1s", "EXPIRY_INTERVAL": "200ms", "DATABASE_URL": dbURL})
	kinds(t, func(t *testing.T, flash bool) {
		api := restAPI{s}
		code := discountVoucher(t, s, flash, map[string]any{"discountType": "PERCENT", "discountPercent": 10, "budgetAmount": 1000})
		for i := range 10 {
			if r := api.reserve(t, code, int64(i+1), uniqueOrder(), 1000); r.Error != "" {
				t.Fatalf("reserve %d of 10 discounts of 100 on a budget of 1,000: %s", i+1, r.Error)
			}
		}
		if r := api.reserve(t, code, 11, uniqueOrder(), 1000); r.Error != "BUDGET_EXHAUSTED" {
			t.Fatalf("the 11th discount of 100 on a spent budget: %q, want BUDGET_EXHAUSTED", r.Error)
		}
		deadline := time.Now().Add(15 * time.Second)
		for budgetUsed(t, s, code) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("budgetUsed %d after the reservations expired, want 0", budgetUsed(t, s, code))
			}
			time.Sleep(100 * time.Millisecond)
		}
		// The gate's budget is given back after the database's: a reserve
		// may still hear BUDGET_EXHAUSTED for a moment.
		for {
			r := api.reserve(t, code, 12, uniqueOrder(), 1000)
			if r.Error == "" {
				if d := num(t, r.Reservation["discountAmount"]); d != 100 {
					t.Errorf("discount after the budget came back: %d, want 100", d)
				}
				break
			}
			if r.Error != "BUDGET_EXHAUSTED" || time.Now().After(deadline) {
				t.Fatalf("a reserve after the budget came back: %q", r.Error)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
