package explore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"voucherd/internal/apiclient"
	"voucherd/internal/events"
	"voucherd/internal/testdb"
	"voucherd/internal/testenv"
	"voucherd/internal/testpg"
	"voucherd/internal/testproc"
	"voucherd/internal/testredis"
)

const (
	storefrontToken = "explore-storefront-token-0123456789"
	adminToken      = "explore-admin-token-0123456789abcdef"
	// The servers' settings the checks depend on.
	reconcileInterval = 2 * time.Second
	expiryInterval    = time.Second
	admissionLease    = 5 * time.Second
	// leakAge is the servers' leak age on the sync path (app.go: at least
	// postgres.WinnerWriteLimit plus 2 s): a use the gate holds for an
	// order the database lacks (an instance killed between the two) is
	// returned by the reconciliation job once it has seen it so that long.
	leakAge = 12 * time.Second
	// reconcileLockTTL is the servers' bound on a reconciliation pass's
	// lock (voucher/drift.go): a lock its holder can no longer release (an
	// instance killed or frozen mid-pass, or a failover to a replica that
	// lost the unlock) keeps that voucher's passes off for that long.
	reconcileLockTTL = 10 * time.Second
)

// World is the processes of one seed.
type World struct {
	t    testing.TB
	plan Plan
	dir  string

	pg      *testpg.Cluster // nil: a database of its own on the shared cluster
	dbURL   string
	db      *pgxpool.Pool
	master  *testredis.Server
	replica *testredis.Server
	proxy   *testredis.Proxy
	broker  *testproc.Proc // nil in sync mode
	serves  []*testproc.Proc
	codes   []string // the vouchers' codes, as Plan.Vouchers

	operators sync.WaitGroup // the operator's calls in flight

	mu     sync.Mutex
	up     []bool // serve i answers (not killed, not frozen)
	events *os.File
	start  time.Time
}

// StartWorld starts every process of the plan and creates its vouchers.
func StartWorld(t testing.TB, plan Plan, dir, sharedDatabaseURL string) *World {
	t.Helper()
	w := &World{t: t, plan: plan, dir: dir, start: time.Now()}
	var err error
	if w.events, err = os.Create(filepath.Join(dir, "events.log")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.events.Close() })
	if plan.OwnPostgres {
		w.pg = testpg.Start(t)
		w.dbURL = w.pg.URL
	} else {
		w.dbURL = testdb.OwnMigrated(t, sharedDatabaseURL)
	}
	w.master = testredis.Start(t)
	w.replica = testredis.StartReplica(t, w.master)
	w.proxy = testredis.StartProxy(t, w.master.Addr)
	env := map[string]string{
		"DATABASE_URL":       testenv.WithQuery(w.dbURL, testenv.Pool(6)),
		"REDIS_URL":          w.proxy.URL,
		"STOREFRONT_TOKENS":  storefrontToken,
		"ADMIN_TOKENS":       adminToken,
		"FLASH_WRITE_PATH":   plan.Mode,
		"RESERVATION_TTL":    plan.TTL.String(),
		"RECONCILE_INTERVAL": reconcileInterval.String(),
		"EXPIRY_INTERVAL":    expiryInterval.String(),
		"ADMISSION_LEASE":    admissionLease.String(),
		"LOG_LEVEL":          "info",
		"GOMAXPROCS":         "2",
	}
	if plan.Mode == "kafka" {
		w.broker = testproc.Broker(t, map[string]string{"BROKER_DATA_DIR": filepath.Join(dir, "broker-data")})
		env["KAFKA_BROKERS"] = w.broker.Addr
	}
	for i := range plan.Instances {
		e := clone(env)
		if plan.Offsets[i] != 0 {
			e["CLOCK_OFFSET"] = plan.Offsets[i].String()
		}
		if plan.Mode == "kafka" {
			// As production is told to run it (docs/operations.md): a
			// restarted instance takes its old member's place in the
			// group, so a kill during a rebalance strands no partition
			// with a member that will never come back (seeds 25, 177).
			e["KAFKA_INSTANCE_ID"] = fmt.Sprintf("serve-%d", i)
		}
		w.serves = append(w.serves, testproc.Serve(t, e))
		w.up = append(w.up, true)
	}
	t.Cleanup(w.saveLogs)
	if w.db, err = pgxpool.New(context.Background(), w.dbURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.db.Close)
	for i, v := range plan.Vouchers {
		kind := "N"
		if v.Flash {
			kind = "F"
		}
		code := fmt.Sprintf("X%d-%s%d", plan.Seed, kind, i)
		if len(code) > 32 {
			code = code[len(code)-32:]
		}
		w.createVoucher(code, v)
		w.codes = append(w.codes, code)
	}
	w.logf("world up: %s", strings.Join(w.describe(), ", "))
	return w
}

func (w *World) describe() []string {
	out := []string{"database " + w.dbURL, "redis primary " + w.master.Addr + " replica " + w.replica.Addr + " via " + w.proxy.Addr}
	if w.broker != nil {
		out = append(out, "broker "+w.broker.Addr)
	}
	for i, s := range w.serves {
		out = append(out, fmt.Sprintf("serve#%d %s", i, s.URL))
	}
	return out
}

// logf writes a line to events.log, stamped with the time since the start.
func (w *World) logf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(w.events, "%s +%7.3fs  %s\n", time.Now().UTC().Format("15:04:05.000"), time.Since(w.start).Seconds(), fmt.Sprintf(format, args...))
}

// saveLogs writes every process's output into the directory.
func (w *World) saveLogs() {
	for i, s := range w.serves {
		_ = os.WriteFile(filepath.Join(w.dir, fmt.Sprintf("serve-%d.log", i)), []byte(s.Logs()), 0o644)
	}
	if w.broker != nil {
		_ = os.WriteFile(filepath.Join(w.dir, "broker.log"), []byte(w.broker.Logs()), 0o644)
	}
}

// answering is an instance that answers now, preferring i.
func (w *World) answering(i int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.up {
		if j := (i + k) % len(w.up); w.up[j] {
			return j
		}
	}
	return i
}

func (w *World) setUp(i int, up bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.up[i] = up
}

// Break starts a fault; Heal ends a lasting one.
func (w *World) Break(f Fault) {
	t := w.t
	w.logf("break: %s", f)
	switch f.Kind {
	case FaultKill:
		w.setUp(f.Instance, false)
		w.serves[f.Instance].Kill(t)
	case FaultFreeze:
		w.setUp(f.Instance, false)
		w.serves[f.Instance].Freeze(t)
	case FaultRedisEmpty:
		w.master.Restart(t)
	case FaultFailover:
		w.replica.Detach(t)
	case FaultRebuild, FaultReconcile:
		// An operator's call may wait (a rebuild waits for the events in
		// flight): in the background, so the schedule keeps its moments.
		op := "rebuildGate"
		if f.Kind == FaultReconcile {
			op = "reconcileVoucher"
		}
		i := w.answering(f.Instance)
		w.operators.Add(1)
		go func() {
			defer w.operators.Done()
			out := w.graphql(i, `mutation($c: String!) { `+op+`(code: $c) { report { drift gateRemaining databaseRemaining } error { code message } } }`, map[string]any{"c": w.codes[f.Voucher]})
			w.logf("  %s of voucher#%d via serve#%d answered: %s", op, f.Voucher, i, out)
		}()
	case FaultBroker:
		w.broker.Stop(t)
	case FaultPostgres:
		w.pg.Stop(t)
	}
}

// Heal ends a lasting fault.
func (w *World) Heal(f Fault) {
	t := w.t
	w.logf("heal: %s", f)
	switch f.Kind {
	case FaultKill:
		w.serves[f.Instance].Start(t)
		w.setUp(f.Instance, true)
	case FaultFreeze:
		w.serves[f.Instance].Thaw(t)
		w.setUp(f.Instance, true)
	case FaultFailover:
		w.replica.Promote(t)
		w.proxy.SwitchTo(w.replica.Addr)
	case FaultBroker:
		w.broker.Start(t)
	case FaultPostgres:
		w.pg.Start(t)
	}
	w.logf("  healed")
}

// graphql sends an admin request to serve i and returns the body (or the
// error) as text.
func (w *World) graphql(i int, query string, vars map[string]any) string {
	body, err := w.graphqlJSON(i, query, vars)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(body)
}

func (w *World) graphqlJSON(i int, query string, vars map[string]any) ([]byte, error) {
	a := apiclient.New(w.serves[i].URL, adminToken, nil).GraphQL(context.Background(), query, vars)
	if a.Err == nil && a.Status != http.StatusOK {
		a.Err = fmt.Errorf("HTTP %d: %s", a.Status, a.Raw)
	}
	return []byte(a.Raw), a.Err
}

func (w *World) createVoucher(code string, v VoucherPlan) {
	w.t.Helper()
	body, err := w.graphqlJSON(0, `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { voucher { code } error { code message field } } }`,
		map[string]any{"in": map[string]any{
			"code": code, "discountAmount": 500, "minOrderAmount": 0, "totalLimit": v.Total, "perUserLimit": v.PerUser,
			"startsAt": time.Now().Add(-time.Hour).Format(time.RFC3339), "endsAt": time.Now().Add(24 * time.Hour).Format(time.RFC3339), "flash": v.Flash,
		}})
	if err != nil || !strings.Contains(string(body), `"code":"`+code+`"`) {
		w.t.Fatalf("createVoucher %s: %v %s", code, err, body)
	}
}

// gateAndDatabase is a flash voucher's gateRemaining and remaining.
func (w *World) gateAndDatabase(code string) (gate, remaining int, loaded bool, err error) {
	body, err := w.graphqlJSON(0, `query($c: String!) { voucher(code: $c) { remaining gateRemaining } }`, map[string]any{"c": code})
	if err != nil {
		return 0, 0, false, err
	}
	var out struct {
		Data struct {
			Voucher struct {
				Remaining     int  `json:"remaining"`
				GateRemaining *int `json:"gateRemaining"`
			} `json:"voucher"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return 0, 0, false, fmt.Errorf("%v: %s", err, body)
	}
	v := out.Data.Voucher
	if v.GateRemaining == nil {
		return 0, v.Remaining, false, nil
	}
	return *v.GateRemaining, v.Remaining, true, nil
}

// waitApplied waits until the consumer group has committed every event on
// the topic (kafka mode), at most bound.
func (w *World) waitApplied(bound time.Duration) error {
	_, err := w.waitCaughtUp(bound)
	return err
}

// waitCaughtUp is waitApplied that also says when the consumer group had
// committed every event (now, when it had at the first look).
func (w *World) waitCaughtUp(bound time.Duration) (time.Time, error) {
	if w.broker == nil {
		return time.Now(), nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.broker.Addr))
	if err != nil {
		return time.Time{}, err
	}
	defer cl.Close()
	offsets := events.NewOffsets(events.Config{}, cl)
	deadline := time.Now().Add(bound)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		lag, err := offsets.Lag(ctx)
		cancel()
		if err == nil && lag == 0 {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("the consumer group did not commit every event within %s: %d not committed (%v)", bound, lag, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
