package voucher

import "testing"

// unusedGate stands for a gate no call reaches: NewService only keeps it.
type unusedGate struct{ Gate }

// TestNewService_ChoosesTheFlashPathOnce: no gate, no flash path (flash
// vouchers take the database path); a gate alone, the sync path; a gate and
// Kafka, the kafka path, the only one with a consumer's applier.
func TestNewService_ChoosesTheFlashPathOnce(t *testing.T) {
	if s := NewService(Deps{Kafka: &KafkaPath{}}, Config{}); s.flash != nil || s.EventApplier() != nil {
		t.Errorf("without a gate: flash path %T, applier %v; want none", s.flash, s.EventApplier())
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
