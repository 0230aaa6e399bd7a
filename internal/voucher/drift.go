package voucher

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// DriftReport is one reconciliation of a flash voucher's gate against the
// database.
type DriftReport struct {
	VoucherCode       string
	DatabaseRemaining int  // totalLimit - usedCount in the database
	GateRemaining     *int // nil when the gate holds nothing for the voucher
	// InFlight counts orders the gate admitted that the database does not
	// hold yet (a write on its way, or leaked if it stays).
	InFlight int
	// Drift is GateRemaining minus what the database allows once in-flight
	// orders are counted: positive means the gate could admit more than the
	// database would take (it is lowered at once), negative means it sells
	// too few (an operator rebuilds it).
	Drift             int
	OrdersOnlyInGate  []string
	OrdersOnlyInStore []string
	Repaired          string // what the pass changed, for people
	Alert             bool   // the drift persisted past one interval
	CheckedAt         time.Time
}

// DriftStore keeps reconciliation results.
type DriftStore interface {
	SaveDriftReport(ctx context.Context, d DriftReport) (DriftReport, error)
	// LatestDriftReports returns the latest report of every flash voucher.
	LatestDriftReports(ctx context.Context) ([]DriftReport, error)
	// LatestDriftReport: NOT_FOUND when the voucher was never reconciled.
	LatestDriftReport(ctx context.Context, code string) (DriftReport, error)
}

// DriftReports returns the latest reconciliation of every flash voucher.
// Errors: FORBIDDEN.
func (s *Service) DriftReports(ctx context.Context) ([]DriftReport, error) {
	if err := authorize(ctx, OpOperate); err != nil {
		return nil, err
	}
	return s.drift.LatestDriftReports(ctx)
}

// Reconcile compares the gate of every flash voucher with the database,
// repairs what is safe to repair and stores a report per voucher.
// Errors: FORBIDDEN, UNAVAILABLE.
func (s *Service) Reconcile(ctx context.Context) ([]DriftReport, error) {
	if err := authorize(ctx, OpOperate); err != nil {
		return nil, err
	}
	if s.gate == nil {
		return nil, nil
	}
	vouchers, err := s.store.FlashVouchers(ctx)
	if err != nil {
		return nil, err
	}
	var reports []DriftReport
	for _, v := range vouchers {
		d, err := s.reconcileVoucher(ctx, v.Code)
		if err != nil {
			return reports, err
		}
		reports = append(reports, d)
	}
	return reports, nil
}

// reconcileVoucher reads the database first and the gate second, so an order
// admitted in between shows as in flight rather than as drift, and an order
// released in between is recognised by the gate's released mark.
func (s *Service) reconcileVoucher(ctx context.Context, code string) (DriftReport, error) {
	settled := true
	if s.pending != nil {
		// Wait until the writes already on their way have reached the
		// database, so they do not look like leaks.
		if err := s.pending.Settle(ctx); err != nil {
			s.logger.WarnContext(ctx, "reconciling without settled writes", "code", code, "err", err)
			// An order whose event waits in a stuck consumer is not
			// leaked: giving its use back would let the gate sell it
			// twice once the event is applied.
			settled = false
		}
	}
	dbSnap, err := s.store.GateSnapshot(ctx, code)
	if err != nil {
		return DriftReport{}, err
	}
	gateSnap, loaded, err := s.gate.Snapshot(ctx, code)
	if err != nil {
		return DriftReport{}, unavailable(err)
	}
	d := DriftReport{VoucherCode: code, DatabaseRemaining: dbSnap.Remaining, CheckedAt: time.Now()}
	if !loaded {
		// Nothing to compare: the first reserve (or warm-up) loads it from
		// the database.
		return s.drift.SaveDriftReport(ctx, d)
	}
	inStore := make(map[string]bool, len(dbSnap.Orders))
	for _, o := range dbSnap.Orders {
		inStore[o.OrderID] = true
	}
	gateLive, gateReleased := map[string]bool{}, map[string]bool{}
	gateOrders := map[string]GateOrder{}
	lost := 0
	for _, o := range gateSnap.Orders {
		gateOrders[o.OrderID] = o
		switch {
		case o.Void:
			// Given back before it was ever answered: holds nothing.
		case o.Lost:
			lost++ // taken, and never in the database: an undersell, alerted below
		case o.Released:
			gateReleased[o.OrderID] = true
		default:
			gateLive[o.OrderID] = true
		}
	}
	releasedSince := 0
	for id := range inStore {
		switch {
		case gateReleased[id]:
			releasedSince++
		case !gateLive[id]:
			d.OrdersOnlyInStore = append(d.OrdersOnlyInStore, id)
		}
	}
	for id := range gateLive {
		if !inStore[id] {
			d.OrdersOnlyInGate = append(d.OrdersOnlyInGate, id)
		}
	}
	slices.Sort(d.OrdersOnlyInGate)
	slices.Sort(d.OrdersOnlyInStore)
	d.InFlight = len(d.OrdersOnlyInGate)
	gateRemaining := gateSnap.Remaining
	d.GateRemaining = &gateRemaining
	// A lost use is taken at the gate and absent from the database: it
	// shows as negative drift (an undersell), alerted every pass.
	d.Drift = gateRemaining - (dbSnap.Remaining - d.InFlight + releasedSince)

	previous, err := s.drift.LatestDriftReport(ctx, code)
	if err != nil && ErrorCodeOf(err) != NotFound {
		return DriftReport{}, err
	}
	var repairs []string
	if d.Drift > 0 {
		// The gate could admit more than the database allows: lowering it
		// is always safe.
		if n, err := s.gate.Lower(ctx, code, d.Drift); err != nil {
			s.logger.ErrorContext(ctx, "could not lower the gate", "code", code, "err", err)
		} else {
			repairs = append(repairs, fmt.Sprintf("lowered the gate by %d to %d", d.Drift, n))
		}
	}
	// An order the gate admitted that the database still lacks a whole
	// interval later is a leaked use (the process died between the gate and
	// the write): give it back.
	returned := 0
	if s.kafka != nil {
		repairs = append(repairs, s.reconcileKafkaOrders(ctx, code, gateSnap.Epoch, d.OrdersOnlyInGate, gateOrders, previous, settled)...)
		if lost > 0 {
			s.logger.ErrorContext(ctx, "uses lost: the database refused events of admissions the gate holds (dead letters)", "code", code, "lost", lost)
			d.Alert = true
		}
	}
	for _, id := range d.OrdersOnlyInGate {
		if s.kafka != nil || !settled || !slices.Contains(previous.OrdersOnlyInGate, id) {
			continue
		}
		// Forgotten, not released: the order holds no reservation, so a
		// retry of it must be decided afresh.
		if _, err := s.gate.Forget(ctx, code, id); err != nil {
			s.logger.ErrorContext(ctx, "could not return a leaked use", "code", code, "order", id, "err", err)
			continue
		}
		returned++
	}
	if returned > 0 {
		repairs = append(repairs, fmt.Sprintf("returned %d leaked use(s)", returned))
	}
	d.Repaired = joinSentences(repairs)
	d.Alert = d.Alert || (d.Drift != 0 && previous.Drift != 0 && !previous.CheckedAt.IsZero())
	if d.Alert {
		s.logger.ErrorContext(ctx, "gate drift persists past one reconciliation interval",
			"code", code, "drift", d.Drift, "gate_remaining", gateRemaining, "database_remaining", dbSnap.Remaining)
	} else if d.Drift != 0 || len(d.OrdersOnlyInStore) > 0 {
		s.logger.WarnContext(ctx, "gate drift", "code", code, "drift", d.Drift, "only_in_store", len(d.OrdersOnlyInStore))
	}
	s.obs.DriftChecked(d)
	return s.drift.SaveDriftReport(ctx, d)
}

// reconcileKafkaOrders repairs, in kafka mode, the orders the gate holds and
// the database does not once the events in flight are applied: a pending
// admission past its lease is voided (its owner died or never learnt its
// publish's outcome; a late event of it is skipped), and a live one (its
// success was answered) has its events published again from the gate's
// record, so an event the broker lost is made good. One still missing a pass
// later is alerted and logged at ERROR: never given back silently.
func (s *Service) reconcileKafkaOrders(ctx context.Context, code, epoch string, onlyInGate []string, orders map[string]GateOrder, previous DriftReport, settled bool) []string {
	if !settled {
		return nil
	}
	v, err := s.meta.get(ctx, code, s.store.Voucher)
	if err != nil {
		return nil
	}
	voided, republished, missing := 0, 0, 0
	for _, id := range onlyInGate {
		o := orders[id]
		if o.Pending {
			if a, _, err := s.gate.Settle(ctx, code, SettleVoid, o, epoch); err == nil && a == SettleOK {
				voided++
			}
			continue
		}
		if slices.Contains(previous.OrdersOnlyInGate, id) {
			missing++
		}
		res := s.reservationOf(v, o, StatusReserved)
		ev := NewEvent(EventReserved, res, res.CreatedAt)
		ev.Epoch = epoch
		if err := s.publish(ctx, ev); err != nil {
			continue
		}
		if o.Confirmed {
			_ = s.publish(ctx, NewEvent(EventConfirmed, s.reservationOf(v, o, StatusConfirmed), time.Now()))
		}
		republished++
	}
	var out []string
	if voided > 0 {
		out = append(out, fmt.Sprintf("voided %d admission(s) past their lease (never answered as a success)", voided))
	}
	if republished > 0 {
		out = append(out, fmt.Sprintf("published the events of %d answered reservation(s) the database lacks again", republished))
	}
	if missing > 0 {
		s.logger.ErrorContext(ctx, "answered reservations still missing from the database a pass after their events were published again", "code", code, "orders", missing)
	}
	return out
}

// RebuildGate reloads a flash voucher's gate from the database. It raises the
// gate where reconciliation would only lower it, so it is an operator's call.
// Reserves of the voucher are refused with UNAVAILABLE while it runs.
// Errors: FORBIDDEN, NOT_FOUND, UNAVAILABLE.
func (s *Service) RebuildGate(ctx context.Context, code string) error {
	if err := authorize(ctx, OpOperate); err != nil {
		return err
	}
	if err := ValidateCode(code); err != nil {
		return err
	}
	v, err := s.store.Voucher(ctx, code)
	if err != nil {
		return err
	}
	if !v.Flash || s.gate == nil {
		return Errorf(NotFound, "voucher %s has no gate", code)
	}
	s.soldOut.forget(code)
	if err := s.gate.Pause(ctx, code); err != nil {
		return unavailable(err)
	}
	if s.kafka != nil {
		return s.rebuildKafka(ctx, code)
	}
	// Requests that passed the gate before the pause finish their write
	// within the request timeout (in kafka mode: their publish, within the
	// publish timeout, which the grace outlasts).
	select {
	case <-time.After(s.rebuildGrace):
	case <-ctx.Done():
		return unavailable(ctx.Err())
	}
	if s.pending != nil {
		// After the grace, so the events published during it are applied
		// before the snapshot too.
		if err := s.pending.Settle(ctx); err != nil {
			return unavailable(err)
		}
	}
	snap, err := s.gateSnapshot(ctx, code)
	if err != nil {
		return err
	}
	if err := s.gate.Replace(ctx, snap); err != nil {
		return unavailable(err)
	}
	s.logger.InfoContext(ctx, "gate rebuilt from the database", "code", code, "remaining", snap.Remaining)
	return nil
}

// rebuildKafka has the consumer rebuild a paused gate at a marker in the
// voucher's partition, after every event before it, and waits for it: the
// new gate's epoch shows it is done. A retried load with the same epoch
// changes nothing, so a reply lost and sent again cannot overwrite the
// admissions made since.
func (s *Service) rebuildKafka(ctx context.Context, code string) error {
	epoch, err := newEpoch()
	if err != nil {
		return err
	}
	if err := s.publishRecovery(ctx, code, true, epoch); err != nil {
		return unavailable(err)
	}
	for {
		snap, ok, err := s.gate.Snapshot(ctx, code)
		if err == nil && ok && snap.Epoch == epoch {
			s.logger.InfoContext(ctx, "gate rebuilt from the database", "code", code, "remaining", snap.Remaining)
			return nil
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return Errorf(Unavailable, "the rebuild of %s is queued behind the events in flight; it completes without you", code)
		}
	}
}

func joinSentences(parts []string) string {
	out := ""
	for i, p := range parts {
		if i > 0 {
			out += "; "
		}
		out += p
	}
	return out
}
