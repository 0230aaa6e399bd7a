package voucher

// The consumer's side of the Kafka write path: it exists only in kafka mode.

import (
	"context"
	"errors"
	"slices"
)

// EventApplier writes the events of the Kafka write path to the database,
// asking the gate first (events.StartConsumer runs it).
type EventApplier struct {
	k    *kafkaFlash
	gate applierGate // k's
}

// applierGate is what the consumer asks of the gate itself: which events
// stand, an admission revived or lost, a use the database released given
// back. A recovery marker's reload is the kafka path's (recoverAtMarker).
type applierGate interface {
	ApplyCheck(ctx context.Context, code string, evs []Event, periods [][]GatePeriod) ([]ApplyVerdict, error)
	Settle(ctx context.Context, code string, op SettleOp, o GateOrder, epoch string, discount int64) (SettleAnswer, GateOrder, error)
	Release(ctx context.Context, code, orderID string, discount int64) (bool, error)
}

// eventPeriods are, for the reserved events of one voucher, the periods of
// its period limits holding each one's createdAt (the gate's, which the
// database counts the use in too: recordPeriodUses): a re-admission at a
// reloaded gate (apply_check.lua) counts its use there, or is voided when
// one is full. nil for a voucher without period limits (the usual case:
// the terms come from the instance's cache, no read).
func (a *EventApplier) eventPeriods(ctx context.Context, evs []Event) ([][]GatePeriod, error) {
	if !slices.ContainsFunc(evs, func(ev Event) bool { return ev.Kind == EventReserved }) {
		return nil, nil
	}
	v, err := a.k.meta.get(ctx, evs[0].Code, a.k.store.Voucher)
	if ErrorCodeOf(err) == NotFound {
		return nil, nil
	}
	if err != nil || len(v.PeriodLimits) == 0 {
		return nil, err
	}
	out := make([][]GatePeriod, len(evs))
	for i, ev := range evs {
		if ev.Kind == EventReserved {
			out[i] = v.gatePeriods(ev.CreatedAt, false)
		}
	}
	return out, nil
}

// newEventApplier returns the consumer's side of the kafka path k.
func newEventApplier(k *kafkaFlash) *EventApplier {
	return &EventApplier{k: k, gate: k.gate}
}

// EventApplier is the consumer's applier; nil in sync mode (or without a
// gate), where no event is ever published.
func (s *Service) EventApplier() *EventApplier { return s.applier }

// ApplyEvent writes one event of the Kafka write path to the database (the
// consumer calls it), then lets the gate give back a use the database has
// released. An event is written only if the gate says it stands
// (apply_check.lua); a recovery marker reloads the voucher's gate.
// Errors: *EventRefusedError when the database refuses the event; anything
// else is transient (apply it again).
func (a *EventApplier) ApplyEvent(ctx context.Context, ev Event) error {
	_, err := a.apply(ctx, ev)
	return err
}

// apply is ApplyEvent saying whether the event was written (false: the gate
// said it does not stand, so there was nothing to write).
func (a *EventApplier) apply(ctx context.Context, ev Event) (written bool, err error) {
	k := a.k
	switch ev.Kind {
	case EventRecover:
		return true, k.recoverAtMarker(ctx, ev)
	case EventReserved, EventConfirmed, EventReleased:
		if ev.Kind != EventReserved {
			if err := k.fault(ctx, StepReceived, ev.OrderID); err != nil {
				return false, err
			}
		}
		periods, err := a.eventPeriods(ctx, []Event{ev})
		if err != nil {
			return false, err
		}
		verdicts, err := a.gate.ApplyCheck(ctx, ev.Code, []Event{ev}, periods)
		if err != nil {
			return false, err
		}
		switch verdicts[0] {
		case ApplySkip:
			// A reserved event whose admission was voided or adopted, or a
			// decision the gate took the other way (the event written
			// after a reload's marker, never answered): nothing to write.
			k.logger.InfoContext(ctx, "event skipped: the gate says it does not stand", "kind", ev.Kind, "code", ev.Code, "order", ev.OrderID)
			return false, nil
		case ApplyUnchecked:
			k.requestRecovery(ev.Code)
		}
		if err := k.fault(ctx, StepApply, ev.OrderID); err != nil {
			return false, err
		}
	}
	k.obs.DatabaseWrite(writeOp(ev.Kind))
	status, err := k.events.ApplyEvent(ctx, ev)
	if err != nil {
		return false, err
	}
	if ev.Kind == EventReleased && status == StatusReleased {
		if _, err := a.gate.Release(ctx, ev.Code, ev.OrderID, ev.DiscountAmount); err != nil {
			// Undersell for a while: the gate holds the order as releasing,
			// and reconciliation gives back a releasing use the database has
			// released (kafkaFlash.reconcileOrders).
			k.logger.WarnContext(ctx, "released use not given back to the gate; reconciliation will", "code", ev.Code, "order", ev.OrderID, "err", err)
		}
	}
	return true, nil
}

// ApplyAgain is an operator applying a dead-lettered event again, through
// the consumer's own path (apply), so the gate and the database keep their
// rules: a reserved event's admission, lost when the database refused it,
// is first made live again at the gate (admission.lua revive: its use was
// kept, none is taken), then the gate's check and the database's
// conditional, idempotent write decide as for any event. refusal says why
// it was not written (the database refused it again, the gate says it does
// not stand, or the payload cannot be read); a refused reserved event is
// marked lost again. An error is transient: nothing was decided.
func (a *EventApplier) ApplyAgain(ctx context.Context, payload []byte) (refusal string, err error) {
	k := a.k
	if k.decode == nil {
		return "", Errorf(Unavailable, "this server cannot read events")
	}
	ev, err := k.decode(payload)
	if err != nil {
		return "the event cannot be read: " + err.Error(), nil
	}
	o := GateOrder{OrderID: ev.OrderID, CustomerID: ev.CustomerID, OrderAmount: ev.OrderAmount, CreatedAt: ev.CreatedAt, ExpiresAt: ev.ExpiresAt}
	if ev.Kind == EventReserved {
		// FAIL (not lost: voided, adopted, or reloaded without it) and
		// STALE leave the verdict to apply_check.lua, as for the consumer.
		if _, _, err := a.gate.Settle(ctx, ev.Code, SettleRevive, o, ev.Epoch, ev.DiscountAmount); err != nil {
			return "", unavailable(err)
		}
	}
	written, err := a.apply(ctx, ev)
	var refused *EventRefusedError
	switch {
	case errors.As(err, &refused):
		if ev.Kind == EventReserved {
			if _, _, err := a.gate.Settle(ctx, ev.Code, SettleLose, o, ev.Epoch, ev.DiscountAmount); err != nil {
				k.logger.ErrorContext(ctx, "dead-lettered admission not marked lost again at the gate", "code", ev.Code, "order", ev.OrderID, "err", err)
			}
		}
		return refused.Reason, nil
	case err != nil:
		return "", unavailable(err)
	case !written && ev.Kind == EventReserved:
		return "the gate voided or re-issued this order's admission: it was never answered as a success, so there is nothing to write", nil
	case !written:
		return "the gate decided this order the other way: this " + string(ev.Kind) + " was never answered as a success, so there is nothing to write", nil
	}
	return "", nil
}

// ApplyReservedBatch applies reserved events of one voucher in one
// transaction (the consumer's batch); see EventStore.ApplyReservedBatch.
// The gate is asked first which of them stand; a skipped one counts as
// applied (there is nothing to write).
func (a *EventApplier) ApplyReservedBatch(ctx context.Context, evs []Event) ([]bool, error) {
	k := a.k
	applied := make([]bool, len(evs))
	if len(evs) == 0 {
		return applied, nil
	}
	periods, err := a.eventPeriods(ctx, evs)
	if err != nil {
		return nil, err
	}
	verdicts, err := a.gate.ApplyCheck(ctx, evs[0].Code, evs, periods)
	if err != nil {
		return nil, err
	}
	var standing []Event
	var at []int
	for i, v := range verdicts {
		switch v {
		case ApplySkip:
			applied[i] = true
			k.logger.InfoContext(ctx, "reserved event skipped: the gate voided or re-issued its admission", "code", evs[i].Code, "order", evs[i].OrderID)
			continue
		case ApplyUnchecked:
			if i == 0 {
				k.requestRecovery(evs[0].Code)
			}
		}
		standing = append(standing, evs[i])
		at = append(at, i)
	}
	if len(standing) == 0 {
		return applied, nil
	}
	if err := k.fault(ctx, StepApply, standing[0].OrderID); err != nil {
		return nil, err
	}
	written, err := k.events.ApplyReservedBatch(ctx, standing)
	if err != nil {
		return nil, err
	}
	for j, ok := range written {
		applied[at[j]] = ok
		if ok {
			k.obs.DatabaseWrite("reserve")
		}
	}
	return applied, nil
}

// writeOp names an event's database write as the other paths do.
func writeOp(k EventKind) string {
	switch k {
	case EventReserved:
		return "reserve"
	case EventConfirmed:
		return "confirm"
	}
	return "release"
}

// SaveDeadLetter keeps an event the consumer could not apply. A refused
// reserved event marks its admission lost at the gate: its use stays taken
// (the gate was too high if the database refused it), so neither a retry nor
// reconciliation hands that use out again, and reconciliation keeps alerting.
func (a *EventApplier) SaveDeadLetter(ctx context.Context, dl DeadLetter) error {
	k := a.k
	if err := k.events.SaveDeadLetter(ctx, dl); err != nil {
		return err
	}
	if ev := dl.Event; ev != nil && ev.Kind == EventReserved {
		o := GateOrder{OrderID: ev.OrderID, CustomerID: ev.CustomerID, OrderAmount: ev.OrderAmount, CreatedAt: ev.CreatedAt, ExpiresAt: ev.ExpiresAt}
		if _, _, err := a.gate.Settle(ctx, ev.Code, SettleLose, o, ev.Epoch, ev.DiscountAmount); err != nil {
			k.logger.ErrorContext(ctx, "dead-lettered admission not marked lost at the gate", "code", ev.Code, "order", ev.OrderID, "err", err)
		}
	}
	return nil
}

// DeadLetters lists the latest events the database refused, newest first;
// none in sync mode. Errors: FORBIDDEN.
func (s *Service) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	if err := authorize(ctx, OpOperate); err != nil {
		return nil, err
	}
	return s.flash.deadLetters(ctx, limit)
}
