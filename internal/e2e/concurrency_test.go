package e2e

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// stampede runs n calls at once (released together) and counts outcomes.
func stampede(n int, call func(i int) string) map[string]int {
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			outcome := call(i)
			mu.Lock()
			counts[outcome]++
			mu.Unlock()
		}(i)
	}
	close(start)
	wg.Wait()
	return counts
}

func TestConcurrency_DistinctCustomersNeverOversell(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		code := createVoucher(t, s, voucherSpec{TotalLimit: 10, Flash: flash})
		counts := stampede(200, func(i int) string {
			return api.reserve(t, code, int64(1000+i), uniqueOrder(), 100).Error
		})
		if counts[""] != 10 || counts["OUT_OF_STOCK"] != 190 {
			t.Errorf("200 reserves on 10 uses: %v, want 10 successes and 190 OUT_OF_STOCK", counts)
		}
		if st := readVoucher(t, s, code); st.Used != 10 || st.Remaining != 0 {
			t.Errorf("voucher = %+v, want usedCount 10", st)
		}
		var rows int
		if err := s.db.QueryRow(context.Background(),
			`SELECT count(*) FROM voucher_redemption WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED')`, code).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != 10 {
			t.Errorf("live reservations in the database = %d, want 10", rows)
		}
	})
}

func TestConcurrency_IdenticalRequestsTakeOneUseAndAllSucceed(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		code := createVoucher(t, s, voucherSpec{TotalLimit: 5, Flash: flash})
		order := uniqueOrder()
		var createdAt sync.Map
		counts := stampede(60, func(i int) string {
			r := api.reserve(t, code, 77, order, 4200)
			if r.Error == "" {
				createdAt.Store(str(r.Reservation["createdAt"]), true)
			}
			return r.Error
		})
		if counts[""] != 60 {
			t.Errorf("60 identical reserves: %v, want 60 successes", counts)
		}
		distinct := 0
		createdAt.Range(func(any, any) bool { distinct++; return true })
		if distinct != 1 {
			t.Errorf("identical reserves returned %d different reservations", distinct)
		}
		if st := readVoucher(t, s, code); st.Used != 1 {
			t.Errorf("usedCount = %d, want 1", st.Used)
		}
		if flash {
			if st := readVoucher(t, s, code); st.GateRemaining == nil || *st.GateRemaining != 4 {
				t.Errorf("gateRemaining = %v, want 4", st.GateRemaining)
			}
		}
	})
}

func TestConcurrency_OneCustomerManyOrdersHoldsPerUserLimit(t *testing.T) {
	s := sharedServer(t)
	each(t, s, func(t *testing.T, api checkoutAPI, flash bool) {
		code := createVoucher(t, s, voucherSpec{TotalLimit: 100, PerUserLimit: 1, Flash: flash})
		counts := stampede(50, func(i int) string {
			return api.reserve(t, code, 5, uniqueOrder(), 100).Error
		})
		if counts[""] != 1 || counts["ALREADY_USED"] != 49 {
			t.Errorf("50 orders by one customer: %v, want 1 success and 49 ALREADY_USED", counts)
		}
		if st := readVoucher(t, s, code); st.Used != 1 {
			t.Errorf("usedCount = %d, want 1", st.Used)
		}
	})
}

func TestConcurrency_PerUserLimitAboveOneHolds(t *testing.T) {
	s := sharedServer(t)
	kinds(t, func(t *testing.T, flash bool) {
		api := restAPI{s}
		code := createVoucher(t, s, voucherSpec{TotalLimit: 100, PerUserLimit: 3, Flash: flash})
		var wins atomic.Int32
		counts := stampede(40, func(i int) string {
			r := api.reserve(t, code, int64(1+i%2), uniqueOrder(), 100) // two customers
			if r.Error == "" {
				wins.Add(1)
			}
			return r.Error
		})
		if counts[""] != 6 {
			t.Errorf("two customers with perUserLimit 3: %v, want 6 successes", counts)
		}
		if st := readVoucher(t, s, code); st.Used != 6 {
			t.Errorf("usedCount = %d, want 6", st.Used)
		}
	})
}
