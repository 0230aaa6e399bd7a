// Package faults tests the voucher service's contract from outside while a
// part of it fails: `voucherd serve` killed with SIGKILL mid-sale, its
// PostgreSQL stopped, its Redis failed over to a replica that lags. The
// service runs as OS processes (internal/testproc) with its own broker
// process, PostgreSQL database or cluster (internal/testpg) and Redis
// (internal/testredis); the shared services are never stopped.
//
// Each test runs a small flash sale of concurrent REST clients that record
// every answer, injects its fault, lets the service recover, and then checks
// the contract's invariants against the database: no oversell, no orderId
// counted twice, every answered success in the database once the events in
// flight are applied, the gate equal to the database within a
// reconciliation, no dead letter. The checks are exact; only the moment the
// fault strikes depends on timing.
package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"voucherd/internal/apiclient"
	"voucherd/internal/events"
	"voucherd/internal/testdb"
	"voucherd/internal/testenv"
)

const (
	storefrontToken = "faults-storefront-token-0123456789"
	adminToken      = "faults-admin-token-0123456789abcdef"
	// reconcileInterval is the servers' RECONCILE_INTERVAL: short, so "the
	// gate equals the database within one reconciliation" is checked here.
	reconcileInterval = 2 * time.Second
	// admissionLease is the servers' ADMISSION_LEASE (voucherd's default).
	admissionLease = 11 * time.Second
	// leakAge is how long the sync path's reconciliation sees an order only
	// in the gate before it returns its use (app.go: at least
	// postgres.WinnerWriteLimit plus 2 s).
	leakAge = 12 * time.Second
)

var databaseURL = testenv.DatabaseURL()

// serveEnv is the settings of a `voucherd serve` of these tests.
func serveEnv(databaseURL, redisURL string, extra map[string]string) map[string]string {
	env := map[string]string{
		"DATABASE_URL":       testenv.WithQuery(databaseURL, testenv.Pool(8)),
		"REDIS_URL":          redisURL,
		"STOREFRONT_TOKENS":  storefrontToken,
		"ADMIN_TOKENS":       adminToken,
		"RECONCILE_INTERVAL": reconcileInterval.String(),
		"EXPIRY_INTERVAL":    "1m",
		"LOG_LEVEL":          "warn",
		"GOMAXPROCS":         "2",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// ownDatabase creates a migrated database on the shared cluster for one test
// (dropped at its end), so the server's expiry sweep and reconciliation see
// only this test's vouchers.
func ownDatabase(t testing.TB) string {
	t.Helper()
	return testdb.OwnMigrated(t, databaseURL)
}

func openDB(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	db, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var httpClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64},
}

// answer is an HTTP answer; Err is set when there was none (the outcome is
// unknown to the client).
type answer = apiclient.Answer

func call(ctx context.Context, method, url, token string, body any) answer {
	return (&apiclient.Client{Token: token, HTTP: httpClient}).Do(ctx, method, url, body)
}

func graphql(t testing.TB, base, query string, vars map[string]any) map[string]any {
	t.Helper()
	a := call(context.Background(), http.MethodPost, base+"/graphql", adminToken, map[string]any{"query": query, "variables": vars})
	if a.Err != nil || a.Status != http.StatusOK {
		t.Fatalf("graphql: %d %v %s", a.Status, a.Err, a.Raw)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(a.Raw), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// createFlashVoucher creates a live flash voucher and returns its code.
func createFlashVoucher(t testing.TB, base string, total, perUser int) string {
	t.Helper()
	code := strings.ToUpper("F-" + randomHex(5)) // the stored form: codes are kept in capitals
	out := graphql(t, base, `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { voucher { code } error { code message field } } }`,
		map[string]any{"in": map[string]any{
			"code": code, "discountAmount": 500, "minOrderAmount": 0, "totalLimit": total, "perUserLimit": perUser,
			"startsAt": time.Now().Add(-time.Hour).Format(time.RFC3339), "endsAt": time.Now().Add(24 * time.Hour).Format(time.RFC3339), "flash": true,
		}})
	if got := dig(out, "data", "createVoucher", "voucher", "code"); got != code {
		t.Fatalf("createVoucher: %v", out)
	}
	return code
}

// gateAndDatabase are the voucher's gateRemaining and remaining as the API
// shows them.
func gateAndDatabase(t testing.TB, base, code string) (gate, remaining int, ok bool) {
	t.Helper()
	out := graphql(t, base, `query($c: String!) { voucher(code: $c) { remaining gateRemaining } }`, map[string]any{"c": code})
	g, gok := dig(out, "data", "voucher", "gateRemaining").(float64)
	r, rok := dig(out, "data", "voucher", "remaining").(float64)
	return int(g), int(r), gok && rok
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// op is what a client asked; outcome what it was told.
type op string

const (
	opReserve op = "reserve"
	opConfirm op = "confirm"
	opRelease op = "release"
	opRetry   op = "retry" // an identical reserve of an order reserved before
)

type outcome int

const (
	notSent     outcome = iota
	succeeded           // 201/200: the contract's success
	refused             // a definite refusal (409, 422, 404)
	unavailable         // 503 UNAVAILABLE: nothing promised
	unknown             // no answer (connection cut, timeout): either may have happened
	broken              // another status (500, 400): never right for these requests
)

func (o outcome) String() string {
	return [...]string{"not sent", "success", "refused", "UNAVAILABLE", "no answer", "other status"}[o]
}

func classify(a answer, success int) outcome {
	switch {
	case a.Err != nil:
		return unknown
	case a.Status == success:
		return succeeded
	case a.Status == http.StatusConflict || a.Status == http.StatusUnprocessableEntity || a.Status == http.StatusNotFound:
		return refused
	case a.Status == http.StatusServiceUnavailable:
		return unavailable
	}
	return broken
}

// order is everything the clients were told about one orderId.
type order struct {
	ID       string
	Customer int64
	Amount   int64
	Reserve  outcome // of the first reserve
	Confirm  outcome // notSent if never asked
	Release  outcome
	// State is the status the last success told the client (RESERVED,
	// CONFIRMED, RELEASED).
	State string
}

// tally counts the answers of one kind of request in one phase.
type tally map[string]int

// sale is a flash sale of concurrent clients against one voucher.
type sale struct {
	base      string
	code      string
	customers int64 // customer ids are drawn from 1..customers

	mu         sync.Mutex
	orders     map[string]*order
	held       []*order         // answered RESERVED, nothing decided yet: confirmed or released later
	counts     map[string]tally // phase/op -> outcome or status -> n
	violations []string         // contract breaches seen in answers
	broken     []string         // answers with a status never right

	answered atomic.Int64
	phase    atomic.Pointer[string]
}

func newSale(base, code string, customers int64) *sale {
	s := &sale{base: base, code: code, customers: customers, orders: map[string]*order{}, counts: map[string]tally{}}
	s.setPhase("before")
	return s
}

// setPhase names what is going on (e.g. "postgres down"); each answer is
// counted under the phase its request began and ended in.
func (s *sale) setPhase(p string) { s.phase.Store(&p) }
func (s *sale) currentPhase() string {
	return *s.phase.Load()
}

func (s *sale) count(began string, o op, a answer, out outcome) {
	ended := s.currentPhase()
	key := began
	if ended != began {
		key = began + "->" + ended
	}
	label := out.String()
	if out == refused || out == unavailable {
		label = a.Code
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts[key] == nil {
		s.counts[key] = tally{}
	}
	s.counts[key][string(o)+" "+label]++
	if out == broken && len(s.broken) < 20 {
		s.broken = append(s.broken, fmt.Sprintf("%s: %d %s", o, a.Status, a.Raw))
	}
}

func (s *sale) violate(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violations = append(s.violations, fmt.Sprintf(format, args...))
}

func (s *sale) reserveBody(o *order) map[string]any {
	return map[string]any{"customerId": o.Customer, "orderId": o.ID, "orderAmount": o.Amount}
}

func (s *sale) reserve(ctx context.Context, o *order) outcome {
	began := s.currentPhase()
	a := call(ctx, http.MethodPost, s.base+"/vouchers/"+s.code+"/reservations", storefrontToken, s.reserveBody(o))
	out := classify(a, http.StatusCreated)
	s.count(began, opReserve, a, out)
	s.mu.Lock()
	o.Reserve = out
	if out == succeeded {
		o.State = a.State
		if a.State != "RESERVED" {
			s.violations = append(s.violations, fmt.Sprintf("a first reserve of %s answered 201 %s", o.ID, a.State))
		}
	}
	s.mu.Unlock()
	return out
}

func (s *sale) decide(ctx context.Context, o *order, which op) outcome {
	began := s.currentPhase()
	method, url, want := http.MethodPost, s.base+"/vouchers/"+s.code+"/reservations/"+o.ID+"/confirm", "CONFIRMED"
	if which == opRelease {
		method, url, want = http.MethodDelete, s.base+"/vouchers/"+s.code+"/reservations/"+o.ID, "RELEASED"
	}
	a := call(ctx, method, url, storefrontToken, nil)
	out := classify(a, http.StatusOK)
	s.count(began, which, a, out)
	s.mu.Lock()
	defer s.mu.Unlock()
	if which == opConfirm {
		o.Confirm = out
	} else {
		o.Release = out
	}
	switch {
	case out == succeeded && a.State != want:
		s.violations = append(s.violations, fmt.Sprintf("%s of %s answered 200 %s", which, o.ID, a.State))
	case out == succeeded:
		o.State = want
	case out == refused:
		// The client holds an answered RESERVED reservation and decided
		// nothing else: the first confirm or release cannot be refused.
		s.violations = append(s.violations, fmt.Sprintf("%s of %s, answered RESERVED, refused: %s", which, o.ID, a.Code))
	}
	return out
}

// retry sends an identical reserve of an order and checks the answer against
// what the client was told: the same reservation (201 with its status) while
// it is RESERVED or CONFIRMED, RESERVATION_RELEASED once it was released.
func (s *sale) retry(ctx context.Context, o *order, why string) outcome {
	began := s.currentPhase()
	a := call(ctx, http.MethodPost, s.base+"/vouchers/"+s.code+"/reservations", storefrontToken, s.reserveBody(o))
	out := classify(a, http.StatusCreated)
	s.count(began, opRetry, a, out)
	if msg := s.retryBreach(o, a, out); msg != "" {
		s.violate("%s retry of %s: %s", why, o.ID, msg)
	}
	return out
}

func (s *sale) retryBreach(o *order, a answer, out outcome) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if out == unknown || out == unavailable {
		return ""
	}
	releaseSent := o.Release != notSent && o.Release != refused
	confirmSent := o.Confirm != notSent && o.Confirm != refused
	switch {
	case out == succeeded && o.Release == succeeded:
		return "told RELEASED, the retry reserved again (201 " + a.State + ")"
	case out == succeeded && o.Confirm == succeeded && a.State != "CONFIRMED":
		return "told CONFIRMED, the retry answered 201 " + a.State
	case out == succeeded && a.State == "CONFIRMED" && !confirmSent:
		return "never confirmed, the retry answered 201 CONFIRMED"
	case out == refused && a.Code == "RESERVATION_RELEASED" && !releaseSent:
		return "never released, the retry answered RESERVATION_RELEASED"
	case out == refused && a.Code != "RESERVATION_RELEASED":
		return "an answered reservation, the retry was refused: " + a.Code
	case out == broken:
		return fmt.Sprintf("status %d: %s", a.Status, a.Raw)
	}
	return ""
}

// start sends requests from workers concurrent clients until budget
// requests were answered (a request without an answer does not count: the
// server may be down) or ctx ends; wait waits for them. Each client reserves
// a new order and, when told success, confirms it (45%) or releases it
// (25%) at once or holds it to decide later (a fifth of the clients' turns
// decide a held order), and sometimes (30%) retries it identically,
// checking the answer. A client refused, told UNAVAILABLE or given no answer backs
// off a little, as a real one would (and the sold-out crowd stays small on
// this small machine).
func (s *sale) start(ctx context.Context, workers int, budget int64) (wait func()) {
	startAt := s.answered.Load()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := mrand.New(mrand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			step := func(out outcome) bool {
				if out != unknown && s.answered.Add(1)-startAt > budget {
					return false
				}
				pause := map[outcome]time.Duration{unknown: 100 * time.Millisecond, unavailable: 50 * time.Millisecond, refused: 50 * time.Millisecond}[out]
				if pause > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(pause):
					}
				}
				return ctx.Err() == nil
			}
			for ctx.Err() == nil {
				// Now and then a client decides an order it holds, later
				// than right after its reserve (and across phases).
				if rng.Float64() < 0.2 {
					if o := s.takeHeld(); o != nil {
						which := opConfirm
						if rng.Float64() < 0.4 {
							which = opRelease
						}
						if !step(s.decide(ctx, o, which)) {
							return
						}
						continue
					}
				}
				o := &order{ID: "o-" + randomHex(8), Customer: 1 + rng.Int64N(s.customers), Amount: 1000 + rng.Int64N(9000)}
				s.mu.Lock()
				s.orders[o.ID] = o
				s.mu.Unlock()
				out := s.reserve(ctx, o)
				if !step(out) {
					return
				}
				if out != succeeded {
					continue
				}
				// The retry comes before the order is held: once held,
				// another client may decide it concurrently, and a retry
				// racing a decision may see either side of it.
				p := rng.Float64()
				switch {
				case p < 0.45:
					if !step(s.decide(ctx, o, opConfirm)) {
						return
					}
				case p < 0.70:
					if !step(s.decide(ctx, o, opRelease)) {
						return
					}
				}
				if rng.Float64() < 0.3 {
					if !step(s.retry(ctx, o, "during the sale")) {
						return
					}
				}
				if p >= 0.70 {
					s.hold(o)
				}
			}
		}()
	}
	return wg.Wait
}

// reserveAside reserves n orders of new customers one by one, before the
// sale, each of which must succeed; the test decides them later (decideAll),
// e.g. during an outage.
func (s *sale) reserveAside(t testing.TB, n int) []*order {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*order
	for i := range n {
		// Customers above the sale's range: never ALREADY_USED.
		o := &order{ID: "aside-" + randomHex(8), Customer: s.customers + 1 + int64(i), Amount: 5000}
		s.mu.Lock()
		s.orders[o.ID] = o
		s.mu.Unlock()
		if got := s.reserve(ctx, o); got != succeeded {
			t.Fatalf("reserve %s before the sale: %s", o.ID, got)
		}
		out = append(out, o)
	}
	return out
}

// decideAll confirms the even and releases the odd orders, 8 at a time.
func (s *sale) decideAll(ctx context.Context, orders []*order) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, o := range orders {
		which := opConfirm
		if i%2 == 1 {
			which = opRelease
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s.decide(ctx, o, which)
		}()
	}
	wg.Wait()
}

func (s *sale) hold(o *order) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = append(s.held, o)
}

func (s *sale) takeHeld() *order {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.held) == 0 {
		return nil
	}
	o := s.held[0]
	s.held = s.held[1:]
	return o
}

// waitAnswered waits until n more requests than mark were answered (at most
// bound); it returns the new mark.
func (s *sale) waitAnswered(t testing.TB, mark, n int64, bound time.Duration) int64 {
	t.Helper()
	deadline := time.Now().Add(bound)
	for s.answered.Load() < mark+n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d answers came within %s (phase %q)\n%s", s.answered.Load()-mark, n, bound, s.currentPhase(), s.report())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s.answered.Load()
}

// answeredOrders are the orders whose first reserve was answered success.
func (s *sale) answeredOrders() []*order {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*order
	for _, o := range s.orders {
		if o.Reserve == succeeded {
			c := *o
			out = append(out, &c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// report is the answers per phase, for the log.
func (s *sale) report() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	phases := make([]string, 0, len(s.counts))
	for p := range s.counts {
		phases = append(phases, p)
	}
	sort.Strings(phases)
	for _, p := range phases {
		keys := make([]string, 0, len(s.counts[p]))
		for k := range s.counts[p] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "  [%s]", p)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%d", k, s.counts[p][k])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// phaseCount is how many answers of op with label (an outcome or a code)
// came in phase (begun and ended in it).
func (s *sale) phaseCount(phase string, o op, label string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[phase][string(o)+" "+label]
}

// waitApplied waits (at most bound) until the consumer group has committed
// every event on the topic: every event in flight is in the database.
func waitApplied(t testing.TB, brokers string, bound time.Duration) time.Duration {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	start := time.Now()
	var lag int64
	var lastErr error
	for time.Since(start) < bound {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		lag, lastErr = groupLag(ctx, adm)
		cancel()
		if lastErr == nil && lag == 0 {
			return time.Since(start)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the consumer did not apply every event within %s: %d not committed (%v)", bound, lag, lastErr)
	return 0
}

func groupLag(ctx context.Context, adm *kadm.Client) (int64, error) {
	ends, err := adm.ListEndOffsets(ctx, events.DefaultTopic)
	if err != nil {
		return 0, err
	}
	committed, err := adm.FetchOffsets(ctx, events.DefaultGroup)
	if err != nil {
		return 0, err
	}
	var lag int64
	var perr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			perr = o.Err
			return
		}
		c, ok := committed.Lookup(events.DefaultTopic, o.Partition)
		if !ok || c.At < 0 {
			lag += o.Offset
			return
		}
		lag += o.Offset - c.At
	})
	return lag, perr
}

// row is a reservation as the database holds it.
type row struct {
	Customer int64
	Amount   int64
	Status   string
}

// checkInvariants compares the database with every answer of the sale, once
// the events in flight are applied, and fails the test naming each loss.
func checkInvariants(t testing.TB, s *sale, db *pgxpool.Pool, total, perUser int) {
	t.Helper()
	rows := checkCounters(t, s.code, db, total, perUser)
	checkAnswered(t, s, db, rows, total)
}

// checkCounters checks what the database holds of the voucher on its own: no
// oversell, counters equal to the rows, per-customer limits, one reserve per
// orderId, no dead letter. It returns the rows.
func checkCounters(t testing.TB, code string, db *pgxpool.Pool, total, perUser int) map[string]row {
	t.Helper()
	ctx := context.Background()
	rows := map[string]row{}
	rs, err := db.Query(ctx, `SELECT order_id, customer_id, order_amount, status FROM voucher_redemption WHERE voucher_code = $1`, code)
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var id string
		var r row
		if err := rs.Scan(&id, &r.Customer, &r.Amount, &r.Status); err != nil {
			t.Fatal(err)
		}
		rows[id] = r
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}

	// No oversell; the counters are the rows.
	var used, reserved, confirmed int
	if err := db.QueryRow(ctx, `SELECT used_count, reserved_count, confirmed_count FROM voucher WHERE code = $1`, code).
		Scan(&used, &reserved, &confirmed); err != nil {
		t.Fatal(err)
	}
	live, byStatus, perCustomer := 0, map[string]int{}, map[int64]int{}
	for _, r := range rows {
		byStatus[r.Status]++
		if r.Status != "RELEASED" {
			live++
			perCustomer[r.Customer]++
		}
	}
	if used > total || live > total {
		t.Errorf("OVERSOLD: usedCount %d, live rows %d, totalLimit %d", used, live, total)
	}
	if used != live || reserved != byStatus["RESERVED"] || confirmed != byStatus["CONFIRMED"] {
		t.Errorf("counters are not the rows: used/reserved/confirmed %d/%d/%d, rows live/RESERVED/CONFIRMED %d/%d/%d",
			used, reserved, confirmed, live, byStatus["RESERVED"], byStatus["CONFIRMED"])
	}
	for c, n := range perCustomer {
		if n > perUser {
			t.Errorf("customer %d holds %d uses, perUserLimit %d", c, n, perUser)
		}
	}
	var badCustomers int
	if err := db.QueryRow(ctx, `
		SELECT count(*) FROM voucher_customer vc
		 WHERE vc.voucher_code = $1 AND vc.used_count <> (SELECT count(*) FROM voucher_redemption r
		   WHERE r.voucher_code = vc.voucher_code AND r.customer_id = vc.customer_id AND r.status IN ('RESERVED', 'CONFIRMED'))`, code).Scan(&badCustomers); err != nil {
		t.Fatal(err)
	}
	if badCustomers > 0 {
		t.Errorf("%d customers' counts are not their live rows", badCustomers)
	}
	// One orderId, one use, ever: at most one reserved event per order.
	var twice int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM (SELECT order_id FROM reservation_event WHERE voucher_code = $1 AND kind = 'reserved'
		GROUP BY order_id HAVING count(*) > 1) d`, code).Scan(&twice); err != nil {
		t.Fatal(err)
	}
	if twice > 0 {
		t.Errorf("%d orderIds were reserved twice (reservation_event)", twice)
	}
	var dead int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM dead_letter`).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	if dead > 0 {
		var reasons []string
		drs, _ := db.Query(ctx, `SELECT kind || ' ' || order_id || ': ' || reason FROM dead_letter ORDER BY id LIMIT 5`)
		for drs.Next() {
			var r string
			_ = drs.Scan(&r)
			reasons = append(reasons, r)
		}
		drs.Close()
		t.Errorf("%d events were dead-lettered, e.g. %s", dead, strings.Join(reasons, "; "))
	}

	return rows
}

// checkAnswered checks every answer of the sale against the rows: each
// answered success is there, in the state its client was told.
func checkAnswered(t testing.TB, s *sale, db *pgxpool.Pool, rows map[string]row, total int) {
	t.Helper()
	ctx := context.Background()
	var used int
	if err := db.QueryRow(ctx, `SELECT used_count FROM voucher WHERE code = $1`, s.code).Scan(&used); err != nil {
		t.Fatal(err)
	}
	byStatus := map[string]int{}
	for _, r := range rows {
		byStatus[r.Status]++
	}
	losses := map[string][]string{}
	lose := func(kind, id string) { losses[kind] = append(losses[kind], id) }
	answered := s.answeredOrders()
	confirmsAnswered, releasesAnswered := 0, 0
	for _, o := range answered {
		r, ok := rows[o.ID]
		if o.Confirm == succeeded {
			confirmsAnswered++
		}
		if o.Release == succeeded {
			releasesAnswered++
		}
		switch {
		case !ok:
			lose("answered reserve missing from the database", o.ID)
			if o.Confirm == succeeded {
				lose("answered confirm missing from the database", o.ID)
			}
			if o.Release == succeeded {
				lose("answered release missing from the database", o.ID)
			}
			continue
		case r.Customer != o.Customer || r.Amount != o.Amount:
			lose("row with other values than the answered reserve", o.ID)
		case o.Confirm == succeeded && r.Status != "CONFIRMED":
			lose("answered CONFIRMED, database "+r.Status, o.ID)
		case o.Release == succeeded && r.Status != "RELEASED":
			lose("answered RELEASED, database "+r.Status, o.ID)
		case r.Status == "RELEASED" && o.Release == notSent:
			lose("RELEASED though the client never released it", o.ID)
		case r.Status == "CONFIRMED" && o.Confirm == notSent:
			lose("CONFIRMED though the client never confirmed it", o.ID)
		}
	}
	// A definite refusal changes nothing.
	s.mu.Lock()
	for _, o := range s.orders {
		if _, ok := rows[o.ID]; ok && o.Reserve == refused {
			losses["refused reserve stored anyway"] = append(losses["refused reserve stored anyway"], o.ID)
		}
	}
	s.mu.Unlock()
	t.Logf("answered successes: %d reserves, %d confirms, %d releases; database: %d rows (%d RESERVED, %d CONFIRMED, %d RELEASED), usedCount %d of %d",
		len(answered), confirmsAnswered, releasesAnswered, len(rows), byStatus["RESERVED"], byStatus["CONFIRMED"], byStatus["RELEASED"], used, total)
	kinds := make([]string, 0, len(losses))
	for k := range losses {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		ids := losses[k]
		ex := ids
		if len(ex) > 5 {
			ex = ex[:5]
		}
		t.Errorf("LOST: %d x %s (of %d answered reserves), e.g. %s", len(ids), k, len(answered), strings.Join(ex, " "))
	}
	s.mu.Lock()
	violations, broken := s.violations, s.broken
	s.mu.Unlock()
	if len(violations) > 0 {
		ex := violations
		if len(ex) > 10 {
			ex = ex[:10]
		}
		t.Errorf("%d answers broke the contract, e.g.:\n  %s", len(violations), strings.Join(ex, "\n  "))
	}
	if len(broken) > 0 {
		t.Errorf("answers with a status never right for these requests (INTERNAL or worse), e.g.:\n  %s", strings.Join(broken, "\n  "))
	}
}

// retryEveryAnsweredOrder sends an identical reserve of every order whose
// reserve was answered success and checks each answer against what its
// client was told (retry). Run after checkInvariants: a retry may publish
// again what was lost, and must not hide the loss.
func retryEveryAnsweredOrder(t testing.TB, s *sale) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.setPhase("final retries")
	s.mu.Lock()
	before := len(s.violations)
	s.mu.Unlock()
	orders := s.answeredOrders()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, o := range orders {
		s.mu.Lock()
		live := s.orders[o.ID]
		s.mu.Unlock()
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s.retry(ctx, live, "final")
		}()
	}
	wg.Wait()
	s.mu.Lock()
	after := s.violations[before:]
	s.mu.Unlock()
	if len(after) > 0 {
		ex := after
		if len(ex) > 10 {
			ex = ex[:10]
		}
		t.Errorf("%d of %d retries of answered orders answered otherwise than the client was told, e.g.:\n  %s", len(after), len(orders), strings.Join(ex, "\n  "))
	}
}

// waitGateEqualsDatabase waits until the gate shows the database's remaining
// uses: within a couple of reconciliation passes once nothing is in flight.
func waitGateEqualsDatabase(t testing.TB, base, code string, db *pgxpool.Pool) {
	t.Helper()
	// An admission whose owner never heard its outcome (a reply lost in a
	// failover, a client that gave up) holds its use until its lease (the
	// default 11 s) runs out and a pass voids it; on the sync path a use
	// whose write never came is returned after the leak age: the bound
	// includes both.
	bound := max(admissionLease, leakAge) + 3*reconcileInterval + 5*time.Second
	deadline := time.Now().Add(bound)
	var gate, remaining int
	for time.Now().Before(deadline) {
		var ok bool
		gate, remaining, ok = gateAndDatabase(t, base, code)
		if ok && gate == remaining {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	var drift, repaired string
	_ = db.QueryRow(context.Background(), `SELECT drift::text, repaired FROM drift_report WHERE voucher_code = $1 ORDER BY id DESC LIMIT 1`, code).Scan(&drift, &repaired)
	t.Errorf("the gate never equalled the database within %s: gateRemaining %d, remaining %d (latest drift report: drift %s, repaired %q)",
		bound, gate, remaining, drift, repaired)
}
