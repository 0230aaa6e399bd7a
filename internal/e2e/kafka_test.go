package e2e

// The Kafka write path (FLASH_WRITE_PATH=kafka) end to end: the contract's
// rules on flash vouchers, and each failure window of the path. The answers
// to reserve, confirm and release come from the gate at once; the
// database's counters and the reservation query follow within the consumer's
// delay, so those are asserted eventually (bounded waits, no timings).

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"voucherd/internal/events"
	"voucherd/internal/gate"
	"voucherd/internal/testenv"
	"voucherd/internal/testredis"
	"voucherd/internal/voucher"
)

// kafkaServer runs voucherd with FLASH_WRITE_PATH=kafka (the in-process
// broker unless env names KAFKA_BROKERS).
func kafkaServer(t testing.TB, env map[string]string) *server {
	t.Helper()
	settings := map[string]string{"FLASH_WRITE_PATH": "kafka"}
	for k, v := range env {
		settings[k] = v
	}
	return startServer(t, settings)
}

// testBroker starts a Kafka-protocol broker for one test (closed at its end)
// and returns it with the KAFKA_BROKERS value naming it.
func testBroker(t testing.TB) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, strings.Join(c.ListenAddrs(), ",")
}

// waitCounters waits until the database's counters of a voucher are
// used/reserved/confirmed (the consumer's delay).
func waitCounters(t testing.TB, s *server, code string, used, reserved, confirmed int) voucherState {
	t.Helper()
	var st voucherState
	testenv.Eventually(t, fmt.Sprintf("voucher %s to show used %d, reserved %d, confirmed %d", code, used, reserved, confirmed), func() (bool, string) {
		st = readVoucher(t, s, code)
		return st.Used == used && st.Reserved == reserved && st.Confirmed == confirmed, fmt.Sprintf("%+v", st)
	})
	return st
}

// waitGate waits until the gate's counter of a voucher is n.
func waitGate(t testing.TB, s *server, code string, n int) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("the gate of %s at %d", code, n), func() (bool, string) {
		st := readVoucher(t, s, code)
		return st.GateRemaining != nil && *st.GateRemaining == n, deref(st.GateRemaining)
	})
}

// dbStatus is an order's status in s's database, "" when it has no row.
func dbStatus(t testing.TB, s *server, order string) string {
	t.Helper()
	var status string
	err := s.db.QueryRow(context.Background(), `SELECT status FROM voucher_redemption WHERE order_id = $1`, order).Scan(&status)
	if err != nil && !strings.Contains(err.Error(), "no rows") {
		t.Fatal(err)
	}
	return status
}

func waitStatus(t testing.TB, s *server, order, status string) {
	t.Helper()
	testenv.Eventually(t, "order "+order+" "+status+" in the database", func() (bool, string) {
		got := dbStatus(t, s, order)
		return got == status, fmt.Sprintf("%q", got)
	})
}

// kafkaEach runs a rule over both transports on flash vouchers of a kafka server.
func kafkaEach(t *testing.T, s *server, fn func(t *testing.T, api checkoutAPI)) {
	for _, api := range transports(s) {
		t.Run(api.name(), func(t *testing.T) {
			fn(t, api)
		})
	}
}

func flash(spec voucherSpec) voucherSpec {
	spec.Flash = true
	return spec
}

// TestKafka_ContractRulesOnFlashVouchers runs the contract's reserve,
// confirm and release rules on flash vouchers written through Kafka, with
// confirm and release sent right after the reserve's answer.
func TestKafka_ContractRulesOnFlashVouchers(t *testing.T) {
	t.Parallel()
	s := kafkaServer(t, nil)

	t.Run("ReserveSucceedsAtOnceAndTheDatabaseFollows", func(t *testing.T) {
		kafkaEach(t, s, func(t *testing.T, api checkoutAPI) {
			code := createVoucher(t, s, flash(voucherSpec{Discount: 10000, MinOrderAmount: 20000}))
			order := uniqueOrder()
			r := api.reserve(t, code, 42, order, 25000)
			if r.Error != "" {
				t.Fatalf("reserve refused: %s", r.Error)
			}
			if r.status() != "RESERVED" || str(r.Reservation["orderId"]) != order || num(t, r.Reservation["discountAmount"]) != 10000 {
				t.Errorf("reservation = %v", r.Reservation)
			}
			created, _ := time.Parse(time.RFC3339, str(r.Reservation["createdAt"]))
			expires, _ := time.Parse(time.RFC3339, str(r.Reservation["expiresAt"]))
			if got := expires.Sub(created); got != 15*time.Minute {
				t.Errorf("expiresAt - createdAt = %v, want 15m", got)
			}
			if st := readVoucher(t, s, code); st.GateRemaining == nil || *st.GateRemaining != 9 {
				t.Errorf("gateRemaining right after the reserve = %s, want 9 (it never trails)", deref(st.GateRemaining))
			}
			waitCounters(t, s, code, 1, 1, 0)
			// The row holds what the answer said.
			q := gql(t, s, storefrontToken, `query($o: String!) { reservation(orderId: $o) { status createdAt expiresAt discountAmount } }`, map[string]any{"o": order})
			for _, k := range []string{"status", "createdAt", "expiresAt", "discountAmount"} {
				if got, want := str(path(q.Body, "data", "reservation", k)), str(r.Reservation[k]); got != want {
					t.Errorf("reservation query %s = %q, the reserve answered %q", k, got, want)
				}
			}
		})
	})

	t.Run("IdenticalRetryReturnsTheReservationAndTakesNoSecondUse", func(t *testing.T) {
		kafkaEach(t, s, func(t *testing.T, api checkoutAPI) {
			code := createVoucher(t, s, flash(voucherSpec{}))
			order := uniqueOrder()
			first := api.reserve(t, code, 7, order, 5000)
			second := api.reserve(t, code, 7, order, 5000) // its event may still be in flight
			if first.Error != "" || second.Error != "" {
				t.Fatalf("reserve, retry = %q, %q", first.Error, second.Error)
			}
			assertSameReservation(t, first, second)
			if c := api.confirm(t, code, order); c.Error != "" || c.status() != "CONFIRMED" {
				t.Fatalf("confirm right after = %q %q", c.Error, c.status())
			}
			if r := api.reserve(t, code, 7, order, 5000); r.Error != "" || r.status() != "CONFIRMED" {
				t.Errorf("retry after confirm = %q %q, want the CONFIRMED reservation", r.Error, r.status())
			}
			waitCounters(t, s, code, 1, 0, 1)
		})
	})

	t.Run("OrderReusedWithOtherValuesIsOrderConflict", func(t *testing.T) {
		kafkaEach(t, s, func(t *testing.T, api checkoutAPI) {
			code := createVoucher(t, s, flash(voucherSpec{}))
			otherFlash := createVoucher(t, s, flash(voucherSpec{}))
			otherOrdinary := createVoucher(t, s, voucherSpec{})
			order := uniqueOrder()
			if r := api.reserve(t, code, 7, order, 5000); r.Error != "" {
				t.Fatalf("reserve: %s", r.Error)
			}
			// At once: the reserved event may not have reached the database.
			for _, tc := range []struct {
				desc     string
				code     string
				customer int64
				amount   int64
			}{
				{"another amount", code, 7, 5001},
				{"another customer", code, 8, 5000},
				{"another flash voucher", otherFlash, 7, 5000},
				{"an ordinary voucher", otherOrdinary, 7, 5000},
			} {
				if r := api.reserve(t, tc.code, tc.customer, order, tc.amount); r.Error != "ORDER_CONFLICT" {
					t.Errorf("%s: %q, want ORDER_CONFLICT", tc.desc, r.Error)
				}
			}
			waitCounters(t, s, code, 1, 1, 0)
			for _, other := range []string{otherFlash, otherOrdinary} {
				if st := readVoucher(t, s, other); st.Used != 0 {
					t.Errorf("voucher %s took a use: %+v", other, st)
				}
			}
			if st := readVoucher(t, s, otherFlash); st.GateRemaining == nil || *st.GateRemaining != 10 {
				t.Errorf("the other flash gate = %s, want 10 (the use given back)", deref(st.GateRemaining))
			}
		})
	})

	t.Run("ReleasedOrderCannotBeReservedAgain", func(t *testing.T) {
		kafkaEach(t, s, func(t *testing.T, api checkoutAPI) {
			code := createVoucher(t, s, flash(voucherSpec{}))
			order := uniqueOrder()
			api.reserve(t, code, 7, order, 5000)
			if r := api.release(t, code, order); r.Error != "" || r.status() != "RELEASED" {
				t.Fatalf("release right after = %q %q", r.Error, r.status())
			}
			if r := api.reserve(t, code, 7, order, 5000); r.Error != "RESERVATION_RELEASED" {
				t.Errorf("reserve of a released order = %q, want RESERVATION_RELEASED", r.Error)
			}
			if r := api.reserve(t, code, 7, order, 9999); r.Error != "ORDER_CONFLICT" {
				t.Errorf("reserve of a released order with another amount = %q, want ORDER_CONFLICT", r.Error)
			}
			waitCounters(t, s, code, 0, 0, 0)
			waitStatus(t, s, order, "RELEASED")
			// Once the database has released it, still RESERVATION_RELEASED.
			if r := api.reserve(t, code, 7, order, 5000); r.Error != "RESERVATION_RELEASED" {
				t.Errorf("reserve of a released order later = %q, want RESERVATION_RELEASED", r.Error)
			}
		})
	})

	t.Run("OutsideWindowOrBelowMinimumIsNotEligible", func(t *testing.T) {
		kafkaEach(t, s, func(t *testing.T, api checkoutAPI) {
			now := time.Now()
			for _, tc := range []struct {
				desc   string
				spec   voucherSpec
				amount int64
			}{
				{"before startsAt", voucherSpec{StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour)}, 5000},
				{"after endsAt", voucherSpec{StartsAt: now.Add(-2 * time.Hour), EndsAt: now.Add(-time.Hour)}, 5000},
				{"below minOrderAmount", voucherSpec{MinOrderAmount: 5001}, 5000},
			} {
				code := createVoucher(t, s, flash(tc.spec))
				if r := api.reserve(t, code, 7, uniqueOrder(), tc.amount); r.Error != "NOT_ELIGIBLE" {
					t.Errorf("%s: %q, want NOT_ELIGIBLE", tc.desc, r.Error)
				}
			}
			code := createVoucher(t, s, flash(voucherSpec{MinOrderAmount: 5000}))
			if r := api.reserve(t, code, 7, uniqueOrder(), 5000); r.Error != "" {
				t.Errorf("an order of exactly minOrderAmount: %q", r.Error)
			}
		})
	})

	t.Run("CustomerAtPerUserLimitIsAlreadyUsed", func(t *testing.T) {
		kafkaEach(t, s, func(t *testing.T, api checkoutAPI) {
			code := createVoucher(t, s, flash(voucherSpec{PerUserLimit: 2}))
			first, second := uniqueOrder(), uniqueOrder()
			for _, o := range []string{first, second} {
				if r := api.reserve(t, code, 7, o, 5000); r.Error != "" {
					t.Fatalf("reserve within perUserLimit 2: %s", r.Error)
				}
			}
			if r := api.reserve(t, code, 7, uniqueOrder(), 5000); r.Error != "ALREADY_USED" {
				t.Errorf("third reserve with perUserLimit 2 = %q, want ALREADY_USED", r.Error)
			}
			if r := api.reserve(t, code, 8, uniqueOrder(), 5000); r.Error != "" {
				t.Errorf("another customer: %q", r.Error)
			}
			if r := api.confirm(t, code, first); r.Error != "" {
				t.Fatalf("confirm: %s", r.Error)
			}
			if r := api.reserve(t, code, 7, uniqueOrder(), 5000); r.Error != "ALREADY_USED" {
				t.Errorf("after a confirm: %q, want ALREADY_USED", r.Error)
			}
			if r := api.release(t, code, second); r.Error != "" {
				t.Fatalf("release: %s", r.Error)
			}
			// The released use goes back to the customer once the database
			// has released it: too few for a while, never too many.
			again := uniqueOrder()
			testenv.Eventually(t, "the customer reserving again after a release", func() (bool, string) {
				r := api.reserve(t, code, 7, again, 5000)
				return r.Error == "", r.Error
			})
			waitCounters(t, s, code, 3, 2, 1)
		})
	})

	t.Run("NoUseLeftIsOutOfStockAndAReleasedUseIsSoldAgain", func(t *testing.T) {
		kafkaEach(t, s, func(t *testing.T, api checkoutAPI) {
			code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 2}))
			held := uniqueOrder()
			api.reserve(t, code, 1, held, 5000)
			api.reserve(t, code, 2, uniqueOrder(), 5000)
			if r := api.reserve(t, code, 3, uniqueOrder(), 5000); r.Error != "OUT_OF_STOCK" {
				t.Errorf("reserve of a sold-out voucher = %q, want OUT_OF_STOCK", r.Error)
			}
			if r := api.reserve(t, code, 1, uniqueOrder(), 5000); r.Error != "ALREADY_USED" {
				t.Errorf("customer at limit on a sold-out voucher = %q, want ALREADY_USED", r.Error)
			}
			if r := api.release(t, code, held); r.Error != "" {
				t.Fatalf("release: %s", r.Error)
			}
			order := uniqueOrder()
			testenv.Eventually(t, "the released use sold again", func() (bool, string) {
				r := api.reserve(t, code, 4, order, 5000)
				return r.Error == "", r.Error
			})
			if r := api.reserve(t, code, 5, uniqueOrder(), 5000); r.Error != "OUT_OF_STOCK" {
				t.Errorf("after selling the released use = %q, want OUT_OF_STOCK", r.Error)
			}
			waitCounters(t, s, code, 2, 2, 0)
		})
	})

	t.Run("ConfirmRightAfterReserveOnceAndRefusals", func(t *testing.T) {
		kafkaEach(t, s, func(t *testing.T, api checkoutAPI) {
			code := createVoucher(t, s, flash(voucherSpec{}))
			other := createVoucher(t, s, flash(voucherSpec{}))
			order := uniqueOrder()
			api.reserve(t, code, 1, order, 100)
			if c := api.confirm(t, code, order); c.Error != "" || c.status() != "CONFIRMED" {
				t.Fatalf("confirm right after reserve = %q %q", c.Error, c.status())
			}
			if c := api.confirm(t, code, order); c.Error != "" || c.status() != "CONFIRMED" {
				t.Errorf("second confirm = %q %q, want success unchanged", c.Error, c.status())
			}
			if r := api.confirm(t, other, order); r.Error != "NOT_FOUND" {
				t.Errorf("confirm under another code = %q, want NOT_FOUND", r.Error)
			}
			if r := api.confirm(t, code, uniqueOrder()); r.Error != "NOT_FOUND" {
				t.Errorf("confirm of an unknown order = %q, want NOT_FOUND", r.Error)
			}
			if r := api.release(t, code, order); r.Error != "ALREADY_CONFIRMED" {
				t.Errorf("release of a confirmed order = %q, want ALREADY_CONFIRMED", r.Error)
			}
			waitCounters(t, s, code, 1, 0, 1)
			waitStatus(t, s, order, "CONFIRMED")
			if c := api.confirm(t, code, order); c.Error != "" || c.status() != "CONFIRMED" {
				t.Errorf("confirm once applied = %q %q", c.Error, c.status())
			}
		})
	})

	t.Run("ReleaseRightAfterReserveGivesTheUseBackOnce", func(t *testing.T) {
		kafkaEach(t, s, func(t *testing.T, api checkoutAPI) {
			code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 1}))
			order := uniqueOrder()
			api.reserve(t, code, 1, order, 100)
			if r := api.release(t, code, order); r.Error != "" || r.status() != "RELEASED" {
				t.Fatalf("release right after reserve = %q %q", r.Error, r.status())
			}
			if r := api.release(t, code, order); r.Error != "" || r.status() != "RELEASED" {
				t.Errorf("second release = %q %q, want success unchanged", r.Error, r.status())
			}
			if r := api.confirm(t, code, order); r.Error != "RESERVATION_RELEASED" {
				t.Errorf("confirm of a released order = %q, want RESERVATION_RELEASED", r.Error)
			}
			if r := api.release(t, code, uniqueOrder()); r.Error != "NOT_FOUND" {
				t.Errorf("release of an unknown order = %q, want NOT_FOUND", r.Error)
			}
			// The use is back at the gate once the release is answered; the
			// database follows when the consumer has applied both events.
			waitGate(t, s, code, 1)
			waitStatus(t, s, order, "RELEASED")
			st := waitCounters(t, s, code, 0, 0, 0)
			if st.Remaining != 1 {
				t.Errorf("remaining = %d, want 1", st.Remaining)
			}
			if r := api.release(t, code, order); r.Error != "" || r.status() != "RELEASED" {
				t.Errorf("release once applied = %q %q", r.Error, r.status())
			}
			var events int
			if err := s.db.QueryRow(context.Background(),
				`SELECT count(*) FROM reservation_event WHERE order_id = $1 AND path = 'kafka'`, order).Scan(&events); err != nil {
				t.Fatal(err)
			}
			if events != 2 {
				t.Errorf("kafka events in the audit trail = %d, want reserved and released once each", events)
			}
			if r := api.reserve(t, code, 1, uniqueOrder(), 100); r.Error != "" {
				t.Errorf("the customer reserving again: %q", r.Error)
			}
		})
	})
}

// TestKafka_ConfirmAndReleaseRacingNeverBothSucceed races a confirm and a
// release of each order, sent right after its reserve.
func TestKafka_ConfirmAndReleaseRacingNeverBothSucceed(t *testing.T) {
	t.Parallel()
	s := kafkaServer(t, nil)
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 40}))
	var confirmedOrders []string
	for i := 0; i < 40; i++ {
		order := uniqueOrder()
		if r := api.reserve(t, code, int64(i+1), order, 100); r.Error != "" {
			t.Fatalf("reserve: %s", r.Error)
		}
		var confirmed, released atomic.Int32
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if r := api.confirm(t, code, order); r.Error == "" {
				confirmed.Add(1)
			} else if r.Error != "RESERVATION_RELEASED" {
				t.Errorf("confirm racing release: %q", r.Error)
			}
		}()
		go func() {
			defer wg.Done()
			if r := api.release(t, code, order); r.Error == "" {
				released.Add(1)
			} else if r.Error != "ALREADY_CONFIRMED" {
				t.Errorf("release racing confirm: %q", r.Error)
			}
		}()
		wg.Wait()
		if confirmed.Load()+released.Load() != 1 {
			t.Fatalf("order %s: confirmed %d and released %d", order, confirmed.Load(), released.Load())
		}
		if confirmed.Load() == 1 {
			confirmedOrders = append(confirmedOrders, order)
		}
	}
	n := len(confirmedOrders)
	waitCounters(t, s, code, n, 0, n)
	for _, o := range confirmedOrders {
		if got := dbStatus(t, s, o); got != "CONFIRMED" {
			t.Errorf("order %s confirmed by the API is %q in the database", o, got)
		}
	}
	waitGate(t, s, code, 40-n)
	assertNoDeadLetters(t, s.db, code)
}

// TestKafka_StampedesNeverOversell: distinct customers, identical requests
// and one customer's many orders, on one server writing through Kafka.
func TestKafka_StampedesNeverOversell(t *testing.T) {
	t.Parallel()
	s := kafkaServer(t, nil)
	api := restAPI{s}

	t.Run("DistinctCustomers", func(t *testing.T) {
		code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 10}))
		counts := stampede(200, func(i int) string {
			return api.reserve(t, code, int64(1000+i), uniqueOrder(), 100).Error
		})
		if counts[""] != 10 || counts["OUT_OF_STOCK"] != 190 {
			t.Errorf("200 reserves on 10 uses: %v, want 10 successes and 190 OUT_OF_STOCK", counts)
		}
		waitCounters(t, s, code, 10, 10, 0)
		if n := liveRows(t, s.db, code); n != 10 {
			t.Errorf("live rows = %d, want 10", n)
		}
	})
	t.Run("IdenticalRequests", func(t *testing.T) {
		code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 5}))
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
		waitCounters(t, s, code, 1, 1, 0)
		waitGate(t, s, code, 4)
	})
	t.Run("OneCustomerManyOrders", func(t *testing.T) {
		code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 100, PerUserLimit: 1}))
		counts := stampede(50, func(i int) string {
			return api.reserve(t, code, 5, uniqueOrder(), 100).Error
		})
		if counts[""] != 1 || counts["ALREADY_USED"] != 49 {
			t.Errorf("50 orders by one customer: %v, want 1 success and 49 ALREADY_USED", counts)
		}
		waitCounters(t, s, code, 1, 1, 0)
	})
}

// assertNoDeadLetters fails if the database db refused an event of the voucher.
func assertNoDeadLetters(t testing.TB, db *pgxpool.Pool, code string) {
	t.Helper()
	if n := deadLetters(t, db, code); n != 0 {
		t.Errorf("%d event(s) of %s were dead-lettered", n, code)
	}
}

// deadLetters counts the events of a voucher the database db refused.
func deadLetters(t testing.TB, db *pgxpool.Pool, code string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM dead_letter WHERE voucher_code = $1`, code).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// topicRecords reads every record of a topic from its start to its end now.
func topicRecords(t testing.TB, brokers, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for int64(len(recs)) < total {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records of %s: %v", len(recs), total, topic, err)
		}
		recs = append(recs, fetches.Records()...)
	}
	return recs
}

// produce writes records to the broker as any producer could.
func produce(t testing.TB, brokers string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// waitApplied waits until the group voucher-writer has committed every
// event on the topic.
func waitApplied(t testing.TB, brokers string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offsets := events.NewOffsets(events.Config{}, cl)
	testenv.Eventually(t, "the consumer to commit every event", func() (bool, string) {
		lag, err := offsets.Lag(context.Background())
		return err == nil && lag == 0, fmt.Sprintf("lag %d (%v)", lag, err)
	})
}

// databaseState is everything the database holds of a voucher, as text.
func databaseState(t testing.TB, db *pgxpool.Pool, code string) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for _, q := range []string{
		`SELECT used_count, reserved_count, confirmed_count FROM voucher WHERE code = $1`,
		`SELECT order_id, customer_id, order_amount, discount_amount, status, created_at, expires_at, confirmed_at, released_at
		   FROM voucher_redemption WHERE voucher_code = $1 ORDER BY order_id`,
		`SELECT customer_id, used_count FROM voucher_customer WHERE voucher_code = $1 ORDER BY customer_id`,
		`SELECT order_id, kind, path FROM reservation_event WHERE voucher_code = $1 ORDER BY id`,
		`SELECT order_id, kind FROM dead_letter WHERE voucher_code = $1 ORDER BY id`,
	} {
		rows, err := db.Query(ctx, q, code)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&b, vals...)
		}
		rows.Close()
		b.WriteString("--\n")
	}
	return b.String()
}

// mixedTraffic reserves, confirms and releases some orders of a voucher and
// returns how many uses stay held and sold.
func mixedTraffic(t testing.TB, api checkoutAPI, code string) (reserved, confirmed int) {
	t.Helper()
	orders := make([]string, 6)
	for i := range orders {
		orders[i] = uniqueOrder()
		r := api.reserve(t, code, int64(i+1), orders[i], 1000*int64(i+1))
		// UNAVAILABLE is the contract's "retry with the same orderId" (a
		// publish or a lookup that ran out of time on a loaded machine):
		// retried as a client does.
		for deadline := time.Now().Add(20 * time.Second); r.Error == "UNAVAILABLE" && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			r = api.reserve(t, code, int64(i+1), orders[i], 1000*int64(i+1))
		}
		if r.Error != "" {
			t.Fatalf("reserve: %s", r.Error)
		}
	}
	for _, step := range []struct {
		confirm bool
		order   string
	}{{true, orders[0]}, {false, orders[1]}, {true, orders[2]}, {false, orders[3]}} {
		var r result
		if step.confirm {
			r = api.confirm(t, code, step.order)
		} else {
			r = api.release(t, code, step.order)
		}
		if r.Error != "" {
			t.Fatalf("confirm/release: %s", r.Error)
		}
	}
	return 2, 2
}

// TestKafka_ReplayingTheTopicChangesNothing writes every event on the topic
// a second time; the consumer applies them all again and the database stays
// as it was.
func TestKafka_ReplayingTheTopicChangesNothing(t *testing.T) {
	t.Parallel()
	_, brokers := testBroker(t)
	s := kafkaServer(t, map[string]string{"KAFKA_BROKERS": brokers})
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 10}))
	reserved, confirmed := mixedTraffic(t, api, code)
	waitCounters(t, s, code, reserved+confirmed, reserved, confirmed)
	waitGate(t, s, code, 10-reserved-confirmed)
	waitApplied(t, brokers)
	before := databaseState(t, s.db, code)

	recs := topicRecords(t, brokers, events.DefaultTopic)
	if len(recs) < 10 {
		t.Fatalf("the topic holds %d events, want at least the 10 decisions", len(recs))
	}
	var again []*kgo.Record
	for _, r := range recs {
		again = append(again, &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers})
	}
	produce(t, brokers, again...)
	waitApplied(t, brokers)

	if after := databaseState(t, s.db, code); after != before {
		t.Errorf("the database changed after a replay of the whole topic:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if st := readVoucher(t, s, code); st.GateRemaining == nil || *st.GateRemaining != 10-reserved-confirmed {
		t.Errorf("gate after the replay = %s, want %d", deref(st.GateRemaining), 10-reserved-confirmed)
	}
}

// TestKafka_ConsumerKilledBeforeItsCommitAppliesEachEventOnce: the broker
// refuses every offset commit, so the consumer applies the events and dies
// without committing; the next consumer of the group applies them all again,
// and each reservation's events are in the database once.
func TestKafka_ConsumerKilledBeforeItsCommitAppliesEachEventOnce(t *testing.T) {
	t.Parallel()
	c, brokers := testBroker(t)
	var refuseCommits atomic.Bool // set once the server's claim fence has settled (below)
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !refuseCommits.Load() {
			return nil, nil, false
		}
		r := req.(*kmsg.OffsetCommitRequest)
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.OffsetMetadataTooLarge.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	// A database of its own: on the shared one the server warms other
	// tests' new flash vouchers through markers it produces, and a reserve
	// that then waits for those events to be committed (the claim fence of
	// a Redis first seen) waited for commits this broker refuses: UNAVAILABLE
	// for as long as the test retried.
	dbURL, db := ownDatabase(t)
	env := map[string]string{"FLASH_WRITE_PATH": "kafka", "KAFKA_BROKERS": brokers, "DATABASE_URL": dbURL}
	first := launch(t, env)
	// The first reserve's claim fence (a Redis first seen) waits until the
	// events published before it are committed: the gate load's marker of
	// a voucher, say. With every commit refused from the start it waited
	// in vain (UNAVAILABLE, 1 run in 4), so one reserve on another voucher
	// settles it while commits go through; the baseline is what they
	// committed.
	warm := createVoucher(t, first, flash(voucherSpec{TotalLimit: 1}))
	if r := (restAPI{first}).reserve(t, warm, 1, uniqueOrder(), 100); r.Error != "" {
		t.Fatalf("the reserve that settles the claim fence: %s", r.Error)
	}
	waitApplied(t, brokers)
	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	baseline, err := kadm.NewClient(admin).FetchOffsets(context.Background(), events.DefaultGroup)
	if err != nil {
		t.Fatal(err)
	}
	refuseCommits.Store(true)

	code := createVoucher(t, first, flash(voucherSpec{TotalLimit: 10}))
	reserved, confirmed := mixedTraffic(t, restAPI{first}, code)
	waitCounters(t, first, code, reserved+confirmed, reserved, confirmed)
	before := databaseState(t, db, code)

	committed, err := kadm.NewClient(admin).FetchOffsets(context.Background(), events.DefaultGroup)
	if err != nil {
		t.Fatal(err)
	}
	committed.Each(func(o kadm.OffsetResponse) {
		at := int64(0)
		if b, ok := baseline.Lookup(o.Topic, o.Partition); ok {
			at = b.At
		}
		if o.At > at {
			t.Fatalf("an offset was committed (%s/%d at %d, %d before the traffic); the test needs none", o.Topic, o.Partition, o.At, at)
		}
	})
	first.stop() // the consumer dies with nothing of the traffic committed

	refuseCommits.Store(false)
	second := kafkaServer(t, map[string]string{"KAFKA_BROKERS": brokers, "DATABASE_URL": dbURL})
	waitApplied(t, brokers) // everything applied again, from the first offset
	if after := databaseState(t, db, code); after != before {
		t.Errorf("applying the events again changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	rows, err := db.Query(context.Background(),
		`SELECT order_id, kind, count(*) FROM reservation_event WHERE voucher_code = $1 GROUP BY 1, 2 HAVING count(*) <> 1`, code)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var order, kind string
		var n int
		_ = rows.Scan(&order, &kind, &n)
		t.Errorf("order %s: %d %s events, want 1", order, n, kind)
	}
	waitCounters(t, second, code, reserved+confirmed, reserved, confirmed)
}

// TestKafka_BrokerUnavailableDuringReserveIsUnavailableAndLeaksNoUse: with
// the broker gone, a reserve passes the gate, cannot publish (the event was
// surely not written: no produce request left), gives the use back and
// answers UNAVAILABLE. The server has a database of its own: in the shared
// one, other tests' flash vouchers are warmed up through markers the server
// produces, and a produce connection open when the broker dies may take the
// reserve's request (bytes written, no answer: an unknown outcome, which
// holds the use until the admission's lease, another test's case).
func TestKafka_BrokerUnavailableDuringReserveIsUnavailableAndLeaksNoUse(t *testing.T) {
	t.Parallel()
	c, brokers := testBroker(t)
	dbURL, db := ownDatabase(t)
	s := kafkaServer(t, map[string]string{"KAFKA_BROKERS": brokers, "DATABASE_URL": dbURL})
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 5}))
	probe := createVoucher(t, s, flash(voucherSpec{TotalLimit: 5}))
	c.Close()
	// The broker's end of the producer's connection is closed; until the
	// producer has read that, a request it writes goes into a socket whose
	// peer is gone, the write succeeds locally, and the outcome is unknown
	// (held on the safe side: TestKafka_PublishOfUnknownOutcome... is that
	// case). This test is the broker surely unreachable: a reserve on
	// another voucher first makes the producer find the connection dead,
	// however late it would have noticed by itself (a fixed wait was not
	// enough on a loaded machine); after it, every dial is refused.
	if r := api.reserve(t, probe, 1, uniqueOrder(), 100); r.Error != "UNAVAILABLE" {
		t.Fatalf("reserve with the broker down = %q (HTTP %d), want UNAVAILABLE", r.Error, r.HTTPStatus)
	}

	order := uniqueOrder()
	for i := 0; i < 2; i++ { // and its retry
		if r := api.reserve(t, code, 2, order, 100); r.Error != "UNAVAILABLE" || r.HTTPStatus != 503 {
			t.Fatalf("reserve with the broker down = %q (HTTP %d), want UNAVAILABLE", r.Error, r.HTTPStatus)
		}
		st := readVoucher(t, s, code)
		if st.GateRemaining == nil || *st.GateRemaining != 5 {
			t.Fatalf("gate after unpublished reserve %d = %s, want 5: the use given back", i+1, deref(st.GateRemaining))
		}
	}
	var rows int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM voucher_redemption WHERE order_id = $1`, order).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("the unpublished order has %d rows in the database (%v)", rows, err)
	}
	rdb := redis.NewClient(mustRedisOptions(t))
	defer rdb.Close()
	if n, err := rdb.Exists(context.Background(), "order:{"+order+"}").Result(); err != nil || n != 0 {
		t.Errorf("the unpublished order is still claimed (%d, %v)", n, err)
	}
	if st := readVoucher(t, s, code); st.Used != 0 {
		t.Errorf("voucher = %+v, want no use", st)
	}
}

// TestKafka_PublishOfUnknownOutcomeKeepsTheUseAndTheRetryFindsIt: the broker
// takes the reserved event and does not answer (it may have written it), so
// the reserve answers UNAVAILABLE and the gate keeps the use. Once the broker
// answers again the event lands (franz-go sends it again, written once) and
// a retry of the order gets its reservation, with no second use.
func TestKafka_PublishOfUnknownOutcomeKeepsTheUseAndTheRetryFindsIt(t *testing.T) {
	t.Parallel()
	c, brokers := testBroker(t)
	var silent atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !silent.Load() {
			return nil, nil, false
		}
		return nil, nil, true // read, never answered
	})
	s := kafkaServer(t, map[string]string{"KAFKA_BROKERS": brokers})
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 5}))
	if r := api.reserve(t, code, 1, uniqueOrder(), 100); r.Error != "" {
		t.Fatalf("reserve with the broker answering: %s", r.Error)
	}

	silent.Store(true)
	order := uniqueOrder()
	if r := api.reserve(t, code, 2, order, 100); r.Error != "UNAVAILABLE" {
		t.Fatalf("reserve with the broker silent = %q, want UNAVAILABLE", r.Error)
	}
	if st := readVoucher(t, s, code); st.GateRemaining == nil || *st.GateRemaining != 3 {
		t.Fatalf("gate after a publish of unknown outcome = %s, want 3: the use held", deref(st.GateRemaining))
	}

	silent.Store(false)
	waitStatus(t, s, order, "RESERVED") // the event was sent again and applied
	r := api.reserve(t, code, 2, order, 100)
	if r.Error != "" || r.status() != "RESERVED" {
		t.Fatalf("retry once the broker answers = %q %q, want the reservation", r.Error, r.status())
	}
	waitCounters(t, s, code, 2, 2, 0)
	if st := readVoucher(t, s, code); st.GateRemaining == nil || *st.GateRemaining != 3 {
		t.Errorf("gate after the retry = %s, want 3 (no second use)", deref(st.GateRemaining))
	}
}

func mustRedisOptions(t testing.TB) *redis.Options {
	t.Helper()
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

// TestKafka_DeadLetteredEventRaisesTheAlert: an event the database refuses
// (a use past the voucher's total limit, as a wrong gate would send; and one
// that is not an event at all) goes to the dead-letter topic and table and
// the dead-letter counter, and the consumer goes on.
func TestKafka_DeadLetteredEventRaisesTheAlert(t *testing.T) {
	t.Parallel()
	_, brokers := testBroker(t)
	// A Redis of its own, and no warm-up or reconciliation while it runs:
	// the gate must stay unloaded until the refused event is read, and every
	// server of the suite warms the gates of the shared database on the
	// shared Redis when it starts (CI saw the event judged by a gate one of
	// them had loaded again, and skipped rather than dead-lettered).
	// A database of its own too (ownDatabase): on the shared one its
	// warm-up would load every other test's flash voucher into this Redis
	// and its reconciliation hold the shared job's lease for the hour.
	rs := testredis.Start(t)
	dbURL, db := ownDatabase(t)
	s := kafkaServer(t, map[string]string{
		"KAFKA_BROKERS": brokers, "REDIS_URL": rs.URL, "DATABASE_URL": dbURL,
		"WARMUP_INTERVAL": "1h", "RECONCILE_INTERVAL": "1h",
	})
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 1}))
	if r := api.reserve(t, code, 1, uniqueOrder(), 100); r.Error != "" {
		t.Fatalf("reserve: %s", r.Error)
	}
	waitCounters(t, s, code, 1, 1, 0)
	// The counters move when the reserve's row is written, before the
	// consumer has told the gate and committed; a gate unloaded in between
	// made the consumer ask for its recovery, and the gate reloaded by the
	// marker then judged (and skipped) the event below: 1 run in 10.
	waitApplied(t, brokers)

	// An event the gate can judge and never admitted is skipped (see
	// TestKafka_AnEventTheGateNeverAdmittedIsSkipped); with the gate gone,
	// the consumer applies what it reads unchecked, and the database's CHECK
	// is the last line of defence.
	rdb, err := gate.NewClient(rs.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	// The server's own start-up passes (warm-up, reconciliation: each runs
	// once when the server starts, whatever its interval) may come late on
	// a loaded machine, find the gate unloaded and have it loaded again,
	// which then judges the event (a fresh-machine rehearsal saw it). A try
	// whose event the gate judged is made again, up to three.
	g := gate.New(rdb)
	var wrong voucher.Event
	var value []byte
	for try := 1; ; try++ {
		if err := g.Unload(context.Background(), code); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		wrong = voucher.NewEvent(voucher.EventReserved, voucher.Reservation{
			OrderID: uniqueOrder(), VoucherCode: code, CustomerID: 2, OrderAmount: 100, DiscountAmount: 100,
			CreatedAt: now, ExpiresAt: now.Add(15 * time.Minute),
		}, now)
		if value, err = events.Encode(wrong); err != nil {
			t.Fatal(err)
		}
		produce(t, brokers, &kgo.Record{Topic: events.DefaultTopic, Key: []byte(code), Value: value})
		waitApplied(t, brokers)
		var dead int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM dead_letter WHERE order_id = $1`, wrong.OrderID).Scan(&dead); err != nil {
			t.Fatal(err)
		}
		if dead == 1 {
			break
		}
		_, loaded, err := g.Remaining(context.Background(), code)
		if err != nil || !loaded || try == 3 {
			t.Fatalf("try %d: the refused event was not dead-lettered (gate loaded again: %t, %v)", try, loaded, err)
		}
		t.Logf("try %d: the gate was loaded again before the event was read, and judged it; again", try)
	}
	produce(t, brokers, &kgo.Record{Topic: events.DefaultTopic, Key: []byte(code), Value: []byte("not an event")})
	waitApplied(t, brokers)

	testenv.Eventually(t, "the dead-letter counter", func() (bool, string) {
		n := metricValue(t, s, `voucher_dead_letters_total{kind="reserved"}`)
		return n >= 1, fmt.Sprint(n)
	})
	var reason string
	if err := db.QueryRow(context.Background(),
		`SELECT reason FROM dead_letter WHERE order_id = $1 AND kind = 'reserved'`, wrong.OrderID).Scan(&reason); err != nil {
		t.Fatalf("the dead_letter row of the refused event: %v", err)
	}
	if !strings.Contains(reason, "voucher_used_within_limit") {
		t.Errorf("dead letter reason = %q, want the CHECK that fired", reason)
	}
	var rows int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM voucher_redemption WHERE order_id = $1`, wrong.OrderID).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("the refused order has %d rows in the database (%v)", rows, err)
	}
	if st := readVoucher(t, s, code); st.Used != 1 {
		t.Errorf("voucher after a refused event = %+v, want usedCount 1", st)
	}
	dead := topicRecords(t, brokers, events.DefaultDeadLetterTopic)
	if len(dead) != 2 {
		t.Fatalf("dead-letter topic holds %d records, want 2", len(dead))
	}
	if string(dead[0].Value) != string(value) {
		t.Errorf("dead-letter topic: %q, want the refused event", dead[0].Value)
	}
	// The consumer goes on after a dead letter.
	if r := api.release(t, code, uniqueOrder()); r.Error != "NOT_FOUND" {
		t.Errorf("release of an unknown order = %q", r.Error)
	}
}

// latestDrift is a voucher's latest drift report in db.
type latestDrift struct {
	Drift    int
	Alert    bool
	Repaired string
	OnlyGate []string
}

func driftOf(t testing.TB, db *pgxpool.Pool, code string) (latestDrift, bool) {
	t.Helper()
	var d latestDrift
	err := db.QueryRow(context.Background(),
		`SELECT drift, alert, repaired, orders_only_in_gate FROM drift_report WHERE voucher_code = $1 ORDER BY id DESC LIMIT 1`, code).
		Scan(&d.Drift, &d.Alert, &d.Repaired, &d.OnlyGate)
	if err != nil {
		return d, false
	}
	return d, true
}

// waitPasses waits until reconciliation has stored n more reports of a
// voucher than it had (n more passes).
func waitPasses(t testing.TB, db *pgxpool.Pool, code string, n int) {
	t.Helper()
	var last int64
	if err := db.QueryRow(context.Background(), `SELECT coalesce(max(id), 0) FROM drift_report WHERE voucher_code = $1`, code).Scan(&last); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, fmt.Sprintf("%d more reconciliation passes of %s", n, code), func() (bool, string) {
		var more int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM drift_report WHERE voucher_code = $1 AND id > $2`, code, last).Scan(&more); err != nil {
			return false, err.Error()
		}
		return more >= n, fmt.Sprintf("%d more", more)
	})
}

// TestKafka_LeakedUseIsFoundByReconciliationAndReturned: a use taken at the
// gate with no event (the process died between the gate and the broker) is
// in the gate alone for two reconciliation passes and is given back.
func TestKafka_LeakedUseIsFoundByReconciliationAndReturned(t *testing.T) {
	t.Parallel()
	url, db := ownDatabase(t)
	s := kafkaServer(t, map[string]string{"DATABASE_URL": url, "RECONCILE_INTERVAL": "1s", "ADMISSION_LEASE": "1s"})
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 5}))
	kept := uniqueOrder()
	if r := api.reserve(t, code, 1, kept, 100); r.Error != "" {
		t.Fatalf("reserve: %s", r.Error)
	}

	rdb, err := gate.NewClient(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	g := gate.New(rdb)
	// An owner that died between the gate and the broker: its admission
	// stays pending, its use held, until its lease runs out.
	leaked := uniqueOrder()
	a, err := g.Admit(context.Background(), code, voucher.ReserveRequest{Code: code, CustomerID: 99, OrderID: leaked, OrderAmount: 100}, 0)
	if err != nil || a.Verdict != voucher.GateAdmitted {
		t.Fatalf("taking a use at the gate: %+v, %v", a, err)
	}
	if st := readVoucher(t, s, code); st.GateRemaining == nil || *st.GateRemaining != 3 {
		t.Fatalf("gate with a leaked use = %s, want 3", deref(st.GateRemaining))
	}

	testenv.Eventually(t, "reconciliation to return the leaked use", func() (bool, string) {
		d, ok := driftOf(t, db, code)
		return ok && strings.Contains(d.Repaired, "voided 1 admission"), fmt.Sprintf("%+v", d)
	})
	waitGate(t, s, code, 4)
	if o, ok, err := g.Order(context.Background(), code, leaked); err != nil || !ok || !o.Void {
		t.Errorf("the leaked admission is not void at the gate: %+v (%v, %v)", o, ok, err)
	}
	if o, ok, err := g.Order(context.Background(), code, kept); err != nil || !ok || o.Released {
		t.Errorf("the published order lost its use at the gate: %+v, %v, %v", o, ok, err)
	}
	// The use is sold again.
	if r := api.reserve(t, code, 99, uniqueOrder(), 100); r.Error != "" {
		t.Errorf("reserve after the leak was returned: %s", r.Error)
	}
}

// TestKafka_GateTamperingShowsAsDriftAndAPersistingUndersellIsRebuilt: a
// DECRBY on the gate's counter is drift at the next pass; persisting past
// one interval it is an alert, and that pass rebuilds the gate from the
// database (through the consumer's marker, as an operator's rebuild), so
// the uses sell again. A pass never raises a gate itself.
func TestKafka_GateTamperingShowsAsDriftAndAPersistingUndersellIsRebuilt(t *testing.T) {
	t.Parallel()
	url, db := ownDatabase(t)
	s := kafkaServer(t, map[string]string{"DATABASE_URL": url, "RECONCILE_INTERVAL": "1s"})
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 10}))
	for i := 0; i < 2; i++ {
		if r := api.reserve(t, code, int64(i+1), uniqueOrder(), 100); r.Error != "" {
			t.Fatalf("reserve: %s", r.Error)
		}
	}
	waitCounters(t, s, code, 2, 2, 0)
	testenv.Eventually(t, "a clean reconciliation", func() (bool, string) {
		d, ok := driftOf(t, db, code)
		return ok && d.Drift == 0 && !d.Alert, fmt.Sprintf("%+v (found %v)", d, ok)
	})
	var clean int64
	if err := db.QueryRow(context.Background(), `SELECT max(id) FROM drift_report WHERE voucher_code = $1`, code).Scan(&clean); err != nil {
		t.Fatal(err)
	}

	rdb := redis.NewClient(mustRedisOptions(t))
	defer rdb.Close()
	if err := rdb.DecrBy(context.Background(), "voucher:{"+code+"}:stock", 3).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the persisting drift alerted and the gate rebuilt", func() (bool, string) {
		var drifts []int
		var alerts []bool
		var repaired []string
		// Passes between the clean one and the DECRBY (drift 0) aside.
		rows, err := db.Query(context.Background(), `SELECT drift, alert, repaired FROM drift_report WHERE voucher_code = $1 AND id > $2 AND drift <> 0 ORDER BY id`, code, clean)
		if err != nil {
			return false, err.Error()
		}
		defer rows.Close()
		for rows.Next() {
			var d int
			var a bool
			var r string
			if err := rows.Scan(&d, &a, &r); err != nil {
				return false, err.Error()
			}
			drifts, alerts, repaired = append(drifts, d), append(alerts, a), append(repaired, r)
		}
		// The first pass warns; the second alerts and rebuilds.
		ok := len(drifts) >= 2 && drifts[0] == -3 && !alerts[0] && drifts[1] == -3 && alerts[1] && strings.Contains(repaired[1], "rebuilt from the database")
		return ok, fmt.Sprintf("drifts %v, alerts %v, repaired %q", drifts, alerts, repaired)
	})
	waitGate(t, s, code, 8)
	testenv.Eventually(t, "a clean pass after the rebuild", func() (bool, string) {
		d, _ := driftOf(t, db, code)
		return d.Drift == 0 && !d.Alert, fmt.Sprintf("%+v", d)
	})
}

// TestKafka_ExpiryReleasesOnceAcrossInstancesAndNeverAConfirmedOrder: two
// instances on one broker sweep; each reservation past its deadline is
// released once, its use back in the database and the gate; a confirm
// racing the sweep either confirms or is refused, never both.
func TestKafka_ExpiryReleasesOnceAcrossInstancesAndNeverAConfirmedOrder(t *testing.T) {
	t.Parallel()
	// A database of its own: no other test's server sweeps its reservations.
	url, db := ownDatabase(t)
	_, brokers := testBroker(t)
	env := map[string]string{"DATABASE_URL": url, "KAFKA_BROKERS": brokers, "RESERVATION_TTL": "1s", "EXPIRY_INTERVAL": "200ms"}
	a, b := kafkaServer(t, env), kafkaServer(t, env)
	code := createVoucher(t, a, flash(voucherSpec{TotalLimit: 60}))
	var orders []string
	for i := 0; i < 60; i++ {
		srv := a
		if i%2 == 1 {
			srv = b
		}
		order := uniqueOrder()
		if r := (restAPI{srv}).reserve(t, code, int64(i+1), order, 100); r.Error != "" {
			t.Fatalf("reserve: %s", r.Error)
		}
		orders = append(orders, order)
	}
	// A third of them confirmed as their deadline comes, racing the sweeps.
	time.Sleep(800 * time.Millisecond)
	confirmedByAPI := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, order := range orders[:20] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv := a
			if i%2 == 0 {
				srv = b
			}
			time.Sleep(time.Duration(i*15) * time.Millisecond)
			switch r := (restAPI{srv}).confirm(t, code, order); r.Error {
			case "":
				mu.Lock()
				confirmedByAPI[order] = true
				mu.Unlock()
			case "RESERVATION_RELEASED":
			default:
				t.Errorf("confirm racing expiry: %q", r.Error)
			}
		}()
	}
	wg.Wait()
	n := len(confirmedByAPI)
	waitCounters(t, a, code, n, 0, n)
	waitGate(t, a, code, 60-n)
	for _, order := range orders {
		want := "RELEASED"
		if confirmedByAPI[order] {
			want = "CONFIRMED"
		}
		var got string
		if err := db.QueryRow(context.Background(), `SELECT status FROM voucher_redemption WHERE order_id = $1`, order).Scan(&got); err != nil || got != want {
			t.Errorf("order %s is %q (%v) in the database; the API's answers say %s", order, got, err, want)
		}
	}
	var expired int
	if err := db.QueryRow(context.Background(),
		`SELECT count(*) FROM reservation_event WHERE voucher_code = $1 AND kind IN ('expired', 'released')`, code).Scan(&expired); err != nil {
		t.Fatal(err)
	}
	if expired != 60-n {
		t.Errorf("releases in the audit trail = %d, want %d (each once)", expired, 60-n)
	}
	if r := (restAPI{b}).reserve(t, code, 60, orders[59], 100); r.Error != "RESERVATION_RELEASED" {
		t.Errorf("retry of an expired order = %q, want RESERVATION_RELEASED", r.Error)
	}
	var dead int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM dead_letter`).Scan(&dead); err != nil || dead != 0 {
		t.Errorf("dead letters = %d (%v), want none", dead, err)
	}
}

// TestKafka_ConfirmAfterExpiresAtIsReleasedEvenBeforeTheSweep: the gate
// refuses a late confirm by the order's expiresAt alone.
func TestKafka_ConfirmAfterExpiresAtIsReleasedEvenBeforeTheSweep(t *testing.T) {
	t.Parallel()
	s := kafkaServer(t, map[string]string{"RESERVATION_TTL": "1s", "EXPIRY_INTERVAL": "1h"})
	for _, api := range transports(s) {
		code := createVoucher(t, s, flash(voucherSpec{}))
		order := uniqueOrder()
		api.reserve(t, code, 1, order, 100)
		time.Sleep(1200 * time.Millisecond)
		if r := api.confirm(t, code, order); r.Error != "RESERVATION_RELEASED" {
			t.Errorf("%s: confirm after expiresAt = %q, want RESERVATION_RELEASED", api.name(), r.Error)
		}
	}
}

// TestKafka_ConfirmAndReleaseOnAnotherInstanceRightAfterTheReserve: the
// reserve's event is acknowledged before its answer, so a confirm or
// release sent to another instance at once is applied after it.
func TestKafka_ConfirmAndReleaseOnAnotherInstanceRightAfterTheReserve(t *testing.T) {
	t.Parallel()
	_, brokers := testBroker(t)
	env := map[string]string{"KAFKA_BROKERS": brokers}
	a, b := kafkaServer(t, env), kafkaServer(t, env)
	code := createVoucher(t, a, flash(voucherSpec{TotalLimit: 20}))
	var confirmed, released []string
	for i := 0; i < 20; i++ {
		order := uniqueOrder()
		if r := (restAPI{a}).reserve(t, code, int64(i+1), order, 100); r.Error != "" {
			t.Fatalf("reserve on a: %s", r.Error)
		}
		if i%2 == 0 {
			if r := (graphqlAPI{b}).confirm(t, code, order); r.Error != "" {
				t.Fatalf("confirm on b: %s", r.Error)
			}
			confirmed = append(confirmed, order)
		} else {
			if r := (graphqlAPI{b}).release(t, code, order); r.Error != "" {
				t.Fatalf("release on b: %s", r.Error)
			}
			released = append(released, order)
		}
	}
	waitCounters(t, b, code, 10, 0, 10)
	waitGate(t, a, code, 10)
	for _, o := range confirmed {
		waitStatus(t, a, o, "CONFIRMED")
	}
	for _, o := range released {
		waitStatus(t, a, o, "RELEASED")
	}
	assertNoDeadLetters(t, a.db, code)
}

// TestKafka_RedisLosingItsDataMidSaleNeverOversells: after a FLUSHALL the
// gate is rebuilt only once the decisions in flight have reached the
// database (reserves answer UNAVAILABLE meanwhile); earlier orders keep
// their reservations and the rest of the sale sells exactly what is left.
func TestKafka_RedisLosingItsDataMidSaleNeverOversells(t *testing.T) {
	t.Parallel()
	rs := testredis.Start(t)
	dbURL, db := ownDatabase(t) // its sweeps must not give other tests' uses to this Redis
	s := kafkaServer(t, map[string]string{"REDIS_URL": rs.URL, "DATABASE_URL": dbURL})
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 20}))
	var won []string
	for i := 0; i < 8; i++ {
		order := uniqueOrder()
		if r := api.reserve(t, code, int64(i+1), order, 100); r.Error != "" {
			t.Fatalf("reserve: %s", r.Error)
		}
		won = append(won, order)
	}
	api.confirm(t, code, won[0])
	api.confirm(t, code, won[1])
	api.release(t, code, won[2])
	first := api.reserve(t, code, 4, won[3], 100)

	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if r := api.reserve(t, code, 100, uniqueOrder(), 100); r.Error != "UNAVAILABLE" {
		t.Errorf("reserve right after the gate lost its data = %q, want UNAVAILABLE while it recovers", r.Error)
	}
	testenv.Eventually(t, "the gate to be rebuilt", func() (bool, string) {
		r := api.reserve(t, code, 4, won[3], 100)
		return r.Error == "", r.Error
	})
	if r := api.reserve(t, code, 4, won[3], 100); r.Error != "" || str(r.Reservation["createdAt"]) != str(first.Reservation["createdAt"]) {
		t.Errorf("retry of an order reserved before the loss = %q %v, want its reservation", r.Error, r.Reservation)
	}
	if r := api.confirm(t, code, won[0]); r.Error != "" || r.status() != "CONFIRMED" {
		t.Errorf("confirm of an order confirmed before the loss = %q %q", r.Error, r.status())
	}
	if r := api.confirm(t, code, won[2]); r.Error != "RESERVATION_RELEASED" {
		t.Errorf("confirm of an order released before the loss = %q", r.Error)
	}
	counts := stampede(60, func(i int) string {
		return api.reserve(t, code, int64(1000+i), uniqueOrder(), 100).Error
	})
	if counts[""] != 13 {
		t.Errorf("the rest of the sale: %v, want exactly 13 successes (20 - 7 held)", counts)
	}
	waitCounters(t, s, code, 20, 18, 2)
	if n := liveRows(t, db, code); n != 20 {
		t.Errorf("live rows = %d, want 20", n)
	}
	assertNoDeadLetters(t, db, code)
}

// TestKafka_DecisionWhosePublishFailsIsRecordedByItsRetry: the gate
// confirms (or releases) but the broker does not answer the event; the
// caller gets UNAVAILABLE, the gate keeps its decision (a release is not
// undone by a confirm, nor the reverse), and the retry publishes it again.
func TestKafka_DecisionWhosePublishFailsIsRecordedByItsRetry(t *testing.T) {
	t.Parallel()
	c, brokers := testBroker(t)
	var silent atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !silent.Load() {
			return nil, nil, false
		}
		return nil, nil, true
	})
	s := kafkaServer(t, map[string]string{"KAFKA_BROKERS": brokers})
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 5}))
	toConfirm, toRelease := uniqueOrder(), uniqueOrder()
	api.reserve(t, code, 1, toConfirm, 100)
	api.reserve(t, code, 2, toRelease, 100)
	waitCounters(t, s, code, 2, 2, 0)

	silent.Store(true)
	if r := api.confirm(t, code, toConfirm); r.Error != "UNAVAILABLE" {
		t.Fatalf("confirm with the broker silent = %q, want UNAVAILABLE", r.Error)
	}
	if r := api.release(t, code, toRelease); r.Error != "UNAVAILABLE" {
		t.Fatalf("release with the broker silent = %q, want UNAVAILABLE", r.Error)
	}
	// The gate decided: the other decision is refused.
	if r := api.release(t, code, toConfirm); r.Error != "ALREADY_CONFIRMED" && r.Error != "UNAVAILABLE" {
		t.Errorf("release of the confirmed order = %q", r.Error)
	}
	silent.Store(false)
	// The caller retries while it hears UNAVAILABLE (franz-go is still
	// resending the unanswered batches for a few seconds).
	testenv.Eventually(t, "the confirm's retry to succeed", func() (bool, string) {
		r := api.confirm(t, code, toConfirm)
		return r.Error == "" && r.status() == "CONFIRMED", r.Error
	})
	testenv.Eventually(t, "the release's retry to succeed", func() (bool, string) {
		r := api.release(t, code, toRelease)
		return r.Error == "" && r.status() == "RELEASED", r.Error
	})
	if r := api.confirm(t, code, toRelease); r.Error != "RESERVATION_RELEASED" {
		t.Errorf("confirm of the released order = %q", r.Error)
	}
	waitStatus(t, s, toConfirm, "CONFIRMED")
	waitStatus(t, s, toRelease, "RELEASED")
	waitCounters(t, s, code, 1, 0, 1)
	waitGate(t, s, code, 4)
	assertNoDeadLetters(t, s.db, code)
}
