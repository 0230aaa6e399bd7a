package voucher

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	// too few (rebuilt from the database when it persists past one pass).
	Drift             int
	OrdersOnlyInGate  []string
	OrdersOnlyInStore []string
	Repaired          string // what the pass changed, for people
	Alert             bool   // the drift persisted past one interval
	CheckedAt         time.Time
	// CodesDiffering names, on a campaign's gate, the codes whose uses at
	// the gate differ from the database's once the orders in flight are
	// counted (sorted; at most maxCodesDiffering of them). A code too high
	// at the gate is refused there while the database has room (an
	// undersell of that code); one too low is refused by the database and
	// converges by itself. Rebuilding the gate restores both.
	CodesDiffering []string
	// PeriodsDiffering names the counts of the current periods (and those
	// within PeriodNear) of the voucher's period limits that differ between
	// the gate and the database once the orders in flight are counted
	// (sorted; at most maxCodesDiffering). A count too high at the gate
	// refuses uses the database would take (an undersell of that period);
	// one too low is refused by the database (sync path) or dead-lettered
	// (kafka path). Rebuilding the gate restores both.
	PeriodsDiffering []string
}

// maxCodesDiffering bounds the codes a drift report names.
const maxCodesDiffering = 50

// keepsDiscounts reports whether either snapshot has an order with a
// discount of its own (GateOrder.Discount: appliesTo), so that
// discountsDiffering has anything to compare.
func keepsDiscounts(dbSnap, gateSnap GateSnapshot) bool {
	for _, snap := range []GateSnapshot{dbSnap, gateSnap} {
		for _, o := range snap.Orders {
			if o.Discount != nil {
				return true
			}
		}
	}
	return false
}

// discountsDiffering names the orders the gate and the database both hold
// live whose discounts differ: the gate's (its record, else its amount's)
// against the row's, each "order ID: gate G, database D" (sorted; at most
// maxCodesDiffering). A gate's discount too high gives back more than the
// order took (the gate's budget then admits what the database refuses); too
// low, less (an undersell of the budget). Rebuilding the gate restores them.
func discountsDiffering(v Voucher, dbSnap, gateSnap GateSnapshot) []string {
	inStore := make(map[string]int64, len(dbSnap.Orders))
	for _, o := range dbSnap.Orders {
		if !o.Released {
			inStore[o.OrderID] = v.OrderDiscount(o)
		}
	}
	var out []string
	for _, o := range gateSnap.Orders {
		if o.Void || o.Lost || o.Released {
			continue
		}
		if want, ok := inStore[o.OrderID]; ok && v.OrderDiscount(o) != want {
			out = append(out, fmt.Sprintf("order %s: gate %d, database %d", o.OrderID, v.OrderDiscount(o), want))
		}
	}
	slices.Sort(out)
	if len(out) > maxCodesDiffering {
		out = out[:maxCodesDiffering]
	}
	return out
}

// periodsDiffering compares a gate's period counts (gate, of the periods of
// dbSnap.Periods, in that order) with the database's: the gate also counts
// the orders it admitted that the database does not hold yet (inFlight,
// their periods in held, the gate's records) and no longer counts the
// orders it released that the database still holds (releasedSince, their
// periods in the database's OrderPeriods). Each difference reads "SCOPE
// PERIOD START customer C: gate G, database D" (customer 0 for a VOUCHER
// limit).
func periodsDiffering(dbSnap, gateSnap GateSnapshot, gate []GatePeriodCount, held map[string][]int, inFlight, releasedSince []string) []string {
	customerOf := map[string]int64{}
	for _, o := range dbSnap.Orders {
		customerOf[o.OrderID] = o.CustomerID
	}
	for _, o := range gateSnap.Orders {
		customerOf[o.OrderID] = o.CustomerID
	}
	want := make([]map[int64]int, len(dbSnap.Periods))
	for i, p := range dbSnap.Periods {
		want[i] = maps.Clone(p.Uses)
		if want[i] == nil {
			want[i] = map[int64]int{}
		}
	}
	field := func(i int, id string) int64 { return dbSnap.Periods[i].Field(customerOf[id]) }
	for _, id := range inFlight {
		for _, i := range held[id] {
			want[i][field(i, id)]++
		}
	}
	for _, id := range releasedSince {
		for _, i := range dbSnap.OrderPeriods[id] {
			want[i][field(i, id)]--
		}
	}
	var out []string
	for i, p := range dbSnap.Periods {
		var got map[int64]int
		if i < len(gate) {
			got = gate[i].Uses
		}
		customers := slices.Collect(maps.Keys(want[i]))
		for c := range got {
			if _, ok := want[i][c]; !ok {
				customers = append(customers, c)
			}
		}
		for _, c := range customers {
			if got[c] != want[i][c] {
				out = append(out, fmt.Sprintf("%s %s %s customer %d: gate %d, database %d",
					p.Scope, p.Period, p.Start.UTC().Format(time.RFC3339), c, got[c], want[i][c]))
			}
		}
	}
	slices.Sort(out)
	return out[:min(len(out), maxCodesDiffering)]
}

// codesDiffering compares a campaign gate's uses per code with the
// database's: the gate also counts the orders it admitted that the database
// does not hold yet (inFlight, their codes in the gate's OrderCodes) and no
// longer counts the orders it released that the database still holds
// (releasedSince, their codes in the database's OrderCodes).
func codesDiffering(dbSnap, gateSnap GateSnapshot, inFlight, releasedSince []string) []string {
	want := make(map[string]int, len(dbSnap.Codes))
	for c, n := range dbSnap.Codes {
		want[c] = n
	}
	for _, id := range inFlight {
		if c, ok := gateSnap.OrderCodes[id]; ok {
			want[c]++
		}
	}
	for _, id := range releasedSince {
		if c, ok := dbSnap.OrderCodes[id]; ok {
			want[c]--
		}
	}
	var out []string
	for c, n := range want {
		if gateSnap.Codes[c] != n {
			out = append(out, c)
		}
	}
	for c := range gateSnap.Codes {
		if _, ok := want[c]; !ok {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), maxCodesDiffering)]
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
		return nil, nil // no gate to reconcile
	}
	vouchers, err := s.store.FlashVouchers(ctx)
	if err != nil {
		return nil, err
	}
	var reports []DriftReport
	for _, v := range vouchers {
		d, err := s.reconcileVoucher(ctx, v.Code, false)
		if errors.Is(err, errReconciling) {
			continue // another pass has it now
		}
		if err != nil {
			return reports, err
		}
		reports = append(reports, d)
	}
	return reports, nil
}

// ReconcileVoucher runs one reconciliation pass of one flash voucher's gate
// (a campaign's gate is named by ~C<id> or by any of its codes) and stores
// its report. Errors: FORBIDDEN, INVALID_INPUT, NOT_FOUND, UNAVAILABLE.
func (s *Service) ReconcileVoucher(ctx context.Context, code string) (DriftReport, error) {
	if err := authorize(ctx, OpOperate); err != nil {
		return DriftReport{}, err
	}
	if _, ok := CampaignOfGate(code); !ok {
		var err error
		if code, err = CanonicalCode(code); err != nil {
			return DriftReport{}, err
		}
	}
	v, err := s.store.Voucher(ctx, code)
	if err != nil {
		return DriftReport{}, err
	}
	if !v.Flash || s.gate == nil {
		return DriftReport{}, Errorf(NotFound, "voucher %s has no gate", code)
	}
	return s.reconcileVoucher(ctx, gateCode(v), true)
}

// reconcileLockTTL bounds a reconciliation pass's lock should its holder
// die (it is renewed while the pass runs); reconcileLockWait is how long an
// operator's pass waits for another's.
const (
	reconcileLockTTL  = 10 * time.Second
	reconcileLockWait = 30 * time.Second
)

// errReconciling: another pass holds the voucher's reconciliation lock.
var errReconciling = &Error{Code: Unavailable, Message: "another reconciliation of the voucher is running; retry"}

// lockReconcile takes the voucher's reconciliation lock; with wait it
// waits up to reconcileLockWait for another pass's, else it answers
// errReconciling at once.
func (s *Service) lockReconcile(ctx context.Context, code string, wait bool) (func(), error) {
	deadline := time.Now().Add(reconcileLockWait)
	for pause := 10 * time.Millisecond; ; pause = min(2*pause, 500*time.Millisecond) {
		unlock, ok, err := s.gate.LockReconcile(ctx, code, reconcileLockTTL)
		if err != nil {
			return nil, unavailable(err)
		}
		if ok {
			return unlock, nil
		}
		if !wait || time.Now().After(deadline) {
			return nil, errReconciling
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, unavailable(ctx.Err())
		}
	}
}

// reconcileVoucher reads the database first and the gate second, so an order
// admitted in between shows as in flight rather than as drift, and an order
// released in between is recognised by the gate's released mark.
func (s *Service) reconcileVoucher(ctx context.Context, code string, wait bool) (DriftReport, error) {
	// One pass of a voucher at a time, on every instance: two passes close
	// together would both lower the gate by the same drift.
	unlock, err := s.lockReconcile(ctx, code, wait)
	if err != nil {
		return DriftReport{}, err
	}
	defer unlock()
	settled := true
	// Wait until the writes already on their way have reached the database,
	// so they do not look like leaks.
	if err := s.flash.settle(ctx); err != nil {
		s.logger.WarnContext(ctx, "reconciling without settled writes", "code", code, "err", err)
		// An order whose event waits in a stuck consumer is not leaked:
		// giving its use back would let the gate sell it twice once the
		// event is applied.
		settled = false
	}
	// The gate's version before the database's snapshot: a reload or a
	// raise between the two snapshots makes them incomparable, and one
	// after them makes the drift stale; Lower is refused either way.
	version, err := s.gate.Version(ctx, code)
	if err != nil {
		return DriftReport{}, unavailable(err)
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
	if !IsCampaignGate(code) {
		if d, rebuilt, err := s.termsFollowed(ctx, code, gateSnap, d); rebuilt || err != nil {
			return d, err
		}
	}
	inStore := make(map[string]bool, len(dbSnap.Orders))
	for _, o := range dbSnap.Orders {
		inStore[o.OrderID] = true
	}
	gateLive, gateReleased := map[string]bool{}, map[string]bool{}
	for _, o := range gateSnap.Orders {
		switch {
		case o.Void:
			// Given back before it was ever answered: holds nothing.
		case o.Lost:
			// Taken, and never in the database: an undersell, alerted by
			// the kafka path's reconcileOrders.
		case o.Released:
			gateReleased[o.OrderID] = true
		default:
			gateLive[o.OrderID] = true
		}
	}
	var releasedSince []string
	for id := range inStore {
		switch {
		case gateReleased[id]:
			releasedSince = append(releasedSince, id)
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
	d.Drift = gateRemaining - (dbSnap.Remaining - d.InFlight + len(releasedSince))
	if IsCampaignGate(code) {
		d.CodesDiffering = codesDiffering(dbSnap, gateSnap, d.OrdersOnlyInGate, releasedSince)
	}
	if len(dbSnap.Periods) > 0 {
		periods := make([]GatePeriod, len(dbSnap.Periods))
		for i, p := range dbSnap.Periods {
			periods[i] = p.GatePeriod
		}
		counts, held, err := s.gate.PeriodCounts(ctx, code, periods, d.OrdersOnlyInGate)
		if err != nil {
			return DriftReport{}, unavailable(err)
		}
		d.PeriodsDiffering = periodsDiffering(dbSnap, gateSnap, counts, held, d.OrdersOnlyInGate, releasedSince)
	}
	if keepsDiscounts(dbSnap, gateSnap) {
		// appliesTo: the gate keeps orders' own discounts, which its
		// give-backs return. Logged, not repaired (a rebuild rewrites them
		// from the rows), and not in the report's fields.
		if v, err := s.store.Voucher(ctx, code); err == nil {
			if differ := discountsDiffering(v, dbSnap, gateSnap); len(differ) > 0 {
				s.logger.ErrorContext(ctx, "order discounts at odds between the gate and the database; rebuild the gate", "code", code, "discounts_differing", differ)
			}
		}
	}

	previous, err := s.drift.LatestDriftReport(ctx, code)
	if err != nil && ErrorCodeOf(err) != NotFound {
		return DriftReport{}, err
	}
	var repairs []string
	if d.Drift > 0 {
		// The gate could admit more than the database allows: lowering it
		// is always safe, unless the gate changed since the drift was
		// reckoned (then the next pass reckons it again).
		switch n, lowered, err := s.gate.Lower(ctx, code, d.Drift, version); {
		case err != nil:
			s.logger.ErrorContext(ctx, "could not lower the gate", "code", code, "err", err)
		case !lowered:
			repairs = append(repairs, "not lowered: the gate was loaded again or raised during the pass")
		default:
			repairs = append(repairs, fmt.Sprintf("lowered the gate by %d to %d", d.Drift, n))
		}
	}
	// The orders the gate holds and the database lacks: the write path
	// decides what is leaked and what is on its way.
	repairs = append(repairs, s.flashFor(code).reconcileOrders(ctx, gateSnap, &d, previous, settled)...)
	if d.Drift < 0 && previous.Drift < 0 && !previous.CheckedAt.IsZero() && settled {
		// The rebuild outlasts a job's pass (it waits for the writes in
		// flight): it and this report run on their own bound, so a pass's
		// deadline does not abandon a paused gate or lose the report.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), undersellRepairTimeout)
		defer cancel()
		repairs = append(repairs, s.repairUndersell(ctx, code))
	}
	d.Repaired = joinSentences(repairs)
	d.Alert = d.Alert || (d.Drift != 0 && previous.Drift != 0 && !previous.CheckedAt.IsZero())
	// A code's count at odds past one interval is an alert too: an order
	// in flight between the two snapshots explains one pass, not two.
	d.Alert = d.Alert || (len(d.CodesDiffering) > 0 && len(previous.CodesDiffering) > 0)
	d.Alert = d.Alert || (len(d.PeriodsDiffering) > 0 && len(previous.PeriodsDiffering) > 0)
	if d.Alert {
		s.logger.ErrorContext(ctx, "gate drift persists past one reconciliation interval",
			"code", code, "drift", d.Drift, "gate_remaining", gateRemaining, "database_remaining", dbSnap.Remaining, "codes_differing", d.CodesDiffering,
			"periods_differing", d.PeriodsDiffering)
	} else if d.Drift != 0 || len(d.OrdersOnlyInStore) > 0 || len(d.CodesDiffering) > 0 || len(d.PeriodsDiffering) > 0 {
		s.logger.WarnContext(ctx, "gate drift", "code", code, "drift", d.Drift, "only_in_store", len(d.OrdersOnlyInStore), "codes_differing", d.CodesDiffering,
			"periods_differing", d.PeriodsDiffering)
	}
	s.obs.DriftChecked(d)
	return s.drift.SaveDriftReport(ctx, d)
}

// repairUndersell rebuilds a gate that stayed below the database for two
// passes (as RebuildGate, under the pass's lock). An order in flight or a
// give-back on its way explains one pass, not two; what is left is a use the
// gate holds for no order: a release whose give-back found no order to give
// back, because a failover to a replica that lagged lost the order's
// admission while the gate's count had already converged on the database's
// (explorer seed 1, sync mode; the kind was seen before in seeds 86, kafka,
// and 171, sync). A pass only ever
// lowers a gate, so without the rebuild the use stayed unsold, alerted
// every pass, until an operator rebuilt it.
//
// The rebuild pauses the voucher's sale for a few seconds (the writes in
// flight are waited for); a pass that finds the gate below the database
// twice is rare (a failover, a lost give-back), and an undersell that only
// an operator ends is not "too few for a while".
func (s *Service) repairUndersell(ctx context.Context, code string) string {
	s.logger.ErrorContext(ctx, "the gate stayed below the database past one reconciliation interval; rebuilding it", "code", code)
	if err := s.rebuildGate(ctx, code); err != nil {
		return "the gate stayed below the database past one interval; its rebuild failed (" + string(ErrorCodeOf(err)) + ")"
	}
	return "the gate stayed below the database past one interval: rebuilt from the database"
}

// undersellRepairTimeout bounds repairUndersell's rebuild and its report.
const undersellRepairTimeout = 30 * time.Second

// termsFollowed compares the terms a gate decides on with the voucher's
// in the database. A change of terms (updateVoucher, an extension) reaches
// the gate after the database's commit; if that step failed, the gate
// would go on deciding on the old ones: a window, minimum or per-customer
// limit the contract no longer has. The gate is then rebuilt from the
// database (as RebuildGate, under this pass's lock) and the pass reports
// it as an alert.
func (s *Service) termsFollowed(ctx context.Context, code string, gateSnap GateSnapshot, d DriftReport) (DriftReport, bool, error) {
	v, err := s.store.Voucher(ctx, code)
	if err != nil {
		return d, false, err
	}
	why := termsDiffer(v, gateSnap, time.Now())
	if why == "" {
		return d, false, nil
	}
	s.logger.ErrorContext(ctx, "the gate decides on terms the voucher no longer has; rebuilding it", "code", code, "differs", why)
	d.Alert = true
	if err := s.rebuildGate(ctx, code); err != nil {
		d.Repaired = "the gate's " + why + " differed from the voucher's; its rebuild failed (" + string(ErrorCodeOf(err)) + ")"
		saved, serr := s.drift.SaveDriftReport(ctx, d)
		return saved, true, errors.Join(unavailable(err), serr)
	}
	d.Repaired = "the gate's " + why + " differed from the voucher's: rebuilt from the database"
	saved, err := s.drift.SaveDriftReport(ctx, d)
	return saved, true, err
}

// termsDiffer names the terms a kafka-mode gate holds that differ from the
// voucher's ("" when none do).
func termsDiffer(v Voucher, g GateSnapshot, now time.Time) string {
	// Only a kafka-mode gate decides on terms of its own (Terms): the sync
	// path passes the voucher's per-customer limit with every reserve, and
	// the database decides the window and the minimum.
	t := g.Terms
	if t == nil {
		return ""
	}
	var differ []string
	if g.PerUserLimit != v.PerUserLimit {
		differ = append(differ, "perUserLimit")
	}
	if !t.StartsAt.Equal(v.StartsAt.Truncate(time.Millisecond)) {
		differ = append(differ, "startsAt")
	}
	// endVoucher closes the gate's window first, at Redis's now, then
	// the database's at its own: the two ends differ by the moment
	// between, and a rebuild in that moment would reopen the gate. So
	// an end the gate has passed already is left alone (a gate closed
	// early only undersells); a later or still-open one must match.
	ends := v.EndsAt.Truncate(time.Millisecond)
	if t.EndsAt.After(ends) || (t.EndsAt.Before(ends) && t.EndsAt.After(now)) {
		differ = append(differ, "endsAt")
	}
	if t.MinOrderAmount != v.MinOrderAmount {
		differ = append(differ, "minOrderAmount")
	}
	return strings.Join(differ, ", ")
}

// RebuildGate reloads a flash voucher's gate from the database. It raises the
// gate where reconciliation would only lower it, so it is an operator's call.
// Reserves of the voucher are refused with UNAVAILABLE while it runs.
// Errors: FORBIDDEN, NOT_FOUND, UNAVAILABLE.
func (s *Service) RebuildGate(ctx context.Context, code string) error {
	if err := authorize(ctx, OpOperate); err != nil {
		return err
	}
	// A campaign's gate is named by its voucher row (~C<id>, as its drift
	// report names it) or by any of its codes.
	if _, ok := CampaignOfGate(code); !ok {
		var err error
		if code, err = CanonicalCode(code); err != nil {
			return err
		}
	}
	v, err := s.store.Voucher(ctx, code)
	if err != nil {
		return err
	}
	if !v.Flash || s.gate == nil {
		return Errorf(NotFound, "voucher %s has no gate", code)
	}
	return s.rebuildGate(ctx, gateCode(v))
}

// rebuildGate pauses a gate and reloads it from the database (the write
// path's rebuild), dropping this instance's sold-out snapshot first. The
// pause lasts pauseHold unless the rebuild renews it (Gate.KeepPaused): a
// rebuild whose process dies half-way stops the sale, and the expiry of its
// reservations, for seconds, not for the gate's ten-minute bound (explorer
// seed 50: a rebuild killed in its wait left the gate paused, and its
// expired reservations RESERVED, past the end of the run).
func (s *Service) rebuildGate(ctx context.Context, code string) error {
	s.soldOut.forget(code)
	if err := s.gate.Pause(ctx, code, pauseHold); err != nil {
		return unavailable(err)
	}
	return s.flashFor(code).rebuild(ctx, code)
}

// pauseHold is how long a rebuild's pause outlives the last renewal by its
// rebuild.
const pauseHold = 6 * time.Second

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
