package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"voucherd/internal/events"
	"voucherd/internal/gate"
	"voucherd/internal/testredis"
	"voucherd/internal/voucher"
)

// TestKafka_ARecoveryMarkerReloadsTheGateOnlyForItsOwnIncident: a recovery
// marker names the Redis server that served the voucher when it was asked
// for (its incident). Reached after another restart or failover, it
// reloads nothing: the events behind it were decided on a gate its reload
// would not hold (answered successes then lost to a gate rebuilt without
// them), and the new incident's own markers come after them. A marker of
// the serving server reloads the gate. Before, any marker reloaded an
// unhealthy gate, whatever had made it so (issue 30, item 8: "recovery
// markers are not tied to the incident that caused them").
func TestKafka_ARecoveryMarkerReloadsTheGateOnlyForItsOwnIncident(t *testing.T) {
	t.Parallel()
	_, brokers := testBroker(t)
	rs := testredis.Start(t)
	// A Redis of its own needs a database of its own (ownDatabase): on the
	// shared one its warm-up would publish a marker for every other test's
	// flash voucher, the consumer reload each into this Redis, and the
	// lag waited on below count them.
	dbURL, _ := ownDatabase(t)
	s := kafkaServer(t, map[string]string{
		"KAFKA_BROKERS": brokers, "REDIS_URL": rs.URL, "DATABASE_URL": dbURL,
		"WARMUP_INTERVAL": "1h", "RECONCILE_INTERVAL": "1h",
	})
	api := restAPI{s}
	code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 5}))
	if r := api.reserve(t, code, 1, uniqueOrder(), 100); r.Error != "" {
		t.Fatalf("reserve: %s", r.Error)
	}
	waitCounters(t, s, code, 1, 1, 0)

	rdb, err := gate.NewClient(rs.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	g := gate.New(rdb)
	ctx := context.Background()
	_, server, err := g.Healthy(ctx, code)
	if err != nil || server == "" {
		t.Fatalf("the serving server: %q %v", server, err)
	}
	const stale = "0123456789abcdef0123456789abcdef01234567" // a server that serves it no more
	marker := func(incident string) {
		ev := voucher.Event{ID: "recover:" + code + ":" + uniqueOrder(), Kind: voucher.EventRecover, Code: code, Incident: incident, DecidedAt: time.Now()}
		value, err := events.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		produce(t, brokers, &kgo.Record{Topic: events.DefaultTopic, Key: []byte(code), Value: value})
		waitApplied(t, brokers)
	}
	// serversMarkers counts the markers the server itself published for the
	// voucher (a request's or the warm-up's, which may still be on their
	// way from the first reserve): one of those reloading the gate says
	// nothing of the stale marker, and the attempt is made again.
	serversMarkers := func() int {
		n := 0
		for _, rec := range topicRecords(t, brokers, events.DefaultTopic) {
			ev, err := events.Decode(rec.Value)
			if err == nil && ev.Kind == voucher.EventRecover && ev.Code == code && ev.Incident != stale {
				n++
			}
		}
		return n
	}
	for attempt := 1; ; attempt++ {
		before := serversMarkers()
		if err := g.Unload(ctx, code); err != nil { // the gate's data lost
			t.Fatal(err)
		}
		marker(stale)
		_, loaded, err := g.Remaining(ctx, code)
		if err != nil {
			t.Fatal(err)
		}
		if !loaded {
			break
		}
		if serversMarkers() == before || attempt == 3 {
			t.Fatalf("after a marker of an earlier incident the gate is loaded (attempt %d); want it left alone", attempt)
		}
	}
	marker(server)
	if n, loaded, err := g.Remaining(ctx, code); err != nil || !loaded || n != 4 {
		t.Fatalf("after a marker of this incident: remaining %d, loaded %v, %v; want 4 from the database", n, loaded, err)
	}
	if r := api.reserve(t, code, 2, uniqueOrder(), 100); r.Error != "" {
		t.Errorf("a reserve on the reloaded gate: %s", r.Error)
	}
}
