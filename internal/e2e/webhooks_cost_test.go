package e2e

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"
)

// TestWebhooksCost_ASaleWithAndWithoutTheOutbox times the same sale on one
// server, rounds interleaved so the machine's load falls on each alike:
// the outbox's triggers off (as before webhooks), on with no endpoint, and
// on with an endpoint of every event whose receiver is delivered to during
// the sale. A measurement, not a rule (the shared machine is too noisy for
// a timed assertion): WEBHOOK_COST=1 runs it; docs/webhooks.md has the
// figures.
func TestWebhooksCost_ASaleWithAndWithoutTheOutbox(t *testing.T) {
	if os.Getenv("WEBHOOK_COST") == "" {
		t.Skip("a measurement: WEBHOOK_COST=1 runs it")
	}
	dbURL, db := ownDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL})
	rcv := newReceiver(t)
	triggers := func(on bool) {
		verb := "DISABLE"
		if on {
			verb = "ENABLE"
		}
		for _, q := range []string{
			`ALTER TABLE reservation_event ` + verb + ` TRIGGER webhook_reservation_events`,
			`ALTER TABLE voucher ` + verb + ` TRIGGER webhook_voucher_sold_out`,
		} {
			if _, err := db.Exec(context.Background(), q); err != nil {
				t.Fatal(err)
			}
		}
	}
	const rounds = 4
	for _, flash := range []bool{false, true} {
		times := map[string][]time.Duration{}
		for range rounds {
			for _, variant := range []string{"no outbox", "outbox, no endpoint", "outbox, endpoint of every event"} {
				triggers(variant != "no outbox")
				var endpoint string
				if variant == "outbox, endpoint of every event" {
					endpoint, _ = createEndpoint(t, s, rcv.URL, "*")
				}
				code := createVoucher(t, s, voucherSpec{TotalLimit: 1000, Flash: flash})
				start := time.Now()
				counts, _ := sale(t, restAPI{s}, code, 1, 1000, 32)
				times[variant] = append(times[variant], time.Since(start))
				if counts[""] != 1000 {
					t.Fatalf("%s: %v", variant, counts)
				}
				if endpoint != "" {
					gql(t, s, adminToken, `mutation($id: ID!) { deleteWebhookEndpoint(id: $id) { endpoint { id } } }`, map[string]any{"id": endpoint})
				}
			}
		}
		for _, variant := range []string{"no outbox", "outbox, no endpoint", "outbox, endpoint of every event"} {
			d := times[variant]
			slices.Sort(d)
			t.Logf("flash=%t, %s: 1,000 reserves by 32 clients, median of %d %s (%v)", flash, variant, rounds, ((d[len(d)/2-1] + d[len(d)/2]) / 2).Round(time.Millisecond), d)
		}
	}
	triggers(true)
}
