package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// createRaw creates a voucher with exactly the given input and returns the
// payload's voucher code and error code.
func createRaw(t testing.TB, s *server, in map[string]any) (code, errCode string, r response) {
	t.Helper()
	r = gql(t, s, adminToken, `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { voucher { code } error { code message field } } }`,
		map[string]any{"in": in})
	return str(path(r.Body, "data", "createVoucher", "voucher", "code")), str(path(r.Body, "data", "createVoucher", "error", "code")), r
}

func voucherInput(code string, flash bool) map[string]any {
	return map[string]any{
		"code": code, "discountAmount": 1000, "totalLimit": 10, "perUserLimit": 1, "flash": flash,
		"startsAt": time.Now().Add(-time.Hour).Format(time.RFC3339), "endsAt": time.Now().Add(24 * time.Hour).Format(time.RFC3339),
	}
}

// casesOfCode runs a rule on a voucher created with a lower-case code, over
// both transports and both kinds, on s.
func codesInAnyCase(t *testing.T, s *server, kafka bool) {
	check := func(t *testing.T, api checkoutAPI, flash bool) {
		lower := strings.ToLower(uniqueCode("winter"))
		stored := strings.ToUpper(lower)
		mixed := strings.ToUpper(lower[:1]) + lower[1:]
		got, errCode, r := createRaw(t, s, voucherInput(lower, flash))
		if got != stored || errCode != "" {
			t.Fatalf("createVoucher(%s) = %q %q, want the code stored as %s: %s", lower, got, errCode, stored, r.Raw)
		}
		for _, variant := range []string{stored, mixed, lower} {
			if _, errCode, r := createRaw(t, s, voucherInput(variant, flash)); errCode != "VOUCHER_EXISTS" {
				t.Errorf("createVoucher(%s) after %s = %q, want VOUCHER_EXISTS: %s", variant, stored, errCode, r.Raw)
			}
		}
		var row string
		if err := s.db.QueryRow(context.Background(), `SELECT code FROM voucher WHERE upper(code) = $1`, stored).Scan(&row); err != nil || row != stored {
			t.Fatalf("the database holds %q (%v), want %s", row, err, stored)
		}

		order := uniqueOrder()
		res := api.reserve(t, mixed, 7, order, 5000)
		// UNAVAILABLE is the contract's "retry with the same orderId" (a
		// fresh flash gate on a loaded machine): retried as a client does.
		for deadline := time.Now().Add(10 * time.Second); res.Error == "UNAVAILABLE" && time.Now().Before(deadline); {
			time.Sleep(200 * time.Millisecond)
			res = api.reserve(t, mixed, 7, order, 5000)
		}
		if res.Error != "" || str(res.Reservation["voucherCode"]) != stored && api.name() == "graphql" {
			t.Fatalf("reserve(%s) = %q %v, want a reservation of %s", mixed, res.Error, res.Reservation, stored)
		}
		// The same order under another spelling of the code is the same
		// reserve: its retry, not an ORDER_CONFLICT, and no second use.
		if retry := api.reserve(t, lower, 7, order, 5000); retry.Error != "" || str(retry.Reservation["createdAt"]) != str(res.Reservation["createdAt"]) {
			t.Errorf("retry under %s = %q %v, want the reservation unchanged", lower, retry.Error, retry.Reservation)
		}
		if kafka {
			waitCounters(t, s, stored, 1, 1, 0)
		} else if st := readVoucher(t, s, lower); st.Used != 1 {
			t.Errorf("voucher(%s).usedCount = %d after a reserve and a retry, want 1", lower, st.Used)
		}
		if c := api.confirm(t, lower, order); c.Error != "" || c.status() != "CONFIRMED" {
			t.Errorf("confirm(%s) = %q %q", lower, c.Error, c.status())
		}
		other := uniqueOrder()
		if r := api.reserve(t, stored, 8, other, 5000); r.Error != "" {
			t.Fatalf("reserve(%s) = %q", stored, r.Error)
		}
		if rel := api.release(t, mixed, other); rel.Error != "" || rel.status() != "RELEASED" {
			t.Errorf("release(%s) = %q %q", mixed, rel.Error, rel.status())
		}
		if kafka {
			// The counters pass through (1, 0, 1) before the other order's
			// reserved event is applied: wait for both orders' last events.
			waitStatus(t, s, order, "CONFIRMED")
			waitStatus(t, s, other, "RELEASED")
			waitCounters(t, s, stored, 1, 0, 1)
		}
		if st := readVoucher(t, s, mixed); st.Used != 1 || st.Confirmed != 1 {
			t.Errorf("voucher(%s) after confirm and release = %+v", mixed, st)
		}
		if r := gql(t, s, storefrontToken, `query($c: String!) { voucher(code: $c) { code } }`, map[string]any{"c": lower}); str(path(r.Body, "data", "voucher", "code")) != stored {
			t.Errorf("voucher(%s) = %s, want the stored code %s", lower, r.Raw, stored)
		}
		var gateKeys int64
		if flash {
			gateKeys = redisKeys(t, "*{"+lower+"}*")
		}
		if gateKeys != 0 {
			t.Errorf("the gate holds %d key(s) under the lower-case code; keys use the stored form", gateKeys)
		}
	}
	if kafka {
		kafkaEach(t, s, func(t *testing.T, api checkoutAPI) { check(t, api, true) })
		return
	}
	each(t, s, check)
}

func TestCodes_AnyCaseFindsTheVoucherOnEveryRoute(t *testing.T) {
	codesInAnyCase(t, sharedServer(t), false)
}

func TestCodes_AnyCaseFindsTheVoucherOnEveryRouteInKafkaMode(t *testing.T) {
	t.Parallel()
	codesInAnyCase(t, kafkaServer(t, nil), true)
}

// redisKeys counts the keys of the test Redis matching pattern.
func redisKeys(t testing.TB, pattern string) int64 {
	t.Helper()
	rdb := redis.NewClient(mustRedisOptions(t))
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), strings.NewReplacer("{", `\{`, "}", `\}`).Replace(pattern)).Result()
	if err != nil {
		t.Fatalf("redis keys: %v", err)
	}
	return int64(len(keys))
}
