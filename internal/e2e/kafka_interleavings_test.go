package e2e

// The interleavings of issue 10 on the Kafka write path, each run
// deterministically: a test stops a request between two of its steps
// (voucher.FaultStep, through TEST_FAULTS) while another request, the
// consumer or reconciliation acts. Each ends with the invariants: no
// oversell, no orderId counted twice, every answered success in the
// database once the events in flight are applied, the gate in step with the
// database, and no dead letter unless the test makes one.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"voucherd/internal/app"
	"voucherd/internal/events"
	"voucherd/internal/gate"
	"voucherd/internal/testenv"
	"voucherd/internal/voucher"
)

// faultPoint stops the requests of one order at one step until released.
type faultPoint struct {
	step    voucher.FaultStep
	order   string
	reached chan struct{}
	resume  chan error
	once    sync.Once
	// off lets every request pass until arm (a step the order's earlier
	// requests go through too).
	off atomic.Bool
}

// later returns the point off until armed.
func (f *faultPoint) later() *faultPoint {
	f.off.Store(true)
	return f
}

func (f *faultPoint) arm() { f.off.Store(false) }

func newFaultPoint(step voucher.FaultStep, order string) *faultPoint {
	return &faultPoint{step: step, order: order, reached: make(chan struct{}), resume: make(chan error, 1)}
}

// hook is the server's Faults: the first request of the order reaching the
// step waits there; the others pass.
func (f *faultPoint) hook(ctx context.Context, step voucher.FaultStep, order string) error {
	if step != f.step || order != f.order || f.off.Load() {
		return nil
	}
	first := false
	f.once.Do(func() { first = true })
	if !first {
		return nil
	}
	close(f.reached)
	select {
	case err := <-f.resume:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *faultPoint) wait(t testing.TB) {
	t.Helper()
	select {
	case <-f.reached:
	case <-time.After(20 * time.Second):
		t.Fatalf("no request reached %s of %s", f.step, f.order)
	}
}

// faultPoints stops at each of its points in turn, each as alone.
type faultPoints []*faultPoint

func (fs faultPoints) hook(ctx context.Context, step voucher.FaultStep, order string) error {
	for _, f := range fs {
		if err := f.hook(ctx, step, order); err != nil {
			return err
		}
	}
	return nil
}

type faultHook interface {
	hook(ctx context.Context, step voucher.FaultStep, order string) error
}

func faultServer(t testing.TB, f faultHook, env map[string]string) *server {
	t.Helper()
	id := uniqueCode("F")
	app.RegisterFaults(id, f.hook)
	settings := map[string]string{"TEST_FAULTS": id, "ADMISSION_LEASE": "1s"}
	for k, v := range env {
		settings[k] = v
	}
	return kafkaServer(t, settings)
}

func testGate(t testing.TB) *gate.Gate {
	t.Helper()
	rdb, err := gate.NewClient(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return gate.New(rdb)
}

// Item 1: a request whose admission a retry took over can give nothing back.
// A is admitted for X and stops before its publish; past its lease the
// retry B adopts the admission, publishes, and is answered 201; then A goes
// on, publishes its own (older) event and tries to settle: refused by the
// compare-and-set, it answers UNAVAILABLE, the consumer skips its event, and
// X holds one use, in the database and at the gate.
func TestKafkaInterleaving_AFailingOwnerCannotGiveBackWhatItsRetryAnswered(t *testing.T) {
	t.Parallel()
	order := uniqueOrder()
	f := newFaultPoint(voucher.StepClaimed, order)
	s := faultServer(t, f, nil)
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 3}))

	first := make(chan result, 1)
	go func() { first <- api.reserve(t, code, 7, order, 100) }()
	f.wait(t)
	// The retry waits while A's admission is pending, and adopts it once
	// A's lease (1 s) has run out.
	if r := api.reserve(t, code, 7, order, 100); r.Error != "" {
		t.Fatalf("the retry that adopts the admission: %s", r.Error)
	}
	g := testGate(t)
	adopted, ok, err := g.Order(context.Background(), code, order)
	if err != nil || !ok {
		t.Fatalf("the adopted order at the gate: %v %v", ok, err)
	}
	f.resume <- nil // A publishes its stale event and tries to finalize
	if r := <-first; r.Error != "UNAVAILABLE" {
		t.Errorf("the first request, overtaken by its retry: %q, want UNAVAILABLE", r.Error)
	}
	// A's own give-back would be refused too: its token is not the gate's.
	stale := adopted
	stale.CreatedAt = adopted.CreatedAt.Add(-1100 * time.Millisecond)
	snap, _, _ := g.Snapshot(context.Background(), code)
	if a, _, err := g.Settle(context.Background(), code, voucher.SettleForget, stale, snap.Epoch, 0); err != nil || a != voucher.SettleFail {
		t.Errorf("a give-back by the overtaken owner: %q %v, want FAIL", a, err)
	}
	waitCounters(t, s, code, 1, 1, 0)
	waitGate(t, s, code, 2)
	if got := dbStatus(t, s, order); got != "RESERVED" {
		t.Errorf("order %s in the database: %q", order, got)
	}
	// The customer's count at the gate is one, too.
	snap, _, _ = g.Snapshot(context.Background(), code)
	if snap.Customers[7] != 1 {
		t.Errorf("customer 7 holds %d uses at the gate, want 1", snap.Customers[7])
	}
	if r := (restAPI{s}).confirm(t, code, order); r.Error != "" {
		t.Errorf("confirm of the answered order: %s", r.Error)
	}
	assertNoDeadLetters(t, s.db, code)
}

// Item 2: a dead-lettered reserve keeps its use taken, marked lost, and
// reconciliation alerts instead of handing the use out again.
func TestKafkaInterleaving_ADeadLetterMarksItsUseLostAndReconciliationDoesNotRecycleIt(t *testing.T) {
	t.Parallel()
	url, db := ownDatabase(t)
	_, brokers := testBroker(t)
	s := kafkaServer(t, map[string]string{"DATABASE_URL": url, "KAFKA_BROKERS": brokers, "RECONCILE_INTERVAL": "1s"})
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 2}))
	g := testGate(t)
	order := uniqueOrder()
	a, err := g.Admit(context.Background(), code, voucher.ReserveRequest{Code: code, CustomerID: 5, OrderID: order, OrderAmount: 100}, 0)
	if err != nil || a.Verdict != voucher.GateAdmitted {
		t.Fatalf("admission: %+v %v", a, err)
	}
	// The database is full behind the gate's back: its event will be refused.
	if _, err := db.Exec(context.Background(), `UPDATE voucher SET total_limit = 1 WHERE code = $1`, code); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(context.Background(), `UPDATE voucher SET used_count = 1, reserved_count = 1 WHERE code = $1`, code); err != nil {
		t.Fatal(err)
	}
	ev := voucher.NewEvent(voucher.EventReserved, voucher.Reservation{
		OrderID: order, VoucherCode: code, CustomerID: 5, OrderAmount: 100, DiscountAmount: 1000,
		CreatedAt: a.Order.CreatedAt, ExpiresAt: a.Order.ExpiresAt,
	}, a.Order.CreatedAt)
	ev.Epoch = a.Epoch
	value, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	produce(t, brokers, &kgo.Record{Topic: events.DefaultTopic, Key: []byte(code), Value: value})
	waitApplied(t, brokers)
	testenv.Eventually(t, "the admission marked lost", func() (bool, string) {
		o, ok, err := g.Order(context.Background(), code, order)
		return err == nil && ok && o.Lost, fmt.Sprintf("%+v %v %v", o, ok, err)
	})
	testenv.Eventually(t, "an alert for the lost use", func() (bool, string) {
		d, ok := driftOf(t, db, code)
		return ok && d.Alert, fmt.Sprintf("%+v", d)
	})
	waitPasses(t, db, code, 2)
	// The database allows no more use (it is full), and the lost admission's
	// use was never handed out again: the gate is at 0, not raised.
	if n, ok, err := g.Remaining(context.Background(), code); err != nil || !ok || n != 0 {
		t.Errorf("gate after the dead letter and reconciliation: %d %v %v, want 0", n, ok, err)
	}
	if o, _, _ := g.Order(context.Background(), code, order); !o.Lost {
		t.Errorf("the dead-lettered order is no longer marked lost: %+v", o)
	}
	if r := (restAPI{s}).reserve(t, code, 5, order, 100); r.Error != "UNAVAILABLE" {
		t.Errorf("a retry of the lost order: %q, want UNAVAILABLE", r.Error)
	}
}

// Item 3: an admission that publishes after the gate was reloaded (its
// publish began before the recovery) is settled against the new gate: it
// either takes a use there (and is answered) or is voided (and is not). A
// is admitted and stops before its publish; the gate's keys vanish; another
// reserve asks for a recovery, the consumer reloads the gate at its marker;
// then A publishes.
func TestKafkaInterleaving_AnAdmissionPublishedAfterARecoveryIsSettledAgainstTheNewGate(t *testing.T) {
	t.Parallel()
	order := uniqueOrder()
	f := newFaultPoint(voucher.StepClaimed, order)
	_, brokers := testBroker(t)
	s := faultServer(t, f, map[string]string{"KAFKA_BROKERS": brokers})
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 2}))
	g := testGate(t)

	first := make(chan result, 1)
	go func() { first <- api.reserve(t, code, 1, order, 100) }()
	f.wait(t)
	if err := g.Unload(context.Background(), code); err != nil { // Redis lost the voucher's data
		t.Fatal(err)
	}
	// The next reserve asks for the recovery; retried until the gate is back.
	other := uniqueOrder()
	testenv.Eventually(t, "a reserve after the recovery", func() (bool, string) {
		r := api.reserve(t, code, 2, other, 100)
		return r.Error == "", r.Error
	})
	f.resume <- nil
	r := <-first
	waitApplied(t, brokers)
	if r.Error == "" {
		waitStatus(t, s, order, "RESERVED")
	} else if r.Error != "UNAVAILABLE" {
		t.Errorf("the late admission: %q", r.Error)
	}
	// Whatever A heard, gate and database agree and nothing is oversold.
	st := readVoucher(t, s, code)
	testenv.Eventually(t, "gate in step with the database", func() (bool, string) {
		st = readVoucher(t, s, code)
		return st.GateRemaining != nil && *st.GateRemaining == 2-st.Used, fmt.Sprintf("%+v gate %s", st, deref(st.GateRemaining))
	})
	if st.Used > 2 {
		t.Errorf("oversold: %+v", st)
	}
	if r.Error == "" && dbStatus(t, s, order) == "" {
		t.Errorf("an answered success is not in the database")
	}
	assertNoDeadLetters(t, s.db, code)
}

// Item 4 (detection): a gate served by another Redis server than the one it
// was loaded on (a failover, or a restart that restored older data) is STALE:
// no admission is decided on it until the consumer reloaded it from the
// database, after the events in flight.
func TestKafkaInterleaving_AGateOnAnotherRedisServerIsRebuiltBeforeItAdmits(t *testing.T) {
	t.Parallel()
	s := kafkaServer(t, nil)
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 3}))
	if r := api.reserve(t, code, 1, uniqueOrder(), 100); r.Error != "" {
		t.Fatal(r.Error)
	}
	// Its event applied first: applied on the stale gate below, it would
	// ask for the rebuild itself, before the reserve this test makes there.
	waitCounters(t, s, code, 1, 1, 0)
	rdb, err := gate.NewClient(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	// What a lagging replica promoted after a failover looks like to the
	// gate: the voucher's keys are there, with an older stock (one admission
	// missing) and the old server's run_id.
	ctx := context.Background()
	if err := rdb.HSet(ctx, "voucher:{"+code+"}:meta", "server", "an-older-server").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "voucher:{"+code+"}:stock", 3, 0).Err(); err != nil {
		t.Fatal(err)
	}
	second := uniqueOrder()
	if r := api.reserve(t, code, 2, second, 100); r.Error != "UNAVAILABLE" {
		t.Errorf("a reserve on the stale gate: %q, want UNAVAILABLE", r.Error)
	}
	// The storefront retries with the same orderId, as the answer says,
	// until the rebuilt gate admits it. Admitted on the stale stock, it
	// would leave 2 to sell, and the five reserves below would sell 4 of 3.
	testenv.Eventually(t, "the retried reserve admitted on the gate rebuilt from the database", func() (bool, string) {
		r := api.reserve(t, code, 2, second, 100)
		return r.Error == "", r.Error
	})
	sold := 2
	for i := range 5 {
		if r := api.reserve(t, code, int64(10+i), uniqueOrder(), 100); r.Error == "" {
			sold++
		}
	}
	if sold != 3 {
		t.Errorf("sold %d of 3 after the rebuild", sold)
	}
	waitCounters(t, s, code, 3, 3, 0)
}

// Item 5: a reply lost and resent finds the order live and claims its orderId
// again, so the cross-voucher rule holds for it.
func TestKafkaInterleaving_ADuplicateClaimsItsOrderIDAgain(t *testing.T) {
	t.Parallel()
	s := kafkaServer(t, nil)
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 3}))
	other := createVoucher(t, s, flash(voucherSpec{TotalLimit: 3}))
	order := uniqueOrder()
	if r := api.reserve(t, code, 1, order, 100); r.Error != "" {
		t.Fatal(r.Error)
	}
	rdb, err := gate.NewClient(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if err := rdb.Del(context.Background(), "order:{"+order+"}").Err(); err != nil {
		t.Fatal(err)
	}
	if r := api.reserve(t, code, 1, order, 100); r.Error != "" {
		t.Fatalf("the resent reserve: %s", r.Error)
	}
	if owner, err := rdb.Get(context.Background(), "order:{"+order+"}").Result(); err != nil || owner != code {
		t.Errorf("claim after the duplicate: %q %v", owner, err)
	}
	if r := api.reserve(t, other, 1, order, 100); r.Error != "ORDER_CONFLICT" {
		t.Errorf("the orderId on another voucher: %q", r.Error)
	}
}

// Item 5: a rebuild whose reply is lost and which is sent again (same epoch)
// changes nothing: it cannot overwrite the admissions made since.
func TestKafkaInterleaving_ARetriedReplaceWithTheSameEpochChangesNothing(t *testing.T) {
	t.Parallel()
	s := kafkaServer(t, nil)
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 3}))
	g := testGate(t)
	snap, ok, err := g.Snapshot(context.Background(), code)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if r := api.reserve(t, code, 1, uniqueOrder(), 100); r.Error != "" {
		t.Fatal(r.Error)
	}
	// The load that installed the gate, sent again as a "replace".
	snap.Orders, snap.Remaining = nil, 3
	installed, err := g.Recover(context.Background(), snap, voucher.GateTerms{Epoch: snap.Epoch, StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour), DatabaseNow: time.Now(), TTL: time.Minute, Lease: time.Second}, "replace")
	if err != nil || installed {
		t.Errorf("a replace with the installed epoch: installed %v, %v", installed, err)
	}
	waitGate(t, s, code, 2)
}

// In kafka mode the gate decides the window: ending a live flash voucher
// closes it at the gate at once, for every instance.
func TestKafka_EndingAFlashVoucherClosesTheGateAtOnce(t *testing.T) {
	t.Parallel()
	_, brokers := testBroker(t)
	a := kafkaServer(t, map[string]string{"KAFKA_BROKERS": brokers})
	b := kafkaServer(t, map[string]string{"KAFKA_BROKERS": brokers})
	code := createVoucher(t, a, flash(voucherSpec{TotalLimit: 10}))
	held := uniqueOrder()
	if r := (restAPI{b}).reserve(t, code, 1, held, 100); r.Error != "" {
		t.Fatalf("reserve: %s", r.Error)
	}
	r := gql(t, a, adminToken, `mutation($c: String!) { endVoucher(code: $c) { voucher { code } error { code } } }`, map[string]any{"c": code})
	if str(path(r.Body, "data", "endVoucher", "voucher", "code")) != code {
		t.Fatalf("endVoucher: %s", r.Raw)
	}
	for _, s := range []*server{a, b} {
		if r := (restAPI{s}).reserve(t, code, 2, uniqueOrder(), 100); r.Error != "NOT_ELIGIBLE" {
			t.Errorf("a reserve right after the end: %q, want NOT_ELIGIBLE", r.Error)
		}
	}
	if r := (restAPI{a}).confirm(t, code, held); r.Error != "" {
		t.Errorf("confirming a reservation held before the end: %q", r.Error)
	}
}
