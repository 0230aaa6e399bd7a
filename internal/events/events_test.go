package events_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"voucherd/internal/events"
	"voucherd/internal/voucher"
)

func event(kind voucher.EventKind, order, code string) voucher.Event {
	at := time.UnixMilli(time.Now().UnixMilli())
	return voucher.NewEvent(kind, voucher.Reservation{
		OrderID: order, VoucherCode: code, CustomerID: 42, OrderAmount: 25000, DiscountAmount: 1000,
		CreatedAt: at, ExpiresAt: at.Add(15 * time.Minute), Position: 317,
	}, at.Add(time.Second))
}

func TestCodec_RoundTripsEveryField(t *testing.T) {
	t.Parallel()
	for _, kind := range []voucher.EventKind{voucher.EventReserved, voucher.EventConfirmed, voucher.EventReleased} {
		want := event(kind, "o-1", "SPRING")
		b, err := events.Encode(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := events.Decode(b)
		if err != nil {
			t.Fatalf("Decode(%s): %v", b, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", kind, diff)
		}
		if want.ID != "o-1:"+string(kind) {
			t.Errorf("event id = %q, want orderId:kind", want.ID)
		}
	}
}

func TestCodec_RefusesWhatTheServiceCouldNotHaveSent(t *testing.T) {
	t.Parallel()
	ok := event(voucher.EventReserved, "o-1", "SPRING")
	tests := []struct {
		desc   string
		change func(e *voucher.Event)
		raw    string
	}{
		{desc: "not JSON", raw: "not an event"},
		{desc: "an unknown kind", change: func(e *voucher.Event) { e.Kind = "expired" }},
		{desc: "a bad code", change: func(e *voucher.Event) { e.Code = "bad code" }},
		{desc: "no orderId", change: func(e *voucher.Event) { e.OrderID = "" }},
		{desc: "no event id", change: func(e *voucher.Event) { e.ID = "" }},
		{desc: "a zero customer", change: func(e *voucher.Event) { e.CustomerID = 0 }},
		{desc: "a negative discount (0 is one: 1 % of 99)", change: func(e *voucher.Event) { e.DiscountAmount = -1 }},
		{desc: "expiresAt before createdAt", change: func(e *voucher.Event) { e.ExpiresAt = e.CreatedAt }},
		{desc: "a negative position", change: func(e *voucher.Event) { e.Position = -1 }},
	}
	for _, tt := range tests {
		b := []byte(tt.raw)
		if tt.change != nil {
			e := ok
			tt.change(&e)
			b, _ = events.Encode(e)
		}
		if _, err := events.Decode(b); err == nil {
			t.Errorf("%s: Decode accepted %s", tt.desc, b)
		}
	}
}

// applier records what the consumer applies, refusing the events it is told to.
type applier struct {
	mu      sync.Mutex
	applied []voucher.Event
	dead    []voucher.DeadLetter
	refuse  map[string]bool // event ids
	fail    int             // transient failures before the next success
	batches int             // ApplyReservedBatch calls
	single  int             // ApplyEvent calls
}

func (a *applier) ApplyEvent(_ context.Context, ev voucher.Event) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.single++
	if a.fail > 0 {
		a.fail--
		return errors.New("database briefly down")
	}
	if a.refuse[ev.ID] {
		return &voucher.EventRefusedError{Reason: "CHECK voucher_used_within_limit"}
	}
	a.applied = append(a.applied, ev)
	return nil
}

// ApplyReservedBatch applies the whole run, or nothing when any event of it
// is to be refused or a failure is pending, as the store does.
func (a *applier) ApplyReservedBatch(_ context.Context, evs []voucher.Event) ([]bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.batches++
	if a.fail > 0 {
		a.fail--
		return nil, errors.New("database briefly down")
	}
	for _, ev := range evs {
		if a.refuse[ev.ID] {
			return nil, &voucher.EventRefusedError{Reason: "CHECK voucher_used_within_limit"}
		}
	}
	a.applied = append(a.applied, evs...)
	applied := make([]bool, len(evs))
	for i := range applied {
		applied[i] = true
	}
	return applied, nil
}

func (a *applier) SaveDeadLetter(_ context.Context, dl voucher.DeadLetter) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dead = append(a.dead, dl)
	return nil
}

func (a *applier) snapshot() ([]voucher.Event, []voucher.DeadLetter) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]voucher.Event(nil), a.applied...), append([]voucher.DeadLetter(nil), a.dead...)
}

func cluster(t *testing.T) events.Config {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := events.Config{Brokers: c.ListenAddrs(), Partitions: 4}
	if err := events.EnsureTopics(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if err := events.EnsureTopics(context.Background(), cfg); err != nil {
		t.Fatalf("EnsureTopics a second time: %v", err)
	}
	return cfg
}

func producer(t *testing.T, cfg events.Config) *events.Producer {
	t.Helper()
	p, err := events.NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

func publish(t *testing.T, p *events.Producer, evs ...voucher.Event) {
	t.Helper()
	for _, ev := range evs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := p.Publish(ctx, ev)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
}

func settle(t *testing.T, cfg events.Config, p *events.Producer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := events.NewOffsets(cfg, p.Client()).Settle(ctx); err != nil {
		t.Fatalf("Settle: %v", err)
	}
}

func TestConsumer_AppliesEachVouchersEventsInOrderAndSettleWaitsForThem(t *testing.T) {
	t.Parallel()
	cfg := cluster(t)
	p := producer(t, cfg)
	a := &applier{fail: 3}
	c, err := events.StartConsumer(context.Background(), cfg, a, p.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()

	var want []voucher.Event
	for i := 0; i < 20; i++ {
		code := fmt.Sprintf("V%d", i%3)
		order := fmt.Sprintf("o-%d", i)
		evs := []voucher.Event{event(voucher.EventReserved, order, code), event(voucher.EventConfirmed, order, code)}
		publish(t, p, evs...)
		want = append(want, evs...)
	}
	settle(t, cfg, p) // returns only once every event is applied and committed
	applied, dead := a.snapshot()
	if len(applied) != len(want) || len(dead) != 0 {
		t.Fatalf("applied %d events and %d dead letters after Settle; want %d and 0", len(applied), len(dead), len(want))
	}
	// Per voucher, the order they were published in.
	perVoucher := func(evs []voucher.Event) map[string][]string {
		m := map[string][]string{}
		for _, e := range evs {
			m[e.Code] = append(m[e.Code], e.ID)
		}
		return m
	}
	if diff := cmp.Diff(perVoucher(want), perVoucher(applied)); diff != "" {
		t.Errorf("per-voucher order (-published +applied):\n%s", diff)
	}
}

func TestConsumer_DeadLettersARefusedEventAndGoesOn(t *testing.T) {
	t.Parallel()
	cfg := cluster(t)
	p := producer(t, cfg)
	bad := event(voucher.EventReserved, "o-bad", "V")
	a := &applier{refuse: map[string]bool{bad.ID: true}}
	c, err := events.StartConsumer(context.Background(), cfg, a, p.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	publish(t, p, event(voucher.EventReserved, "o-1", "V"), bad, event(voucher.EventReserved, "o-2", "V"))
	settle(t, cfg, p)

	applied, dead := a.snapshot()
	if len(applied) != 2 || len(dead) != 1 {
		t.Fatalf("applied %d, dead letters %d; want 2 and 1", len(applied), len(dead))
	}
	if d := dead[0]; d.EventID != bad.ID || d.OrderID != "o-bad" || d.Kind != "reserved" || d.Reason == "" || d.Topic != events.DefaultTopic {
		t.Errorf("dead letter = %+v", d)
	}
	// And on the dead-letter topic, with the reason.
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ConsumeTopics(events.DefaultDeadLetterTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs := cl.PollFetches(ctx).Records()
	if len(recs) != 1 {
		t.Fatalf("dead-letter topic: %d records, want 1", len(recs))
	}
	reason := ""
	for _, h := range recs[0].Headers {
		if h.Key == "reason" {
			reason = string(h.Value)
		}
	}
	if reason != "CHECK voucher_used_within_limit" || string(recs[0].Key) != "V" {
		t.Errorf("dead-letter record: key %q, reason %q", recs[0].Key, reason)
	}
}

// A backlog of one voucher's reserved events (a sale's winners) is applied
// in a few batches, in order. (A batch with an event the database refuses:
// TestConsumer_DeadLettersARefusedEventAndGoesOn.)
func TestConsumer_AppliesABacklogOfReservedEventsInBatches(t *testing.T) {
	t.Parallel()
	cfg := cluster(t)
	p := producer(t, cfg)
	var want []string
	var evs []voucher.Event
	for i := range 300 {
		ev := event(voucher.EventReserved, fmt.Sprintf("o-%03d", i), "SALE")
		evs = append(evs, ev)
		want = append(want, ev.ID)
	}
	publish(t, p, evs...) // before the consumer starts: a backlog
	a := &applier{}
	c, err := events.StartConsumer(context.Background(), cfg, a, p.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	settle(t, cfg, p)

	applied, dead := a.snapshot()
	var got []string
	for _, ev := range applied {
		got = append(got, ev.ID)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("applied (-want +got):\n%s", diff)
	}
	if len(dead) != 0 {
		t.Fatalf("dead letters %+v, want none", dead)
	}
	a.mu.Lock()
	batches, single := a.batches, a.single
	a.mu.Unlock()
	if batches == 0 || batches > 30 || single > 30 {
		t.Fatalf("300 reserved events: %d batches and %d alone; want a few batches (one event a transaction would be 300)", batches, single)
	}
	t.Logf("300 reserved events applied in %d batches", batches)
}

func TestConsumer_AnotherMemberOfTheGroupStartsAfterTheCommittedOffsets(t *testing.T) {
	t.Parallel()
	cfg := cluster(t)
	p := producer(t, cfg)
	first := &applier{}
	c, err := events.StartConsumer(context.Background(), cfg, first, p.Client())
	if err != nil {
		t.Fatal(err)
	}
	publish(t, p, event(voucher.EventReserved, "o-1", "V"), event(voucher.EventReserved, "o-2", "W"))
	settle(t, cfg, p)
	c.Stop()

	second := &applier{}
	c, err = events.StartConsumer(context.Background(), cfg, second, p.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	publish(t, p, event(voucher.EventReleased, "o-1", "V"))
	settle(t, cfg, p)
	applied, _ := second.snapshot()
	if len(applied) != 1 || applied[0].ID != "o-1:released" {
		t.Errorf("the second member applied %v; want only the event after the commit", applied)
	}
	lag, err := events.NewOffsets(cfg, p.Client()).Lag(context.Background())
	if err != nil || lag != 0 {
		t.Errorf("Lag = %d, %v; want 0", lag, err)
	}
}

func TestSettle_WaitsForAStoppedConsumerUntilItsContextEnds(t *testing.T) {
	t.Parallel()
	cfg := cluster(t)
	p := producer(t, cfg)
	publish(t, p, event(voucher.EventReserved, "o-1", "V"))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := events.NewOffsets(cfg, p.Client()).Settle(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Settle with no consumer = %v, want the context's deadline", err)
	}
	if lag, err := events.NewOffsets(cfg, p.Client()).Lag(context.Background()); err != nil || lag != 1 {
		t.Errorf("Lag with no consumer = %d, %v; want 1", lag, err)
	}
}

func TestPublish_ToAnUnreachableBrokerSurelyFails(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	cfg := events.Config{Brokers: c.ListenAddrs(), PublishTimeout: 500 * time.Millisecond}
	p := producer(t, cfg)
	c.Close() // before the producer ever connected: nothing can be written
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err = p.Publish(ctx, event(voucher.EventReserved, "o-1", "V"))
	if err == nil || errors.Is(err, voucher.ErrPublishUnknown) {
		t.Errorf("Publish = %v, want a sure failure (not ErrPublishUnknown)", err)
	}
}
