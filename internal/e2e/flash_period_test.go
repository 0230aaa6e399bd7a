package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/testenv"
)

// Period limits on flash vouchers and flash campaigns (README "Period
// limits, segments and line items"; docs/period-limits.md "The flash
// gate"): the gate counts each period (reserve.lua on the sync path,
// admit.lua on the kafka path), refuses PERIOD_LIMIT_REACHED as the
// database path does, and a release gives the use back to its period. The
// tests mirror period_test.go's on the database path.

// flashPeriodServer is the server of a write path: "sync" one on a
// database of its own (its counter of reserve writes is the test's alone:
// gateWrites; and a kafka-mode server of the suite on the shared database
// would warm its flash vouchers' gates too), "kafka" one with
// FLASH_WRITE_PATH=kafka.
func flashPeriodServer(t *testing.T, mode string) *server {
	t.Helper()
	if mode == "kafka" {
		return kafkaServer(t, nil)
	}
	dbURL, _ := ownDatabase(t)
	return startServer(t, map[string]string{"DATABASE_URL": dbURL})
}

// gateWrites is the server's count of reserve writes the sync path sent to
// the database: one per reserve its gate admitted. A refusal the gate
// decides costs none; one it left to the database would cost one.
func gateWrites(t testing.TB, s *server) float64 {
	t.Helper()
	return metricValue(t, s, `voucher_database_writes_total{op="reserve"}`)
}

// warmGate waits until a check of a flash voucher is answered by its gate
// (the first one loads it: UNAVAILABLE meanwhile), so a stampede that
// follows meets a loaded gate.
func warmGate(t testing.TB, s *server, code string, customer int64) {
	t.Helper()
	testenv.Eventually(t, "the gate of "+code+" loaded", func() (bool, string) {
		a := checkOrder(t, s, "rest", code, customer, 5000, nil)
		return a.Error != "UNAVAILABLE", a.Error
	})
}

// reserveAs reserves order over REST and returns the error code ("" for a
// reservation) and the availableAt of a refusal.
func reserveAs(t testing.TB, s *server, code, order string, customer int64) orderAnswer {
	t.Helper()
	r := do(t, http.MethodPost, s.URL+"/vouchers/"+url.PathEscape(code)+"/reservations", storefrontToken,
		map[string]any{"customerId": customer, "orderId": order, "orderAmount": 5000})
	return restAnswer(t, r, http.StatusCreated)
}

func TestPeriodLimits_Flash_HeldUnderConcurrentReserves(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sync", "kafka"} {
		t.Run(mode, func(t *testing.T) {
			s := flashPeriodServer(t, mode)
			// The subtests run one after the other: on the sync path each
			// counts the server's reserve writes.
			t.Run("10 customers x 6 orders, CUSTOMER DAY 3", func(t *testing.T) {
				code := createRestricted(t, s, map[string]any{"flash": true, "timeZone": "Europe/Berlin",
					"periodLimits": []any{map[string]any{"scope": "CUSTOMER", "period": "DAY", "max": 3}}})
				warmGate(t, s, code, 1)
				writes := gateWrites(t, s)
				var mu sync.Mutex
				perCustomer := map[int64]int{}
				outcomes := stampede(60, func(i int) string {
					customer := int64(500 + i%10)
					a := reserveOrder(t, s, transportNames[i%2], code, customer, 5000, nil)
					if a.Error == "" {
						mu.Lock()
						perCustomer[customer]++
						mu.Unlock()
					}
					return a.Error
				})
				if outcomes[""] != 30 || outcomes["PERIOD_LIMIT_REACHED"] != 30 {
					t.Fatalf("60 reserves: %v, want 30 successes and 30 PERIOD_LIMIT_REACHED", outcomes)
				}
				for c, n := range perCustomer {
					if n != 3 {
						t.Errorf("customer %d: %d uses, want 3", c, n)
					}
				}
				if got := gateWrites(t, s) - writes; mode == "sync" && got != 30 {
					t.Errorf("the gate sent %v reserves to the database, want the 30 it admitted (it refuses the others)", got)
				}
				// The database counts what the gate admitted (kafka: once
				// the consumer applied it).
				testenv.Eventually(t, "the database counts 30 uses", func() (bool, string) {
					v := readVoucher(t, s, code)
					return v.Used == 30, fmt.Sprintf("usedCount %d", v.Used)
				})
			})
			t.Run("40 reserves, VOUCHER DAY 5", func(t *testing.T) {
				code := createRestricted(t, s, map[string]any{"flash": true,
					"periodLimits": []any{map[string]any{"scope": "VOUCHER", "period": "DAY", "max": 5}}})
				warmGate(t, s, code, 1)
				writes := gateWrites(t, s)
				outcomes := stampede(40, func(i int) string {
					return reserveOrder(t, s, transportNames[i%2], code, int64(700+i), 5000, nil).Error
				})
				if outcomes[""] != 5 || outcomes["PERIOD_LIMIT_REACHED"] != 35 {
					t.Fatalf("40 reserves: %v, want 5 successes and 35 PERIOD_LIMIT_REACHED", outcomes)
				}
				if got := gateWrites(t, s) - writes; mode == "sync" && got != 5 {
					t.Errorf("the gate sent %v reserves to the database, want the 5 it admitted", got)
				}
				testenv.Eventually(t, "the database counts 5 uses", func() (bool, string) {
					v := readVoucher(t, s, code)
					return v.Used == 5, fmt.Sprintf("usedCount %d", v.Used)
				})
			})
		})
	}
}

// A flash campaign's period limit spans all its codes, at its one gate.
func TestPeriodLimits_FlashCampaign_HeldAcrossItsCodesUnderConcurrency(t *testing.T) {
	t.Parallel()
	s := flashPeriodServer(t, "sync")
	r := gql(t, s, adminToken, `mutation($in: CreateCampaignInput!) { createCampaign(input: $in) { campaign { id } error { code message field } } }`,
		map[string]any{"in": map[string]any{"name": "flash daily " + uniqueCode("c"), "codeCount": 60, "usesPerCode": 10, "discountAmount": 100, "perUserLimit": 100,
			"flash": true, "startsAt": time.Now().Add(-time.Hour).Format(time.RFC3339), "endsAt": time.Now().Add(24 * time.Hour).Format(time.RFC3339),
			"timeZone":     "Europe/Berlin",
			"periodLimits": []any{map[string]any{"scope": "CUSTOMER", "period": "DAY", "max": 3}}}})
	id := str(path(r.Body, "data", "createCampaign", "campaign", "id"))
	if id == "" {
		t.Fatalf("createCampaign: %s", r.Raw)
	}
	waitCampaignReady(t, s, id, time.Minute)
	codes := exportCodes(t, s, id)
	code := func(i int) string { return strings.Split(codes[i], ",")[0] }
	warmGate(t, s, code(0), 1)
	writes := gateWrites(t, s)
	outcomes := stampede(60, func(i int) string {
		return reserveOrder(t, s, transportNames[i%2], code(i), 600+int64(i%10), 5000, nil).Error
	})
	if outcomes[""] != 30 || outcomes["PERIOD_LIMIT_REACHED"] != 30 {
		t.Fatalf("60 reserves on 60 codes by 10 customers: %v, want 30 successes and 30 PERIOD_LIMIT_REACHED", outcomes)
	}
	if got := gateWrites(t, s) - writes; got != 30 {
		t.Errorf("the campaign's gate sent %v reserves to the database, want the 30 it admitted", got)
	}
	// A customer's fourth use of the day is refused on any code, and a
	// check says so too.
	if a := checkOrder(t, s, "graphql", code(59), 600, 5000, nil); a.Error != "PERIOD_LIMIT_REACHED" {
		t.Errorf("a check past the customer's day: %+v, want PERIOD_LIMIT_REACHED", a)
	}
}

// The refusal names the next midnight in the voucher's zone, a check says
// what a reserve would, and a release gives the use back to its day: the
// customer may reserve again.
func TestPeriodLimits_Flash_RefusalSaysTheNextMidnightAndAReleaseGivesTheUseBack(t *testing.T) {
	t.Parallel()
	zone := "America/Los_Angeles"
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"sync", "kafka"} {
		t.Run(mode, func(t *testing.T) {
			s := flashPeriodServer(t, mode)
			code := createRestricted(t, s, map[string]any{"flash": true, "timeZone": zone,
				"periodLimits": []any{map[string]any{"scope": "CUSTOMER", "period": "DAY", "max": 1}}})
			warmGate(t, s, code, 42)
			before := time.Now()
			if a := checkOrder(t, s, "graphql", code, 42, 5000, nil); a.Error != "" || a.Discount != 1000 {
				t.Fatalf("check before any use: %+v", a)
			}
			first := uniqueOrder()
			if a := reserveAs(t, s, code, first, 42); a.Error != "" {
				t.Fatalf("first reserve: %+v", a)
			}
			after := time.Now()
			for what, a := range map[string]orderAnswer{
				"reserve (graphql)": reserveOrder(t, s, "graphql", code, 42, 5000, nil),
				"reserve (rest)":    reserveOrder(t, s, "rest", code, 42, 5000, nil),
				"check (graphql)":   checkOrder(t, s, "graphql", code, 42, 5000, nil),
				"check (rest)":      checkOrder(t, s, "rest", code, 42, 5000, nil),
			} {
				if a.Error != "PERIOD_LIMIT_REACHED" {
					t.Fatalf("%s past the limit: %+v, want PERIOD_LIMIT_REACHED", what, a)
				}
				at, err := time.Parse(time.RFC3339, a.AvailableAt)
				if err != nil {
					t.Fatalf("%s: availableAt %q: %v", what, a.AvailableAt, err)
				}
				y, m, d := before.In(loc).Date()
				y2, m2, d2 := after.In(loc).Date()
				lo, hi := time.Date(y, m, d+1, 0, 0, 0, 0, loc), time.Date(y2, m2, d2+1, 0, 0, 0, 0, loc)
				if at.Before(lo) || at.After(hi) {
					t.Errorf("%s: availableAt %s, want the next midnight in %s (%s)", what, at, zone, lo)
				}
			}
			// Another customer is not limited by this one's day.
			if a := reserveOrder(t, s, "rest", code, 43, 5000, nil); a.Error != "" {
				t.Fatalf("another customer: %+v", a)
			}
			// The release gives the use back to the day it was taken in:
			// the customer reserves again (kafka: once the consumer
			// released the row and the gate gave the use back).
			r := do(t, http.MethodDelete, s.URL+"/vouchers/"+url.PathEscape(code)+"/reservations/"+url.PathEscape(first), storefrontToken, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("release: HTTP %d: %s", r.Status, r.Raw)
			}
			again := uniqueOrder()
			testenv.Eventually(t, "a reserve after the release", func() (bool, string) {
				a := reserveAs(t, s, code, again, 42)
				return a.Error == "", a.Error
			})
			if a := reserveOrder(t, s, "graphql", code, 42, 5000, nil); a.Error != "PERIOD_LIMIT_REACHED" {
				t.Errorf("a second use of the day after the release: %+v, want PERIOD_LIMIT_REACHED", a)
			}
			testenv.Eventually(t, "the database counts 2 uses", func() (bool, string) {
				v := readVoucher(t, s, code)
				return v.Used == 2, fmt.Sprintf("usedCount %d", v.Used)
			})
		})
	}
}

// Reconciliation compares the current periods' counts of a flash gate with
// the database's: a sale in motion differs nowhere (on the kafka path the
// consumer counted the gate's uses in the periods the gate did); a count
// the gate lost (a use the database holds) is named in the report.
func TestPeriodLimits_Flash_ReconciliationNamesAPeriodCountAtOdds(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sync", "kafka"} {
		t.Run(mode, func(t *testing.T) {
			s := flashPeriodServer(t, mode)
			code := createRestricted(t, s, map[string]any{"flash": true,
				"periodLimits": []any{map[string]any{"scope": "CUSTOMER", "period": "DAY", "max": 3}}})
			warmGate(t, s, code, 1)
			for i := range 3 {
				if a := reserveOrder(t, s, "rest", code, int64(20+i), 5000, nil); a.Error != "" {
					t.Fatalf("reserve %d: %+v", i, a)
				}
			}
			testenv.Eventually(t, "the database counts 3 uses", func() (bool, string) {
				v := readVoucher(t, s, code)
				return v.Used == 3, fmt.Sprintf("usedCount %d", v.Used)
			})
			const doc = `mutation($c: String!) { reconcileVoucher(code: $c) { report { drift periodsDiffering } error { code message } } }`
			reconcile := func() []any {
				var report any
				testenv.Eventually(t, "a reconciliation of "+code, func() (bool, string) {
					r := gql(t, s, adminToken, doc, map[string]any{"c": code})
					report = path(r.Body, "data", "reconcileVoucher", "report")
					return report != nil, string(r.Raw)
				})
				differing, _ := path(report, "periodsDiffering").([]any)
				return differing
			}
			if got := reconcile(); len(got) != 0 {
				t.Fatalf("a gate in step: periodsDiffering %v, want none", got)
			}
			// The gate forgets customer 21's use of the day.
			rdb := redis.NewClient(mustRedisOptions(t))
			t.Cleanup(func() { _ = rdb.Close() })
			ctx := context.Background()
			keys, err := rdb.Keys(ctx, "voucher:{"+code+"}:period:CUSTOMER:DAY:*").Result()
			if err != nil || len(keys) != 1 {
				t.Fatalf("the day's hash: %v, %v", keys, err)
			}
			if err := rdb.HDel(ctx, keys[0], "21").Err(); err != nil {
				t.Fatal(err)
			}
			got := reconcile()
			if len(got) != 1 || !strings.Contains(fmt.Sprint(got[0]), "customer 21: gate 0, database 1") {
				t.Fatalf("periodsDiffering %v, want customer 21's day named", got)
			}
		})
	}
}
