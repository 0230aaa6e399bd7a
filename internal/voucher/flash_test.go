package voucher

import (
	"context"
	"errors"
	"testing"
	"time"
)

// unusedGate stands for a gate no call reaches: NewService only keeps it.
type unusedGate struct{ Gate }

// TestNewService_ChoosesTheFlashPathOnce: no gate, the database alone
// (flash vouchers take the database path); a gate alone, the sync path; a gate and
// Kafka, the kafka path, the only one with a consumer's applier.
func TestNewService_ChoosesTheFlashPathOnce(t *testing.T) {
	if s := NewService(Deps{Kafka: &KafkaPath{}}, Config{}); s.flash != (databaseOnly{s: s}) || s.EventApplier() != nil {
		t.Errorf("without a gate: flash path %T, applier %v; want the database alone and no applier", s.flash, s.EventApplier())
	}
	s := NewService(Deps{Gate: unusedGate{}}, Config{})
	if _, ok := s.flash.(*syncFlash); !ok || s.EventApplier() != nil {
		t.Errorf("a gate alone: flash path %T, applier %v; want the sync path and no applier", s.flash, s.EventApplier())
	}
	s = NewService(Deps{Gate: unusedGate{}, Kafka: &KafkaPath{}}, Config{})
	k, ok := s.flash.(*kafkaFlash)
	if !ok || s.EventApplier() == nil {
		t.Fatalf("a gate and Kafka: flash path %T, applier %v; want the kafka path and an applier", s.flash, s.EventApplier())
	}
	if k.publishTimeout <= 0 || k.lease <= k.publishTimeout {
		t.Errorf("kafka path defaults: publish timeout %v, lease %v", k.publishTimeout, k.lease)
	}
}

// A wait for an order's write returns when the write ends, at once for an
// order not in flight, and with the context's error when it gives up first;
// a second begin of an order in flight does not end the first's mark.
func TestWritesInFlight_WaitEndsWithTheWriteOrTheContext(t *testing.T) {
	w := newWritesInFlight()
	if err := w.wait(context.Background(), "o1"); err != nil {
		t.Fatalf("wait for an order not in flight: %v", err)
	}
	end := w.begin("o1")
	w.begin("o1")() // the second mark's end: o1 is still in flight
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := w.wait(short, "o1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait while o1 is written: %v, want the deadline", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- w.wait(context.Background(), "o1") }()
	select {
	case err := <-waited:
		t.Fatalf("wait returned %v before the write ended", err)
	case <-time.After(20 * time.Millisecond):
	}
	end()
	if err := <-waited; err != nil {
		t.Fatalf("wait after the write ended: %v", err)
	}
	if err := w.wait(context.Background(), "o1"); err != nil || len(w.orders) != 0 {
		t.Fatalf("after the end: %v, %d orders in flight", err, len(w.orders))
	}
}
