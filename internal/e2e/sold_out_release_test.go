package e2e

import (
	"fmt"
	"testing"
)

// TestFlash_AReleasedUseSellsAgainAtOnceOnEveryInstance: with sold-out
// snapshots that would answer from memory for a minute (SOLD_OUT_TTL), a
// release makes the voucher sellable at once on the instance that released
// it, for another customer and for the customer who released, and within
// moments on another instance (the release is announced over Redis). On both
// write paths.
func TestFlash_AReleasedUseSellsAgainAtOnceOnEveryInstance(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sync", "kafka"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"SOLD_OUT_TTL": "1m"}
			start := startServer
			if mode == "kafka" {
				_, brokers := testBroker(t)
				env["KAFKA_BROKERS"] = brokers
				start = kafkaServer
			}
			a, b := restAPI{start(t, env)}, restAPI{start(t, env)}
			code := createVoucher(t, a.s, flash(voucherSpec{TotalLimit: 2}))
			first, second := uniqueOrder(), uniqueOrder()
			for i, o := range []string{first, second} {
				if r := a.reserve(t, code, int64(1+i), o, 100); r.Error != "" {
					t.Fatalf("reserve %d: %s", i, r.Error)
				}
			}
			// Both instances hold a sold-out snapshot now.
			if r := a.reserve(t, code, 10, uniqueOrder(), 100); r.Error != "OUT_OF_STOCK" {
				t.Fatalf("sold out on A: %q", r.Error)
			}
			if r := b.reserve(t, code, 11, uniqueOrder(), 100); r.Error != "OUT_OF_STOCK" {
				t.Fatalf("sold out on B: %q", r.Error)
			}

			if r := a.release(t, code, first); r.Error != "" {
				t.Fatalf("release: %s", r.Error)
			}
			// At once on A, and for the customer who released too.
			if r := a.reserve(t, code, 1, uniqueOrder(), 100); r.Error != "" {
				t.Errorf("the customer who released, right after the release on the same instance: %q", r.Error)
			}

			if r := a.release(t, code, second); r.Error != "" {
				t.Fatalf("release: %s", r.Error)
			}
			// B's snapshot would answer OUT_OF_STOCK for a minute: only the
			// announcement makes it ask the gate again.
			order := uniqueOrder()
			eventually(t, "the released use sold on the other instance", func() (bool, string) {
				r := b.reserve(t, code, 12, order, 100)
				return r.Error == "", fmt.Sprint(r.Error)
			})
		})
	}
}
