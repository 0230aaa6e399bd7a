package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"voucherd/internal/testenv"
	"voucherd/internal/voucher"
	"voucherd/migrations"
)

// The store's tests run on the test database (make test sets it up), each
// on vouchers of its own.
var (
	databaseURL = testenv.DatabaseURL()
	testPool    *pgxpool.Pool
)

func TestMain(m *testing.M) {
	ctx := context.Background()
	var err error
	testPool, err = pgxpool.New(ctx, databaseURL)
	if err == nil {
		err = testPool.Ping(ctx)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "store tests need PostgreSQL at TEST_DATABASE_URL (%s): %v; `make test` sets it up\n", databaseURL, err)
		os.Exit(1)
	}
	if _, err := migrations.Up(ctx, stdlib.OpenDBFromPool(testPool)); err != nil {
		fmt.Fprintf(os.Stderr, "migrations: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	testPool.Close()
	os.Exit(code)
}

func unique(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

func newFlashVoucher(t *testing.T, s *Store, total, perUser int, minOrder int64) string {
	t.Helper()
	code := strings.ToUpper(unique("BATCH")) // stored codes are in capitals
	_, err := s.CreateVoucher(context.Background(), voucher.NewVoucher{
		Code: code, DiscountType: voucher.DiscountFixed, DiscountAmount: 100, Currency: "USD", MinOrderAmount: minOrder, TotalLimit: total, PerUserLimit: perUser,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour), Flash: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// stored reads what the database holds for a voucher: its counters, its
// live rows, and how many transactions wrote those rows (distinct xmin).
func stored(t *testing.T, code string) (used, reserved, rows, events, writers int) {
	t.Helper()
	ctx := context.Background()
	if err := testPool.QueryRow(ctx, `SELECT used_count, reserved_count FROM voucher WHERE code = $1`, code).Scan(&used, &reserved); err != nil {
		t.Fatal(err)
	}
	if err := testPool.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text) FROM voucher_redemption WHERE voucher_code = $1 AND status = 'RESERVED'`, code).Scan(&rows, &writers); err != nil {
		t.Fatal(err)
	}
	if err := testPool.QueryRow(ctx, `SELECT count(*) FROM reservation_event WHERE voucher_code = $1 AND kind = 'reserved'`, code).Scan(&events); err != nil {
		t.Fatal(err)
	}
	return
}

// Concurrent winners are written in shared transactions, and never past the
// limit: more winners than uses (the gate one use too high after a rebuild)
// sells exactly the uses left.
func TestReserveAdmitted_ConcurrentWinnersShareTransactionsAndNeverPassTheLimit(t *testing.T) {
	s := New(testPool)
	code := newFlashVoucher(t, s, 150, 1, 0)
	const winners = 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	start := make(chan struct{})
	for i := range winners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := voucher.ReserveRequest{Code: code, CustomerID: int64(1000 + i), OrderID: unique("o"), OrderAmount: 500}
			res, created, err := s.ReserveAdmitted(context.Background(), r, 15*time.Minute, voucher.PathGateSync)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				outcomes[string(voucher.ErrorCodeOf(err))]++
			case !created || res.OrderID != r.OrderID || res.Status != voucher.StatusReserved:
				outcomes["wrong answer"]++
			default:
				outcomes["RESERVED"]++
			}
		}()
	}
	close(start)
	wg.Wait()
	if outcomes["RESERVED"] != 150 || outcomes[string(voucher.OutOfStock)] != 50 || len(outcomes) != 2 {
		t.Fatalf("200 winners on 150 uses: %v, want 150 RESERVED and 50 OUT_OF_STOCK", outcomes)
	}
	used, reserved, rows, events, writers := stored(t, code)
	if used != 150 || reserved != 150 || rows != 150 || events != 150 {
		t.Fatalf("stored: used %d, reserved %d, rows %d, reserved events %d; want 150 each", used, reserved, rows, events)
	}
	// One transaction each would be 150 writers.
	if writers > 75 {
		t.Fatalf("150 concurrent winners were written by %d transactions; batching should need far fewer", writers)
	}
	t.Logf("150 winners written by %d transactions", writers)
}

// A batch holding reserves the database must refuse or answer as retries is
// split: those get exactly the answer a single reserve gives, and the rest
// are still written together.
func TestReserveAdmitted_ABatchWithRefusalsGivesEachReserveItsOwnAnswer(t *testing.T) {
	ctx := context.Background()
	s := New(testPool)
	code := newFlashVoucher(t, s, 100, 1, 1000)
	ttl := 15 * time.Minute

	held := voucher.ReserveRequest{Code: code, CustomerID: 7, OrderID: unique("held"), OrderAmount: 2000}
	first, _, err := s.Reserve(ctx, held, ttl, voucher.PathGateSync)
	if err != nil {
		t.Fatal(err)
	}

	type want struct {
		r       voucher.ReserveRequest
		code    voucher.ErrorCode // "" for a success
		created bool
	}
	cases := []want{
		{r: held, created: false}, // an identical retry: the same reservation
		{r: voucher.ReserveRequest{Code: code, CustomerID: 7, OrderID: held.OrderID, OrderAmount: 3000}, code: voucher.OrderConflict},
		{r: voucher.ReserveRequest{Code: code, CustomerID: 7, OrderID: unique("again"), OrderAmount: 2000}, code: voucher.AlreadyUsed},
		{r: voucher.ReserveRequest{Code: code, CustomerID: 8, OrderID: unique("small"), OrderAmount: 999}, code: voucher.NotEligible},
		{r: voucher.ReserveRequest{Code: code, CustomerID: 9, OrderID: unique("twice-a"), OrderAmount: 2000}, created: true},
		{r: voucher.ReserveRequest{Code: code, CustomerID: 9, OrderID: unique("twice-b"), OrderAmount: 2000}, code: voucher.AlreadyUsed},
	}
	good := 0
	for i := range 20 {
		cases = append(cases, want{r: voucher.ReserveRequest{Code: code, CustomerID: int64(100 + i), OrderID: unique("good"), OrderAmount: 1000}, created: true})
		good++
	}
	batch := make([]*pendingWinner, len(cases))
	for i, c := range cases {
		batch[i] = &pendingWinner{ctx: ctx, owner: code, r: c.r, ttl: ttl, path: voucher.PathGateSync, done: make(chan winnerOutcome, 1)}
	}
	s.writeBatch(batch, batchSplits)

	// Customer 9's two orders race for one use in the single path: either
	// may win, exactly one does.
	var nine []string
	for i, c := range cases {
		out := <-batch[i].done
		if c.r.CustomerID == 9 {
			nine = append(nine, string(voucher.ErrorCodeOf(out.err)))
			continue
		}
		if got := voucher.ErrorCodeOf(out.err); got != c.code {
			t.Errorf("order %s (customer %d, amount %d): %v, want %q", c.r.OrderID, c.r.CustomerID, c.r.OrderAmount, out.err, c.code)
			continue
		}
		if c.code == "" && out.created != c.created {
			t.Errorf("order %s: created %v, want %v", c.r.OrderID, out.created, c.created)
		}
		if c.code == "" && !c.created && out.res != first {
			t.Errorf("the retry of %s answered %+v, want the first reservation %+v", held.OrderID, out.res, first)
		}
	}
	if one, other := nine[0], nine[1]; (one != "" || other != string(voucher.AlreadyUsed)) && (other != "" || one != string(voucher.AlreadyUsed)) {
		t.Errorf("customer 9 (perUserLimit 1), two orders: %v, want one success and one ALREADY_USED", nine)
	}

	used, reserved, rows, events, _ := stored(t, code)
	wantUsed := 1 + good + 1 // held, the good ones, one of customer 9's
	if used != wantUsed || reserved != wantUsed || rows != wantUsed || events != wantUsed {
		t.Fatalf("stored: used %d, reserved %d, rows %d, events %d; want %d each", used, reserved, rows, events, wantUsed)
	}
	var goodWriters int
	if err := testPool.QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM voucher_redemption WHERE voucher_code = $1 AND order_id LIKE 'good-%'`, code).Scan(&goodWriters); err != nil {
		t.Fatal(err)
	}
	if goodWriters != 1 {
		t.Fatalf("the %d good reserves were written by %d transactions, want one (the batch without the others)", good, goodWriters)
	}
}

// A reserve whose caller gave up before its batch began is not written.
func TestReserveAdmitted_ACallerGoneBeforeTheWriteWritesNothing(t *testing.T) {
	s := New(testPool)
	code := newFlashVoucher(t, s, 10, 1, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := &pendingWinner{ctx: ctx, owner: code, r: voucher.ReserveRequest{Code: code, CustomerID: 1, OrderID: unique("gone"), OrderAmount: 1}, ttl: time.Minute, path: voucher.PathGateSync, done: make(chan winnerOutcome, 1)}
	live := &pendingWinner{ctx: context.Background(), owner: code, r: voucher.ReserveRequest{Code: code, CustomerID: 2, OrderID: unique("live"), OrderAmount: 1}, ttl: time.Minute, path: voucher.PathGateSync, done: make(chan winnerOutcome, 1)}
	s.writeBatch([]*pendingWinner{p, live}, batchSplits)
	if out := <-p.done; voucher.ErrorCodeOf(out.err) != voucher.Unavailable {
		t.Fatalf("a caller gone before the write: %v, want UNAVAILABLE", out.err)
	}
	if out := <-live.done; out.err != nil || !out.created {
		t.Fatalf("the live reserve of the same batch: %+v", out)
	}
	if used, _, rows, _, _ := stored(t, code); used != 1 || rows != 1 {
		t.Fatalf("stored: used %d, rows %d; want 1 (only the live one)", used, rows)
	}
}

func reservedEvent(code, order string, customer int64) voucher.Event {
	at := time.UnixMilli(time.Now().UnixMilli())
	return voucher.NewEvent(voucher.EventReserved, voucher.Reservation{
		OrderID: order, VoucherCode: code, CustomerID: customer, OrderAmount: 500, DiscountAmount: 100,
		Status: voucher.StatusReserved, CreatedAt: at, ExpiresAt: at.Add(15 * time.Minute),
	}, at)
}

// The consumer's batch makes a row and counts a use only for orders the
// database does not hold, in one transaction; past a limit it applies
// nothing, so the consumer can apply the events one by one.
func TestApplyReservedBatch_CountsOnlyNewOrdersAndAppliesNothingPastALimit(t *testing.T) {
	ctx := context.Background()
	s := New(testPool)
	code := newFlashVoucher(t, s, 6, 2, 0)
	held := reservedEvent(code, unique("held"), 1)
	if _, err := s.ApplyEvent(ctx, held); err != nil {
		t.Fatal(err)
	}
	a, b, c := reservedEvent(code, unique("a"), 2), reservedEvent(code, unique("b"), 2), reservedEvent(code, unique("c"), 3)
	applied, err := s.ApplyReservedBatch(ctx, []voucher.Event{a, held, b, a, c})
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, false, true, false, true}; fmt.Sprint(applied) != fmt.Sprint(want) {
		t.Fatalf("applied %v, want %v (held before, and a repeated in the batch, are not made again)", applied, want)
	}
	used, reserved, rows, events, writers := stored(t, code)
	if used != 4 || reserved != 4 || rows != 4 || events != 4 || writers != 2 {
		t.Fatalf("stored: used %d, reserved %d, rows %d, events %d, writers %d; want 4, 4, 4, 4 and 2 transactions", used, reserved, rows, events, writers)
	}
	var customer2 int
	if err := testPool.QueryRow(ctx, `SELECT used_count FROM voucher_customer WHERE voucher_code = $1 AND customer_id = 2`, code).Scan(&customer2); err != nil || customer2 != 2 {
		t.Fatalf("customer 2 holds %d uses (%v), want 2", customer2, err)
	}

	// Three more on the two uses left: the CHECK refuses the batch whole.
	over := []voucher.Event{reservedEvent(code, unique("d"), 4), reservedEvent(code, unique("e"), 5), reservedEvent(code, unique("f"), 6)}
	var refused *voucher.EventRefusedError
	if _, err := s.ApplyReservedBatch(ctx, over); !errors.As(err, &refused) {
		t.Fatalf("three events on two uses left: %v, want a refusal", err)
	}
	if used, _, rows, _, _ := stored(t, code); used != 4 || rows != 4 {
		t.Fatalf("after the refused batch: used %d, rows %d; want 4 and 4 (nothing applied)", used, rows)
	}
}

// Concurrent reads of reservations share queries, and each gets its own
// order's answer (NOT_FOUND for an order the database does not hold). The
// table is locked while the reads arrive, so that every read is queued or
// in a query before the first query answers, however the goroutines are
// scheduled: the queries are then at most the workers' first ones and one
// more.
func TestReservation_ConcurrentReadsShareQueriesAndGetTheirOwnAnswers(t *testing.T) {
	ctx := context.Background()
	pool := ownDatabase(t)
	s := New(pool)
	code := newFlashVoucher(t, s, 100, 1, 0)
	held := map[string]voucher.Reservation{}
	for i := range 50 {
		res, _, err := s.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: int64(i + 1), OrderID: unique("read"), OrderAmount: 10}, time.Minute, voucher.PathGateSync)
		if err != nil {
			t.Fatal(err)
		}
		held[res.OrderID] = res
	}
	var orders []string
	for id := range held {
		orders = append(orders, id, unique("missing"))
	}
	before := s.lookupQueries.Load()
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, `LOCK TABLE voucher_redemption IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, len(orders))
	for _, id := range orders {
		wg.Go(func() {
			res, err := s.Reservation(ctx, id)
			want, ok := held[id]
			switch {
			case ok && (err != nil || res != want):
				errs <- fmt.Sprintf("%s: %+v, %v; want %+v", id, res, err, want)
			case !ok && voucher.ErrorCodeOf(err) != voucher.NotFound:
				errs <- fmt.Sprintf("%s (not held): %+v, %v; want NOT_FOUND", id, res, err)
			}
		})
	}
	// Every read is in once the coalescer holds them all and a query is
	// out (one worker may have taken them all). The wait stays well under
	// lookupTimeout, past which the held queries would fail.
	for deadline := time.Now().Add(lookupTimeout / 2); s.lookups.Held() < len(orders) || s.lookupQueries.Load() == before; {
		if time.Now().After(deadline) {
			t.Fatalf("the reads never all arrived: %d held, %d queries", s.lookups.Held(), s.lookupQueries.Load()-before)
		}
		time.Sleep(time.Millisecond)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	queries := s.lookupQueries.Load() - before
	if want := int64(lookupWorkers + (len(orders)-lookupWorkers+maxLookupBatch-1)/maxLookupBatch); queries > want {
		t.Fatalf("%d concurrent reads took %d queries; want at most %d (each worker's first and the rest together)", len(orders), queries, want)
	}
	t.Logf("%d concurrent reads in %d queries", len(orders), queries)
}

func TestExpireDue_GivesTheDiscountBackToTheBudget(t *testing.T) {
	t.Parallel()
	// A database of its own: the sweep releases every due row it finds,
	// and other packages' servers hold gates over the shared one.
	ctx := context.Background()
	s := New(ownDatabase(t))
	code := strings.ToUpper(unique("BUDGET"))
	budget := int64(1000)
	if _, err := s.CreateVoucher(ctx, voucher.NewVoucher{
		Code: code, DiscountType: voucher.DiscountPercent, DiscountPercent: 10, Currency: "USD", BudgetAmount: &budget,
		TotalLimit: 10, PerUserLimit: 5, StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	short := voucher.ReserveRequest{Code: code, CustomerID: 1, OrderID: unique("short"), OrderAmount: 4000}
	long := voucher.ReserveRequest{Code: code, CustomerID: 1, OrderID: unique("long"), OrderAmount: 5000}
	if _, _, err := s.Reserve(ctx, short, time.Millisecond, voucher.PathDatabase); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Reserve(ctx, long, time.Hour, voucher.PathDatabase); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Voucher(ctx, code); v.BudgetUsed != 900 {
		t.Fatalf("budgetUsed after 400 + 500 held = %d", v.BudgetUsed)
	}
	// The 600 left cannot cover a third discount of 700.
	if _, _, err := s.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: 2, OrderID: unique("over"), OrderAmount: 7000}, time.Hour, voucher.PathDatabase); voucher.ErrorCodeOf(err) != voucher.BudgetExhausted {
		t.Fatalf("a discount of 700 with 100 left: %v, want BUDGET_EXHAUSTED", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := s.ExpireDue(ctx, 10_000); err != nil {
			t.Fatal(err)
		}
		if res, err := s.Reservation(ctx, short.OrderID); err == nil && res.Status == voucher.StatusReleased {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the short reservation never expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v, _ := s.Voucher(ctx, code); v.BudgetUsed != 500 || v.UsedCount != 1 {
		t.Errorf("after the expiry of the 400: budgetUsed %d, usedCount %d; want 500 and 1", v.BudgetUsed, v.UsedCount)
	}
}
