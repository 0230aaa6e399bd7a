package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/testenv"
)

// Reservation.position (issue 29): a reservation's place among its
// voucher's admitted reserves, 1 for the first use ever taken, fixed when
// the use is taken, never reused after a release; the same on every write
// path and over both transports.

// positionOf is a reservation's position as answered (0 when absent).
func positionOf(t testing.TB, r result) int {
	t.Helper()
	if r.Reservation["position"] == nil {
		return 0
	}
	return int(num(t, r.Reservation["position"]))
}

type positioned struct {
	customer int64
	position int
}

// stampedePositions sends n reserves at once on a voucher of `uses` uses
// over api and returns the winners' answered positions by order; it fails
// unless exactly `uses` won and their positions are 1..uses, each once.
func stampedePositions(t *testing.T, api checkoutAPI, code string, n, uses int) map[string]positioned {
	t.Helper()
	var mu sync.Mutex
	won := map[string]positioned{}
	outcomes := stampede(n, func(i int) string {
		order, customer := uniqueOrder(), int64(10_000+i)
		r := api.reserve(t, code, customer, order, 5000)
		if r.Error == "" {
			mu.Lock()
			won[order] = positioned{customer, positionOf(t, r)}
			mu.Unlock()
		}
		return r.Error
	})
	if outcomes[""] != uses || outcomes["OUT_OF_STOCK"] != n-uses {
		t.Fatalf("%d reserves on %d uses: %v, want %d successes and the rest OUT_OF_STOCK", n, uses, outcomes, uses)
	}
	var got []int
	for _, w := range won {
		got = append(got, w.position)
	}
	assertOneTo(t, "answered positions", got, uses)
	return won
}

// assertOneTo fails unless positions are 1..n, each once.
func assertOneTo(t testing.TB, what string, positions []int, n int) {
	t.Helper()
	got := slices.Sorted(slices.Values(positions))
	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %v, want 1..%d each once", what, got, n)
	}
}

// storedPositions waits until the database holds every order of want with
// the position it was answered with (the kafka path writes after the
// answer).
func storedPositions(t testing.TB, s *server, want map[string]positioned) {
	t.Helper()
	testenv.Eventually(t, "the database to hold the answered positions", func() (bool, string) {
		for order, w := range want {
			var p int
			err := s.db.QueryRow(context.Background(), `SELECT position FROM voucher_redemption WHERE order_id = $1`, order).Scan(&p)
			if err != nil || p != w.position {
				return false, fmt.Sprintf("order %s: position %d (%v), answered %d", order, p, err, w.position)
			}
		}
		return true, ""
	})
}

// replayReleaseAndNext checks, after a stampede that took every use: a
// replay of an order answers its position; its release keeps it; the next
// reserve gets uses+1, not the released number.
func replayReleaseAndNext(t *testing.T, api checkoutAPI, code string, won map[string]positioned, uses int, afterRelease func()) string {
	t.Helper()
	var order string
	var w positioned
	for o, x := range won {
		if x.position == 1 {
			order, w = o, x
		}
	}
	if r := api.reserve(t, code, w.customer, order, 5000); r.Error != "" || positionOf(t, r) != 1 {
		t.Fatalf("replay of the first order: %+v, want its position 1", r)
	}
	if r := api.release(t, code, order); r.Error != "" || positionOf(t, r) != 1 {
		t.Fatalf("release of the first order: %+v, want its position 1 kept", r)
	}
	if afterRelease != nil {
		afterRelease()
	}
	next := uniqueOrder()
	var r result
	testenv.Eventually(t, "a reserve on the use given back", func() (bool, string) {
		r = api.reserve(t, code, 99_999, next, 5000)
		return r.Error != "UNAVAILABLE" && r.Error != "OUT_OF_STOCK", r.Error
	})
	if r.Error != "" || positionOf(t, r) != uses+1 {
		t.Fatalf("a reserve after a release: %+v, want position %d", r, uses+1)
	}
	if r := api.reserve(t, code, 99_999, next, 5000); positionOf(t, r) != uses+1 {
		t.Fatalf("its replay: %+v, want position %d", r, uses+1)
	}
	return next
}

// dropGate deletes a flash voucher's gate keys (its own, on the shared
// Redis): the next request loads it again from the database.
func dropGate(t testing.TB, code string) {
	t.Helper()
	ctx := context.Background()
	rdb := redis.NewClient(mustRedisOptions(t))
	defer rdb.Close()
	keys, err := rdb.Keys(ctx, "voucher:{"+code+"}:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the gate keys of %s: %v, %v", code, keys, err)
	}
	if err := rdb.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
}

// reserveOnceLoaded reserves a new order, again while the gate is being
// loaded (UNAVAILABLE), and returns the answer.
func reserveOnceLoaded(t testing.TB, api checkoutAPI, code string, customer int64) result {
	t.Helper()
	order := uniqueOrder()
	var r result
	testenv.Eventually(t, "a reserve on a reloaded gate", func() (bool, string) {
		r = api.reserve(t, code, customer, order, 5000)
		return r.Error != "UNAVAILABLE", r.Error
	})
	return r
}

func TestPosition_DatabasePath_OneToNUnderAStampedeNeverReused(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	for _, api := range transports(s) {
		t.Run(api.name(), func(t *testing.T) {
			code := createVoucher(t, s, voucherSpec{TotalLimit: 50, PerUserLimit: 1})
			won := stampedePositions(t, api, code, 300, 50)
			storedPositions(t, s, won)
			replayReleaseAndNext(t, api, code, won, 50, nil)
		})
	}
}

func TestPosition_FlashSync_OneToNUnderAStampedeAndAReloadedGateContinues(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	for _, api := range transports(s) {
		t.Run(api.name(), func(t *testing.T) {
			code := createVoucher(t, s, voucherSpec{TotalLimit: 50, PerUserLimit: 1, Flash: true})
			won := stampedePositions(t, api, code, 300, 50)
			storedPositions(t, s, won)
			replayReleaseAndNext(t, api, code, won, 50, nil)
			// The voucher is sold out again: release one more, reload.
			for order, w := range won {
				if w.position == 2 {
					if r := api.release(t, code, order); r.Error != "" {
						t.Fatalf("release: %+v", r)
					}
				}
			}
			dropGate(t, code)
			if r := reserveOnceLoaded(t, api, code, 88_888); r.Error != "" || positionOf(t, r) != 52 {
				t.Fatalf("a reserve on the reloaded gate: %+v, want position 52", r)
			}
		})
	}
}

func TestPosition_FlashKafka_OneToNUnderAStampedeAndAReloadedGateContinues(t *testing.T) {
	t.Parallel()
	s := kafkaServer(t, nil)
	for _, api := range transports(s) {
		t.Run(api.name(), func(t *testing.T) {
			code := createVoucher(t, s, voucherSpec{TotalLimit: 50, PerUserLimit: 1, Flash: true})
			won := stampedePositions(t, api, code, 300, 50)
			storedPositions(t, s, won)
			waitCounters(t, s, code, 50, 50, 0)
			next := replayReleaseAndNext(t, api, code, won, 50, func() { waitCounters(t, s, code, 49, 49, 0) })
			storedPositions(t, s, map[string]positioned{next: {99_999, 51}})
			for order, w := range won {
				if w.position == 2 {
					if r := api.release(t, code, order); r.Error != "" {
						t.Fatalf("release: %+v", r)
					}
				}
			}
			waitCounters(t, s, code, 49, 49, 0)
			// Redis lost the voucher's gate: it is loaded again from the
			// database, and continues the count from its admitted_count.
			dropGate(t, code)
			r := reserveOnceLoaded(t, api, code, 88_888)
			if r.Error != "" || positionOf(t, r) != 52 {
				t.Fatalf("a reserve on the reloaded gate: %+v, want position 52", r)
			}
			storedPositions(t, s, map[string]positioned{str(r.Reservation["orderId"]): {88_888, 52}})
		})
	}
}

// A campaign's codes are numbered in the campaign's order: its reserves of
// any of its codes get 1..N between them.
func TestPosition_CampaignCodesAreNumberedInTheCampaignsOrder(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	for _, flashCampaign := range []bool{false, true} {
		t.Run(fmt.Sprintf("flash=%v", flashCampaign), func(t *testing.T) {
			_, codes := readyCampaign(t, s, campaignSpec{CodeCount: 20, UsesPerCode: 1, TotalLimit: 12, PerUserLimit: 1, Flash: flashCampaign})
			api := restAPI{s}
			var mu sync.Mutex
			var got []int
			stampede(20, func(i int) string {
				r := api.reserve(t, codes[i], int64(500+i), uniqueOrder(), 5000)
				if r.Error == "" {
					mu.Lock()
					got = append(got, positionOf(t, r))
					mu.Unlock()
				}
				return r.Error
			})
			assertOneTo(t, "the campaign's positions", got, 12)
		})
	}
}
