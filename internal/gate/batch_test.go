package gate_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/gate"
	"voucherd/internal/testredis"
	"voucherd/internal/voucher"
)

// kafkaGate loads code's gate as kafka mode does (a window open now, an
// epoch), with uses uses and a per-customer limit of one.
func kafkaGate(t *testing.T, uses int) (code, epoch string, admit func(orderID string, customer int64) voucher.Admission, settle func(op voucher.SettleOp, o voucher.GateOrder, epoch string) (voucher.SettleAnswer, voucher.GateOrder, error), scripts func() int64) {
	t.Helper()
	g, rdb := newGate(t)
	code = newCode(t)
	epoch = loadKafkaGate(t, g, voucher.GateSnapshot{Code: code, Remaining: uses, PerUserLimit: 1}, 15*time.Minute)
	admit = func(orderID string, customer int64) voucher.Admission {
		t.Helper()
		a, err := g.Admit(context.Background(), code, voucher.ReserveRequest{Code: code, OrderID: orderID, CustomerID: customer, OrderAmount: 5000}, 100)
		if err != nil || a.Verdict != voucher.GateAdmitted {
			t.Fatalf("admit %s: %+v %v", orderID, a, err)
		}
		return a
	}
	settle = func(op voucher.SettleOp, o voucher.GateOrder, epoch string) (voucher.SettleAnswer, voucher.GateOrder, error) {
		return g.Settle(context.Background(), code, op, o, epoch, 100)
	}
	scripts = func() int64 { return evalshaCalls(t, rdb) }
	return code, epoch, admit, settle, scripts
}

// loadKafkaGate loads a kafka-mode gate for snap (its window open from a
// minute ago for an hour, reservations held ttl, admissions leased 5 s) and
// returns its epoch.
func loadKafkaGate(t *testing.T, g *gate.Gate, snap voucher.GateSnapshot, ttl time.Duration) (epoch string) {
	t.Helper()
	epoch = "e-" + newCode(t)
	now := time.Now()
	snap.ExpireAt, snap.TakenAt = now.Add(time.Hour), now
	terms := voucher.GateTerms{Epoch: epoch, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), DatabaseNow: now, TTL: ttl, Lease: 5 * time.Second}
	if ok, err := g.Recover(context.Background(), snap, terms, "load"); err != nil || !ok {
		t.Fatalf("load: %v %v", ok, err)
	}
	return epoch
}

// The finalizes of one voucher that arrive together share a script call;
// each is still decided as if alone: its own answer, its own order, and an
// impostor (a stale token) in the same stampede refused without touching
// the others.
func TestSettle_ConcurrentFinalizesEachGetTheirOwnAnswer(t *testing.T) {
	code, epoch, admit, settle, scripts := kafkaGate(t, 400)
	const n = 300
	admissions := make([]voucher.Admission, n)
	for i := range n {
		admissions[i] = admit(code+"-o"+strconv.Itoa(i), int64(i+1))
	}
	type outcome struct {
		answer voucher.SettleAnswer
		after  voucher.GateOrder
		err    error
	}
	before := scripts()
	outs := make([]outcome, n)
	stale := make([]outcome, n/10)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			a, after, err := settle(voucher.SettleFinalize, admissions[i].Order, epoch)
			outs[i] = outcome{a, after, err}
		})
		if i%10 == 0 {
			wg.Go(func() {
				o := admissions[i].Order
				o.CreatedAt = o.CreatedAt.Add(-time.Second) // another admission's token
				a, after, err := settle(voucher.SettleFinalize, o, epoch)
				stale[i/10] = outcome{a, after, err}
			})
		}
	}
	wg.Wait()
	// Other tests share this Redis: the bound is loose, the batching shows.
	if calls := scripts() - before; calls >= n {
		t.Errorf("%d scripts ran for %d finalizes: none was batched", calls, n+n/10)
	}
	for i, o := range outs {
		want := admissions[i].Order
		if o.err != nil || o.answer != voucher.SettleOK || o.after.OrderID != want.OrderID || o.after.CustomerID != want.CustomerID ||
			!o.after.CreatedAt.Equal(want.CreatedAt) || o.after.Pending || o.after.Void {
			t.Errorf("finalize %d: %q %+v %v; want OK and the order live", i, o.answer, o.after, o.err)
		}
	}
	for i, o := range stale {
		if o.err != nil || o.answer != voucher.SettleFail {
			t.Errorf("finalize with a stale token %d: %q %v; want FAIL", i, o.answer, o.err)
		}
	}
	// Live, not pending: a give-back by the owner is refused now.
	if a, _, err := settle(voucher.SettleForget, admissions[0].Order, epoch); err != nil || a != voucher.SettleFail {
		t.Errorf("forget of a finalized admission: %q %v, want FAIL", a, err)
	}
}

// An admission missing from the gate in its own epoch marks the gate as
// having lost data; the admissions settled after it in the same call see a
// stale gate, as they would in calls of their own.
func TestSettle_AMissingAdmissionMarksTheGateStaleForTheRestOfItsBatch(t *testing.T) {
	code, epoch, admit, settle, _ := kafkaGate(t, 10)
	a := admit(code+"-a", 1)
	missing := a.Order
	missing.OrderID = code + "-never-admitted"
	if ans, _, err := settle(voucher.SettleFinalize, missing, epoch); err != nil || ans != voucher.SettleStale {
		t.Fatalf("finalize of an admission the gate lacks in its own epoch: %q %v, want STALE", ans, err)
	}
	if ans, _, err := settle(voucher.SettleFinalize, a.Order, epoch); err != nil || ans != voucher.SettleStale {
		t.Errorf("finalize on a gate marked lost-data: %q %v, want STALE", ans, err)
	}
}

// The reserves of one voucher that arrive together share a script call
// (admit.lua decides a batch); each is decided as if alone, in order: never
// more admissions than uses, one per customer, one per orderId (its
// concurrent copies wait: PENDING), the budget never overdrawn.
func TestAdmit_ConcurrentReservesAreDecidedAsIfAlone(t *testing.T) {
	g, rdb := newGate(t)
	code := newCode(t)
	budget := int64(45 * 100) // 45 discounts of 100: the budget runs out before the 50 uses
	loadKafkaGate(t, g, voucher.GateSnapshot{Code: code, Remaining: 50, PerUserLimit: 1, Budget: &budget}, 15*time.Minute)
	const customers = 120
	verdicts := make([]voucher.GateVerdict, 0, 3*customers)
	var mu sync.Mutex
	var wg sync.WaitGroup
	admit := func(order string, customer int64) {
		a, err := g.Admit(context.Background(), code, voucher.ReserveRequest{Code: code, OrderID: order, CustomerID: customer, OrderAmount: 5000}, 100)
		if err != nil {
			t.Errorf("admit %s: %v", order, err)
			return
		}
		mu.Lock()
		verdicts = append(verdicts, a.Verdict)
		mu.Unlock()
	}
	for c := range customers {
		order := code + "-c" + strconv.Itoa(c)
		wg.Go(func() { admit(order, int64(c+1)) })
		wg.Go(func() { admit(order, int64(c+1)) })          // its concurrent copy
		wg.Go(func() { admit(order+"-other", int64(c+1)) }) // the same customer's second order
	}
	wg.Wait()
	count := map[voucher.GateVerdict]int{}
	for _, v := range verdicts {
		count[v]++
	}
	// 45 admitted (the budget), each customer's other request refused or
	// waiting, the rest of the crowd refused for the budget.
	if count[voucher.GateAdmitted] != 45 {
		t.Errorf("admitted %d, want 45 (the budget's worth): %v", count[voucher.GateAdmitted], count)
	}
	if got := count[voucher.GateAdmitted] + count[voucher.GatePending] + count[voucher.GateAlreadyUsed] + count[voucher.GateBudgetExhausted] + count[voucher.GateDuplicate]; got != 3*customers {
		t.Errorf("verdicts %v: %d of %d are one of ADMITTED, PENDING, ALREADY_USED, BUDGET_EXHAUSTED", count, got, 3*customers)
	}
	after, ok, err := g.Snapshot(context.Background(), code)
	if err != nil || !ok {
		t.Fatalf("snapshot: %v %v", ok, err)
	}
	if after.Remaining != 5 || after.Budget == nil || *after.Budget != 0 || len(after.Orders) != 45 {
		t.Errorf("gate after the stampede: %d left, budget %v, %d orders; want 5, 0, 45", after.Remaining, after.Budget, len(after.Orders))
	}
	for c, n := range after.Customers {
		if n > 1 {
			t.Errorf("customer %d holds %d uses", c, n)
		}
	}
	// Each admitted order's claim across vouchers was made with it.
	for _, o := range after.Orders {
		if owner, err := rdb.Get(context.Background(), "order:{"+o.OrderID+"}").Result(); err != nil || owner != code {
			t.Errorf("claim of %s: %q %v", o.OrderID, owner, err)
		}
	}
}

// The sync path's reserves of one voucher that arrive together share a
// reserve.lua call; each is still decided as if alone and in order: a
// concurrent copy of an order is DUPLICATE, a customer's second order
// ALREADY_USED, the budget and the stock never pass, and every verdict goes
// to its own caller.
func TestReserve_ConcurrentReservesShareScriptsAndAreDecidedAsIfAlone(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t) // a Redis of its own: its script count is this test's
	g, rdb := gateAt(t, srv.URL)
	ctx := context.Background()
	code := newCode(t)
	budget := int64(45 * 100) // 45 discounts of 100: the budget runs out before the 50 uses
	snap := snapshot(code, 50, 1)
	snap.Budget = &budget
	load(t, g, snap)

	const customers = 120
	type outcome struct {
		order    string
		customer int64
		verdict  voucher.GateVerdict
		err      error
	}
	outs := make(chan outcome, 3*customers)
	var wg sync.WaitGroup
	try := func(order string, customer int64) {
		v, err := g.Reserve(ctx, code, 1, 100, req(code, order, customer, 5000))
		outs <- outcome{order, customer, v, err}
	}
	before := evalshaCalls(t, rdb)
	for c := range customers {
		order := code + "-c" + strconv.Itoa(c)
		wg.Go(func() { try(order, int64(c+1)) })
		wg.Go(func() { try(order, int64(c+1)) })          // its concurrent copy
		wg.Go(func() { try(order+"-other", int64(c+1)) }) // the same customer's second order
	}
	wg.Wait()
	close(outs)
	calls := evalshaCalls(t, rdb) - before
	if calls >= 3*customers/2 {
		t.Errorf("%d reserve.lua calls for %d reserves: they were not batched", calls, 3*customers)
	}

	count := map[voucher.GateVerdict]int{}
	admittedBy := map[int64]int{}
	byOrder := map[string][]voucher.GateVerdict{}
	for o := range outs {
		if o.err != nil {
			t.Fatalf("reserve %s: %v", o.order, o.err)
		}
		count[o.verdict]++
		byOrder[o.order] = append(byOrder[o.order], o.verdict)
		if o.verdict == voucher.GateAdmitted {
			admittedBy[o.customer]++
		}
	}
	if count[voucher.GateAdmitted] != 45 {
		t.Errorf("admitted %d, want 45 (the budget's worth): %v", count[voucher.GateAdmitted], count)
	}
	for c, n := range admittedBy {
		if n > 1 {
			t.Errorf("customer %d admitted %d times; the limit is 1", c, n)
		}
	}
	// An order and its copy: at most one admission between them, and the
	// copy of an admitted order is DUPLICATE whichever came first.
	for order, vs := range byOrder {
		if strings.HasSuffix(order, "-other") {
			continue
		}
		admitted, duplicate := 0, 0
		for _, v := range vs {
			switch v {
			case voucher.GateAdmitted:
				admitted++
			case voucher.GateDuplicate:
				duplicate++
			}
		}
		if admitted > 1 || (admitted == 1 && duplicate != 1) {
			t.Errorf("order %s and its copy: %v; want one ADMITTED and one DUPLICATE, or neither admitted", order, vs)
		}
	}
	if got := count[voucher.GateAdmitted] + count[voucher.GateDuplicate] + count[voucher.GateAlreadyUsed] + count[voucher.GateBudgetExhausted]; got != 3*customers {
		t.Errorf("verdicts %v: %d of %d are one of ADMITTED, DUPLICATE, ALREADY_USED, BUDGET_EXHAUSTED", count, got, 3*customers)
	}
	after := snapshotOf(t, g, code)
	if after.Remaining != 5 || after.Budget == nil || *after.Budget != 0 || len(after.Orders) != 45 {
		t.Errorf("gate after the stampede: %d left, budget %v, %d orders; want 5, 0, 45", after.Remaining, after.Budget, len(after.Orders))
	}
	for c, n := range after.Customers {
		if n != admittedBy[c] {
			t.Errorf("customer %d: the gate counts %d uses, %d were admitted", c, n, admittedBy[c])
		}
	}
}

// A batch on a paused or unloaded gate answers every reserve of it so.
func TestReserve_ABatchOnAPausedOrUnloadedGateAnswersEveryReserve(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	ctx := context.Background()
	for _, tc := range []struct {
		desc   string
		paused bool
		want   voucher.GateVerdict
	}{
		{"unloaded", false, voucher.GateNotLoaded},
		{"paused", true, voucher.GatePaused},
	} {
		code := newCode(t)
		if tc.paused {
			load(t, g, snapshot(code, 10, 1))
			if err := g.Pause(ctx, code, 0); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				if v, err := g.Reserve(ctx, code, 1, 0, req(code, code+"-"+strconv.Itoa(i), int64(i+1), 100)); err != nil || v != tc.want {
					t.Errorf("%s: reserve %d = %q, %v; want %q", tc.desc, i, v, err, tc.want)
				}
			})
		}
		wg.Wait()
	}
}

// evalshaCalls is how many EVALSHA the Redis behind rdb has run.
func evalshaCalls(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	stats, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(stats, "cmdstat_evalsha:calls=")
	if !ok {
		return 0
	}
	n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
	return n
}

// A finalize is fenced: while the gate is paused for a rebuild it is
// refused and the admission stays pending (the consumer or the reload
// settles it), and on a Redis server other than the one the gate was loaded
// on (a failover to a replica) it is STALE. Before, both answered OK, and
// the owner answered 201 for an admission that the reload at the marker
// could then void (issue 30, item 1).
func TestSettle_AFinalizeIsFencedByAPauseAndByTheServer(t *testing.T) {
	g, rdb := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	epoch := loadKafkaGate(t, g, voucher.GateSnapshot{Code: code, Remaining: 5, PerUserLimit: 1}, 15*time.Minute)
	admit := func(orderID string, customer int64) voucher.Admission {
		t.Helper()
		a, err := g.Admit(ctx, code, voucher.ReserveRequest{Code: code, OrderID: orderID, CustomerID: customer, OrderAmount: 5000}, 100)
		if err != nil || a.Verdict != voucher.GateAdmitted {
			t.Fatalf("admit %s: %+v %v", orderID, a, err)
		}
		return a
	}
	a, b := admit(code+"-a", 1), admit(code+"-b", 2)

	if err := g.Pause(ctx, code, 0); err != nil {
		t.Fatal(err)
	}
	if ans, after, err := g.Settle(ctx, code, voucher.SettleFinalize, a.Order, epoch, 100); err != nil || ans != voucher.SettleFail || !after.Pending {
		t.Fatalf("finalize while paused: %q %+v %v, want FAIL with the admission pending", ans, after, err)
	}
	if err := rdb.Del(ctx, "voucher:{"+code+"}:paused").Err(); err != nil {
		t.Fatal(err)
	}
	if ans, after, err := g.Settle(ctx, code, voucher.SettleFinalize, a.Order, epoch, 100); err != nil || ans != voucher.SettleOK || after.Pending {
		t.Fatalf("finalize once the pause is over: %q %+v %v, want OK and live", ans, after, err)
	}

	// The gate's keys as a replica that took over would hold them: loaded on
	// another server.
	if err := rdb.HSet(ctx, "voucher:{"+code+"}:meta", "server", "another-servers-run-id").Err(); err != nil {
		t.Fatal(err)
	}
	if ans, _, err := g.Settle(ctx, code, voucher.SettleFinalize, b.Order, epoch, 100); err != nil || ans != voucher.SettleStale {
		t.Fatalf("finalize on another server: %q %v, want STALE", ans, err)
	}
}

// The reconciliation lock: one holder at a time; renewed while held, so a
// pass longer than its ttl keeps it; given back by unlock; a lock whose
// holder died (or whose unlock a failover lost) lapses after its ttl.
func TestLockReconcile_OneHolderRenewedUntilUnlockAndLapsingWhenItsHolderIsGone(t *testing.T) {
	g, rdb := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	const ttl = 300 * time.Millisecond
	unlock, ok, err := g.LockReconcile(ctx, code, ttl)
	if err != nil || !ok {
		t.Fatalf("first lock: %v %v", ok, err)
	}
	// Three ttls later, still held: renewed.
	for deadline := time.Now().Add(3 * ttl); time.Now().Before(deadline); time.Sleep(ttl / 4) {
		if _, ok, err := g.LockReconcile(ctx, code, ttl); err != nil || ok {
			t.Fatalf("a second lock while the first is held: %v %v", ok, err)
		}
	}
	unlock()
	unlock2, ok, err := g.LockReconcile(ctx, code, ttl)
	if err != nil || !ok {
		t.Fatalf("lock after unlock: %v %v", ok, err)
	}
	unlock2()

	// A dead holder's lock: no renewal, it lapses.
	key := "voucher:{" + code + "}:reconciling"
	if err := rdb.Set(ctx, key, "a-dead-holder", ttl).Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := g.LockReconcile(ctx, code, ttl); ok {
		t.Fatal("locked over a live key")
	}
	deadline := time.Now().Add(10 * ttl)
	for {
		unlock, ok, err := g.LockReconcile(ctx, code, ttl)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			unlock()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a dead holder's lock never lapsed")
		}
		time.Sleep(ttl / 4)
	}
}

// TestAdmit_ARetryPastExpiresAtIsReleased: a live order whose expiresAt
// has passed on the gate's clock, its sweep not yet run, is RELEASED to an
// identical retry, as its confirm is; before, the retry was answered 201
// RESERVED with an expiresAt already gone (explorer seed 181).
func TestAdmit_ARetryPastExpiresAtIsReleased(t *testing.T) {
	g, _ := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	epoch := loadKafkaGate(t, g, voucher.GateSnapshot{Code: code, Remaining: 5, PerUserLimit: 1}, 50*time.Millisecond)
	r := voucher.ReserveRequest{Code: code, OrderID: code + "-a", CustomerID: 1, OrderAmount: 5000}
	a, err := g.Admit(ctx, code, r, 100)
	if err != nil || a.Verdict != voucher.GateAdmitted {
		t.Fatalf("admit: %+v %v", a, err)
	}
	if ans, _, err := g.Settle(ctx, code, voucher.SettleFinalize, a.Order, epoch, 100); err != nil || ans != voucher.SettleOK {
		t.Fatalf("finalize: %q %v", ans, err)
	}
	if again, err := g.Admit(ctx, code, r, 100); err != nil || again.Verdict != voucher.GateDuplicate {
		t.Fatalf("a retry within its TTL: %+v %v, want DUPLICATE", again, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		again, err := g.Admit(ctx, code, r, 100)
		if err != nil {
			t.Fatal(err)
		}
		if again.Verdict == voucher.GateReleased {
			break
		}
		if again.Verdict != voucher.GateDuplicate || time.Now().After(deadline) {
			t.Fatalf("a retry past expiresAt: %+v, want RELEASED", again)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if snap, _, err := g.Snapshot(ctx, code); err != nil || snap.Remaining != 4 {
		t.Fatalf("remaining after the retries: %+v %v, want 4 (the use is the sweep's to give back)", snap.Remaining, err)
	}
}

// TestAdmit_OtherTermsWhileTheFirstIsPendingWaitForItsOutcome: an orderId
// admitted with one customer and amount and not yet answered may still be
// given back, so a reserve of it with other terms is PENDING (its caller
// waits, then UNAVAILABLE), not ORDER_CONFLICT: before, the conflict was
// answered and the first admission then voided, a conflict with an order
// no voucher held (explorer seed 125). Once the first is voided the other
// terms are admitted afresh; once it is final they are ORDER_CONFLICT.
func TestAdmit_OtherTermsWhileTheFirstIsPendingWaitForItsOutcome(t *testing.T) {
	g, _ := newGate(t)
	ctx := context.Background()
	code := newCode(t)
	epoch := loadKafkaGate(t, g, voucher.GateSnapshot{Code: code, Remaining: 5, PerUserLimit: 2}, time.Minute)
	first := voucher.ReserveRequest{Code: code, OrderID: code + "-x", CustomerID: 1, OrderAmount: 5000}
	other := first
	other.OrderAmount = 5001
	a, err := g.Admit(ctx, code, first, 100)
	if err != nil || a.Verdict != voucher.GateAdmitted {
		t.Fatalf("admit: %+v %v", a, err)
	}
	if b, err := g.Admit(ctx, code, other, 100); err != nil || b.Verdict != voucher.GatePending {
		t.Fatalf("other terms while the first is pending: %+v %v, want PENDING", b, err)
	}
	// Its owner's publish failed: the admission is given back.
	if ans, _, err := g.Settle(ctx, code, voucher.SettleForget, a.Order, epoch, 100); err != nil || ans != voucher.SettleOK {
		t.Fatalf("forget: %q %v", ans, err)
	}
	b, err := g.Admit(ctx, code, other, 100)
	if err != nil || b.Verdict != voucher.GateAdmitted {
		t.Fatalf("other terms once the first was given back: %+v %v, want ADMITTED", b, err)
	}
	if ans, _, err := g.Settle(ctx, code, voucher.SettleFinalize, b.Order, epoch, 100); err != nil || ans != voucher.SettleOK {
		t.Fatalf("finalize: %q %v", ans, err)
	}
	if c, err := g.Admit(ctx, code, first, 100); err != nil || c.Verdict != voucher.GateOrderConflict {
		t.Fatalf("the first terms once the other's admission is final: %+v %v, want ORDER_CONFLICT", c, err)
	}
	if snap, _, err := g.Snapshot(ctx, code); err != nil || snap.Remaining != 4 {
		t.Fatalf("remaining: %+v %v, want 4 (one use, the final admission's)", snap.Remaining, err)
	}
}

// Rebuilds whose markers are on the broker at once: the reload at the first
// marker the consumer reaches must not lift the pause while another is still
// ahead of it, or the gate admits an order whose event lies behind that
// marker, and the reload there forgets it after its 201 (explorer seed 58).
// The pause lifts at the reload of the last marker pending; a marker taken
// back (surely not published) holds nothing.
func TestRecover_ThePauseLastsUntilTheReloadAtTheLastPendingMarker(t *testing.T) {
	ctx := context.Background()
	g, _ := newGate(t)
	code := newCode(t)
	loadKafkaGate(t, g, voucher.GateSnapshot{Code: code, Remaining: 10, PerUserLimit: 1}, 15*time.Minute)
	if err := g.Pause(ctx, code, time.Minute); err != nil {
		t.Fatal(err)
	}
	first, second, dropped := "m1-"+newCode(t), "m2-"+newCode(t), "m3-"+newCode(t)
	for _, epoch := range []string{first, second, dropped} {
		if err := g.MarkerPending(ctx, code, epoch, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.MarkerDropped(ctx, code, dropped); err != nil {
		t.Fatal(err)
	}
	admit := func(orderID string) voucher.GateVerdict {
		t.Helper()
		a, err := g.Admit(ctx, code, voucher.ReserveRequest{Code: code, OrderID: orderID, CustomerID: 1, OrderAmount: 5000}, 100)
		if err != nil {
			t.Fatal(err)
		}
		return a.Verdict
	}
	reload := func(epoch string) {
		t.Helper()
		now := time.Now()
		snap := voucher.GateSnapshot{Code: code, Remaining: 10, PerUserLimit: 1, ExpireAt: now.Add(time.Hour), TakenAt: now}
		terms := voucher.GateTerms{Epoch: epoch, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), DatabaseNow: now, TTL: 15 * time.Minute, Lease: 5 * time.Second}
		if ok, err := g.Recover(ctx, snap, terms, "replace"); err != nil || !ok {
			t.Fatalf("reload at %s: %v %v", epoch, ok, err)
		}
	}
	reload(first)
	if v := admit("after-first"); v != voucher.GatePaused {
		t.Errorf("after the reload at the first of two pending markers: %s, want PAUSED", v)
	}
	reload(second)
	if v := admit("after-second"); v != voucher.GateAdmitted {
		t.Errorf("after the reload at the last pending marker: %s, want ADMITTED", v)
	}
}
