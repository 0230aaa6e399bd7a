package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"voucherd/internal/testredis"
)

// wonOrder is an order that got a reservation, with its customer.
type wonOrder struct {
	OrderID  string
	Customer int64
}

// sale reserves n orders of distinct customers on a voucher, c at a time,
// and returns the outcomes and the orders that succeeded.
func sale(t testing.TB, api checkoutAPI, code string, firstCustomer, n, c int) (map[string]int, []wonOrder) {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	var won []wonOrder
	sem := make(chan struct{}, c)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			order := uniqueOrder()
			customer := int64(firstCustomer + i)
			r := api.reserve(t, code, customer, order, 100)
			mu.Lock()
			counts[r.Error]++
			if r.Error == "" {
				won = append(won, wonOrder{order, customer})
			}
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	return counts, won
}

// liveRows counts a voucher's RESERVED and CONFIRMED rows in db.
func liveRows(t testing.TB, db *pgxpool.Pool, code string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(),
		`SELECT count(*) FROM voucher_redemption WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED')`, code).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestFlash_ThousandConcurrentReservesSellExactlyFifty(t *testing.T) {
	s := sharedServer(t)
	code := createVoucher(t, s, voucherSpec{TotalLimit: 50, Flash: true})
	counts := stampede(1000, func(i int) string {
		return restAPI{s}.reserve(t, code, int64(10_000+i), uniqueOrder(), 100).Error
	})
	if counts[""] != 50 || counts["OUT_OF_STOCK"] != 950 {
		t.Errorf("1,000 reserves on 50 uses: %v, want 50 successes and 950 OUT_OF_STOCK", counts)
	}
	st := readVoucher(t, s, code)
	if st.Used != 50 || liveRows(t, s.db, code) != 50 || st.GateRemaining == nil || *st.GateRemaining != 0 {
		t.Errorf("after the sale: %+v gate %s, live rows %d; want 50 used and the gate at 0", st, deref(st.GateRemaining), liveRows(t, s.db, code))
	}
}

func TestFlash_TwoServersShareOneGate(t *testing.T) {
	t.Parallel()
	a, b := startServer(t, nil), startServer(t, nil)
	code := createVoucher(t, a, voucherSpec{TotalLimit: 30, Flash: true})
	counts := stampede(400, func(i int) string {
		srv := a
		if i%2 == 1 {
			srv = b
		}
		return restAPI{srv}.reserve(t, code, int64(20_000+i), uniqueOrder(), 100).Error
	})
	if counts[""] != 30 || counts["OUT_OF_STOCK"] != 370 {
		t.Errorf("400 reserves over two servers on 30 uses: %v, want exactly 30 successes", counts)
	}
	if st := readVoucher(t, b, code); st.Used != 30 || liveRows(t, b.db, code) != 30 {
		t.Errorf("after the sale: %+v, live rows %d", st, liveRows(t, b.db, code))
	}
}

// metricValue reads one sample of the server's /metrics.
func metricValue(t testing.TB, s *server, sample string) float64 {
	t.Helper()
	resp, err := httpClient.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err != nil {
				t.Fatalf("metric %s: %q is not a number", sample, rest)
			}
			return v
		}
	}
	return 0
}

func TestFlash_SaleCostsTheDatabaseAboutOneWritePerUse(t *testing.T) {
	t.Parallel()
	// Its own counters, and a database of its own: a kafka-mode server of
	// the suite on the shared database warms every flash voucher there,
	// and a rebuild racing this sale's winners in flight would make extra
	// writes (few since the gate drops what the database refuses as sold
	// out, but more than this test's bound).
	dbURL, db := ownDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL})
	code := createVoucher(t, s, voucherSpec{TotalLimit: 1000, Flash: true})
	const writes = `voucher_database_writes_total{op="reserve"}`
	before := metricValue(t, s, writes)
	counts, _ := sale(t, restAPI{s}, code, 100_000, 20_000, 128)
	after := metricValue(t, s, writes)
	if counts[""] != 1000 {
		t.Errorf("20,000 reserves on 1,000 uses: %v, want 1,000 successes", counts)
	}
	if got := after - before; got > 1010 {
		t.Errorf("the sale sent %v reserve writes to the database, want about 1,000 (at most 1,010)", got)
	} else {
		t.Logf("a 1,000-use flash sale hit by 20,000 requests cost the database %v reserve writes", got)
	}
	if st := readVoucher(t, s, code); st.Used != 1000 || liveRows(t, db, code) != 1000 {
		t.Errorf("after the sale: %+v", st)
	}
	// The winners arrive together and are written in shared transactions
	// (rows inserted by one transaction share its xmin): one each would be
	// 1,000.
	var transactions int
	if err := db.QueryRow(context.Background(),
		`SELECT count(DISTINCT xmin::text) FROM voucher_redemption WHERE voucher_code = $1`, code).Scan(&transactions); err != nil {
		t.Fatal(err)
	}
	if transactions > 500 {
		t.Errorf("the 1,000 winners were written by %d transactions; want them batched", transactions)
	} else {
		t.Logf("the 1,000 winners were written by %d transactions", transactions)
	}
}

// ownRedisServer runs voucherd against a Redis of the test's own, which the
// test may flush, stop and restart.
func ownRedisServer(t *testing.T) (*server, *testredis.Server, *redis.Client, *pgxpool.Pool) {
	t.Helper()
	rs := testredis.Start(t)
	dbURL, db := ownDatabase(t)
	s := startServer(t, map[string]string{"REDIS_URL": rs.URL, "DATABASE_URL": dbURL})
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return s, rs, rdb, db
}

func TestFlash_RedisLosingItsDataMidSaleNeverOversells(t *testing.T) {
	t.Parallel()
	s, _, rdb, db := ownRedisServer(t)
	api := restAPI{s}
	code := createVoucher(t, s, voucherSpec{TotalLimit: 40, Flash: true})
	counts1, won := sale(t, api, code, 1, 25, 8)
	if counts1[""] != 25 {
		t.Fatalf("first half: %v", counts1)
	}
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	// A retry of an order reserved before the loss still gets its
	// reservation and takes no second use.
	if r := api.reserve(t, code, won[0].Customer, won[0].OrderID, 100); r.Error != "" {
		t.Errorf("retry after FLUSHALL: %q, want the reservation", r.Error)
	}
	counts2, _ := sale(t, api, code, 1000, 100, 16)
	st := readVoucher(t, s, code)
	if st.Used != 40 || liveRows(t, db, code) != 40 {
		t.Errorf("after FLUSHALL and the rest of the sale: %+v, live rows %d; want exactly 40 sold (second half %v)", st, liveRows(t, db, code), counts2)
	}
	if counts2[""] != 15 {
		t.Errorf("the sale resumed with %v, want the 15 uses left sold", counts2)
	}
	if st.GateRemaining == nil || *st.GateRemaining != 0 {
		t.Errorf("gate after the sale = %s, want 0", deref(st.GateRemaining))
	}
}

func TestFlash_RetryAfterRedisLostItsDataFindsTheReservation(t *testing.T) {
	t.Parallel()
	s, _, rdb, _ := ownRedisServer(t)
	for _, api := range transports(s) {
		code := createVoucher(t, s, voucherSpec{TotalLimit: 5, Flash: true})
		order := uniqueOrder()
		first := api.reserve(t, code, 9, order, 100)
		if first.Error != "" {
			t.Fatalf("reserve: %s", first.Error)
		}
		if err := rdb.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		again := api.reserve(t, code, 9, order, 100)
		if again.Error != "" || str(again.Reservation["createdAt"]) != str(first.Reservation["createdAt"]) {
			t.Errorf("%s: retry after the gate lost its data = %q %v, want the same reservation", api.name(), again.Error, again.Reservation)
		}
		st := readVoucher(t, s, code)
		if st.Used != 1 || st.GateRemaining == nil || *st.GateRemaining != 4 {
			t.Errorf("%s: after the retry: %+v gate %s, want 1 used and the gate rebuilt at 4", api.name(), st, deref(st.GateRemaining))
		}
	}
}

func TestFlash_RedisDownIsUnavailableAndHoldsNothing(t *testing.T) {
	t.Parallel()
	s, rs, _, db := ownRedisServer(t)
	flash := createVoucher(t, s, voucherSpec{TotalLimit: 10, Flash: true})
	ordinary := createVoucher(t, s, voucherSpec{TotalLimit: 10})
	rs.Stop()
	for _, api := range transports(s) {
		if r := api.reserve(t, flash, 1, uniqueOrder(), 100); r.Error != "UNAVAILABLE" {
			t.Errorf("%s: flash reserve with Redis down = %q, want UNAVAILABLE", api.name(), r.Error)
		}
		// Ordinary vouchers do not need Redis.
		if r := api.reserve(t, ordinary, 1+int64(len(api.name())), uniqueOrder(), 100); r.Error != "" {
			t.Errorf("%s: ordinary reserve with Redis down = %q", api.name(), r.Error)
		}
	}
	if n := liveRows(t, db, flash); n != 0 {
		t.Errorf("%d uses held while Redis was down", n)
	}
	if r := do(t, http.MethodGet, s.URL+"/readyz", "", nil); r.Status != http.StatusServiceUnavailable {
		t.Errorf("/readyz with Redis down: HTTP %d, want 503", r.Status)
	}
}

func TestFlash_RedisRestartMidSaleResumesWithoutOverselling(t *testing.T) {
	t.Parallel()
	s, rs, _, db := ownRedisServer(t)
	api := restAPI{s}
	code := createVoucher(t, s, voucherSpec{TotalLimit: 30, Flash: true})
	_, won := sale(t, api, code, 1, 10, 4)
	rs.Restart(t) // no persistence: the gate's data is gone
	counts, _ := sale(t, api, code, 500, 100, 16)
	if r := api.reserve(t, code, won[0].Customer, won[0].OrderID, 100); r.Error != "" {
		t.Errorf("retry of an order reserved before the restart = %q, want the reservation", r.Error)
	}
	st := readVoucher(t, s, code)
	if st.Used != 30 || liveRows(t, db, code) != 30 || counts[""] != 20 {
		t.Errorf("after the restart: %+v, live rows %d, second half %v; want exactly 30 sold", st, liveRows(t, db, code), counts)
	}
}

func TestFlash_ScriptFlushIsInvisible(t *testing.T) {
	t.Parallel()
	s, _, rdb, _ := ownRedisServer(t)
	api := restAPI{s}
	code := createVoucher(t, s, voucherSpec{TotalLimit: 10, Flash: true})
	sale(t, api, code, 1, 3, 3)
	if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	counts, _ := sale(t, api, code, 100, 20, 5)
	if counts[""] != 7 || readVoucher(t, s, code).Used != 10 {
		t.Errorf("after SCRIPT FLUSH: %v, want the 7 uses left sold", counts)
	}
}

func TestFlash_GateOnARedisCluster(t *testing.T) {
	t.Parallel()
	cluster := testredis.StartCluster(t)
	dbURL, _ := ownDatabase(t)
	s := startServer(t, map[string]string{"REDIS_URL": cluster.URL, "DATABASE_URL": dbURL})
	each(t, s, func(t *testing.T, api checkoutAPI, _ bool) {
		code := createVoucher(t, s, voucherSpec{TotalLimit: 20, Flash: true})
		counts := stampede(100, func(i int) string {
			return api.reserve(t, code, int64(i+1), uniqueOrder(), 100).Error
		})
		if counts[""] != 20 {
			t.Errorf("100 reserves on 20 uses over a cluster: %v", counts)
		}
		if st := readVoucher(t, s, code); st.Used != 20 || st.GateRemaining == nil || *st.GateRemaining != 0 {
			t.Errorf("after the sale: %+v gate %s", st, deref(st.GateRemaining))
		}
	})
}

func TestFlash_SoldOutCrowdIsAnsweredFromMemoryWithTheGatesVerdicts(t *testing.T) {
	t.Parallel()
	// Its own counters, and a sold-out snapshot that outlives the test: on a
	// loaded machine the crowd below may take longer than the 2 s default,
	// and a lapsed snapshot asks the gate again (as it should).
	s := startServer(t, map[string]string{"SOLD_OUT_TTL": "1m"})
	api := restAPI{s}
	code := createVoucher(t, s, voucherSpec{TotalLimit: 3, Flash: true})
	_, won := sale(t, api, code, 1, 3, 3)
	if len(won) != 3 {
		t.Fatalf("sold %d of 3", len(won))
	}
	// The first refusal notes the sold-out gate.
	if r := api.reserve(t, code, 100, uniqueOrder(), 100); r.Error != "OUT_OF_STOCK" {
		t.Fatalf("reserve on a sold-out voucher = %q", r.Error)
	}
	const gateReserves = `voucher_gate_calls_total{op="reserve",result="ok"}`
	before := metricValue(t, s, gateReserves)
	counts, _ := sale(t, api, code, 1000, 200, 20)
	// Winners retrying still get their reservation, and a customer at their
	// limit still hears ALREADY_USED, all without Redis.
	retry := api.reserve(t, code, won[1].Customer, won[1].OrderID, 100)
	again := api.reserve(t, code, won[1].Customer, uniqueOrder(), 100)
	conflict := api.reserve(t, code, won[1].Customer, won[1].OrderID, 999)
	after := metricValue(t, s, gateReserves)
	if counts["OUT_OF_STOCK"] != 200 {
		t.Errorf("the late crowd: %v, want 200 OUT_OF_STOCK", counts)
	}
	if retry.Error != "" || again.Error != "ALREADY_USED" || conflict.Error != "ORDER_CONFLICT" {
		t.Errorf("retry, another order of a winner, conflicting retry = %q, %q, %q; want success, ALREADY_USED, ORDER_CONFLICT", retry.Error, again.Error, conflict.Error)
	}
	if after != before {
		t.Errorf("the sold-out crowd made %v gate calls, want none while the sold-out snapshot is fresh", after-before)
	}
	if st := readVoucher(t, s, code); st.Used != 3 {
		t.Errorf("usedCount = %d", st.Used)
	}
}

// A gate a few uses too high (a rebuild that raced winners in flight) lets
// that many orders through to the database, which refuses them as sold out;
// each refusal keeps its use out of the gate, so the gate converges to the
// database instead of sending every later request there.
func TestFlash_AGateTooHighConvergesInsteadOfSendingEveryRequestToTheDatabase(t *testing.T) {
	t.Parallel()
	dbURL, _ := ownDatabase(t) // no other server rebuilds this gate
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL})
	api := restAPI{s}
	code := createVoucher(t, s, voucherSpec{TotalLimit: 20, Flash: true})
	for i := range 20 {
		if r := api.reserve(t, code, int64(1+i), uniqueOrder(), 100); r.Error != "" {
			t.Fatalf("reserve %d of 20: %s", i+1, r.Error)
		}
	}
	rdb := redis.NewClient(mustRedisOptions(t))
	defer rdb.Close()
	if err := rdb.IncrBy(context.Background(), "voucher:{"+code+"}:stock", 5).Err(); err != nil {
		t.Fatal(err)
	}
	const writes = `voucher_database_writes_total{op="reserve"}`
	before := metricValue(t, s, writes)
	counts := stampede(200, func(i int) string {
		return api.reserve(t, code, int64(1000+i), uniqueOrder(), 100).Error
	})
	if counts["OUT_OF_STOCK"] != 200 {
		t.Errorf("200 reserves on a sold-out voucher whose gate is 5 too high: %v, want OUT_OF_STOCK only", counts)
	}
	if got := metricValue(t, s, writes) - before; got != 5 {
		t.Errorf("%v reserve writes reached the database, want the 5 the gate wrongly held, then none", got)
	}
	if st := readVoucher(t, s, code); st.Used != 20 || st.GateRemaining == nil || *st.GateRemaining != 0 {
		t.Errorf("after the late crowd: %+v (gate %v), want used 20 and the gate at 0", st, deref(st.GateRemaining))
	}
}

// A retry sent while its order's first request waits for the database
// write (the gate says DUPLICATE) waits for that write and answers from its
// row, instead of writing the order in a transaction of its own: at a
// sale's start every order is in flight, and such transactions queued on
// the order's key and the voucher's row behind the winners' batches.
func TestFlash_RetryOfAnOrderBeingWrittenWaitsForThatWrite(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	db := s.db
	ctx := context.Background()
	code := createVoucher(t, s, voucherSpec{TotalLimit: 10, Flash: true})
	const writes = `voucher_database_writes_total{op="reserve"}`
	before := metricValue(t, s, writes)

	// The voucher's row locked FOR UPDATE holds the first request's batch
	// at its foreign-key check, after the gate admitted it.
	hold, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	var holder int
	if err := hold.QueryRow(ctx, `SELECT pg_backend_pid() FROM voucher WHERE code = $1 FOR UPDATE`, code).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	api := restAPI{s}
	order := uniqueOrder()
	answers := make(chan result, 2)
	// Each answers, even when api.reserve fails the test (t.Fatalf ends
	// its goroutine): the test then fails instead of waiting forever.
	reserve := func() {
		var r result
		defer func() { answers <- r }()
		r = api.reserve(t, code, 42, order, 5000)
	}
	go reserve()
	blocked := func() int {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, holder).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); blocked() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first request's write never reached the database")
		}
	}
	go reserve()
	select {
	case r := <-answers:
		t.Fatalf("an answer while the order's write is held: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	first, second := <-answers, <-answers
	if first.Error != "" || second.Error != "" {
		t.Fatalf("reserve and its retry: %q, %q", first.Error, second.Error)
	}
	assertSameReservation(t, first, second)
	if got := metricValue(t, s, writes) - before; got != 1 {
		t.Errorf("the order and its retry sent %v reserve writes to the database, want 1 (the retry waits for the first)", got)
	}
	if st := readVoucher(t, s, code); st.Used != 1 || liveRows(t, db, code) != 1 {
		t.Errorf("after the order and its retry: %+v, live rows %d", st, liveRows(t, db, code))
	}
}
