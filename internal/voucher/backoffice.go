package voucher

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Error codes of changing a voucher (the admin mutations and the dashboard).
const (
	// VoucherStarted: the voucher's window has opened (or it holds uses), so
	// its terms can no longer change; it can only be ended.
	VoucherStarted ErrorCode = "VOUCHER_STARTED"
	// VoucherNotLive: only a voucher whose window is open can be ended now.
	VoucherNotLive ErrorCode = "VOUCHER_NOT_LIVE"
)

// VoucherState is where a voucher is in its life, for people.
type VoucherState string

// The states. The SQL of the dashboard's search (VoucherSearch) computes the
// same, in the same order.
const (
	StateScheduled VoucherState = "scheduled" // its window has not opened
	StateLive      VoucherState = "live"      // open, with uses left
	StateSoldOut   VoucherState = "sold-out"  // open, every use held or sold
	StateEnded     VoucherState = "ended"     // its window has closed
)

// VoucherStates lists the states in the order a sale goes through them.
var VoucherStates = []VoucherState{StateScheduled, StateLive, StateSoldOut, StateEnded}

// State is the voucher's state at now.
func (v Voucher) State(now time.Time) VoucherState {
	switch {
	case now.After(v.EndsAt):
		return StateEnded
	case v.UsedCount >= v.TotalLimit:
		return StateSoldOut
	case now.Before(v.StartsAt):
		return StateScheduled
	}
	return StateLive
}

// FieldErrors checks every field of a new voucher and returns a message per
// field at fault (keyed as the schema spells it), so a form can show each
// next to its input. Validate reports the first of them.
func (n NewVoucher) FieldErrors() map[string]string {
	out := map[string]string{}
	if err := ValidateCode(n.Code); err != nil {
		out["code"] = AsError(err).Message
	}
	switch n.DiscountType {
	case "", DiscountFixed:
		if msg := moneyRule("discountAmount", n.DiscountAmount, 1); msg != "" {
			out["discountAmount"] = msg
		}
		if n.DiscountPercent != 0 {
			out["discountPercent"] = "discountPercent is for a PERCENT voucher only"
		}
		if n.MaxDiscountAmount != nil {
			out["maxDiscountAmount"] = "maxDiscountAmount is for a PERCENT voucher only"
		}
	case DiscountPercent:
		if n.DiscountAmount != 0 {
			out["discountAmount"] = "discountAmount must be absent for a PERCENT voucher (its discount is discountPercent of the order)"
		}
		if n.DiscountPercent < 1 || n.DiscountPercent > 100 {
			out["discountPercent"] = "discountPercent must be 1-100"
		}
		if n.MaxDiscountAmount != nil {
			if msg := moneyRule("maxDiscountAmount", *n.MaxDiscountAmount, 1); msg != "" {
				out["maxDiscountAmount"] = msg
			}
		}
	default:
		out["discountType"] = "discountType must be FIXED or PERCENT"
	}
	if n.Currency != "" {
		if err := ValidateCurrency(n.Currency); err != nil {
			out["currency"] = AsError(err).Message
		}
	}
	if n.BudgetAmount != nil {
		if msg := moneyRule("budgetAmount", *n.BudgetAmount, 1); msg != "" {
			out["budgetAmount"] = msg
		}
	}
	if msg := moneyRule("minOrderAmount", n.MinOrderAmount, 0); msg != "" {
		out["minOrderAmount"] = msg
	}
	if n.TotalLimit < 1 || n.TotalLimit > MaxLimit {
		out["totalLimit"] = "totalLimit must be at least 1 and at most 2147483647"
	}
	if n.PerUserLimit < 1 || n.PerUserLimit > MaxLimit {
		out["perUserLimit"] = "perUserLimit must be at least 1 and at most 2147483647"
	}
	if n.StartsAt.IsZero() {
		out["startsAt"] = "startsAt is required"
	}
	if n.EndsAt.IsZero() {
		out["endsAt"] = "endsAt is required"
	} else if !n.StartsAt.IsZero() && !n.StartsAt.Before(n.EndsAt) {
		out["endsAt"] = "endsAt must be after startsAt"
	}
	n.fieldErrors(out)
	return out
}

// VoucherFilter narrows the dashboard's list.
type VoucherFilter struct {
	// Search is a piece of the code, any case.
	Search string
	// State keeps one state; empty keeps all.
	State     VoucherState
	FlashOnly bool
	// Sort orders the list; empty: newest first.
	Sort VoucherSort
	// Descending reverses Sort (start, state, usage).
	Descending bool
	// Limit bounds the list; default 100, at most 500.
	Limit int
	// Offset skips that many matches (a page's start).
	Offset int
}

// VoucherSort is an order of the dashboard's list.
type VoucherSort string

// The list's orders; newest first among equals.
const (
	SortNewest VoucherSort = ""      // newest first
	SortLive   VoucherSort = "live"  // live, sold out, scheduled, ended
	SortStart  VoucherSort = "start" // by the window's start
	SortState  VoucherSort = "state" // scheduled, live, sold out, ended
	SortUsage  VoucherSort = "usage" // by the share of the total used
)

// VoucherSorts lists the orders a person may choose.
var VoucherSorts = []VoucherSort{SortLive, SortStart, SortState, SortUsage}

// VoucherPage is one page of the list with the count of every match.
type VoucherPage struct {
	Rows  []VoucherOverview
	Total int
}

// VoucherOverview is a voucher as the dashboard lists it.
type VoucherOverview struct {
	Voucher
	State VoucherState
	// Gate is the gate's counter of a flash voucher; nil when it holds
	// nothing, the voucher is not flash or the gate did not answer.
	Gate            *int
	GateUnavailable bool
	// PeriodCounts are the latest period counts that hold uses, latest
	// first (Voucher reads them; lists leave them out).
	PeriodCounts []PeriodCount
}

// AuditEvent is one change of a voucher by a person or a token.
type AuditEvent struct {
	VoucherCode string
	Actor       string // the user's email, or "token"
	ActorRole   Role
	Action      string // created, updated, ended
	Detail      string
	At          time.Time
}

// The audit actions.
const (
	AuditCreated = "created"
	AuditUpdated = "updated"
	AuditEnded   = "ended"
	// AuditRolledBack is a confirmed use given back, with its reason.
	AuditRolledBack = "rolled-back"
)

// ReservationEvent is one state change of a reservation from the audit trail
// (reservation_event).
type ReservationEvent struct {
	OrderID     string
	VoucherCode string
	CustomerID  int64
	Kind        string // reserved, confirmed, released, expired
	Path        Path
	At          time.Time
}

// RemainingSample is a voucher's counters at one moment.
type RemainingSample struct {
	At        time.Time
	Remaining int
	Reserved  int
	Confirmed int
}

// VoucherActivity is everything the dashboard's voucher page shows; each
// list is bounded, so reading it costs the same during a sale as before.
type VoucherActivity struct {
	VoucherOverview
	Samples      []RemainingSample  // oldest first
	Reservations []Reservation      // newest first
	Events       []ReservationEvent // newest first
	Audit        []AuditEvent       // newest first
}

// How much of a voucher's history its page reads.
const (
	ActivitySamples      = 720
	ActivityReservations = 20
	ActivityEvents       = 30
	ActivityAudit        = 30
)

// BackofficeStore is what the dashboard and the admin mutations read and
// change beyond Store. Each method is one transaction with bounded reads.
type BackofficeStore interface {
	// SearchVouchers lists a page of vouchers by a filter, in its order.
	SearchVouchers(ctx context.Context, f VoucherFilter) ([]Voucher, error)
	// CountVouchers counts every voucher the filter matches.
	CountVouchers(ctx context.Context, f VoucherFilter) (int, error)
	// OperationAudit returns the latest repairs recorded, newest first.
	OperationAudit(ctx context.Context, limit int) ([]AuditEvent, error)
	// ReservationPage returns a page of a voucher's reservations, newest
	// first, by a filter.
	ReservationPage(ctx context.Context, code string, f ReservationFilter) ([]Reservation, error)
	// UpdateVoucher replaces every term of a voucher that has not started
	// and records the audit event with it: NOT_FOUND, VOUCHER_STARTED,
	// VOUCHER_EXISTS (the new code is taken).
	UpdateVoucher(ctx context.Context, code string, n NewVoucher, audit AuditEvent) (Voucher, error)
	// EndVoucher closes a live voucher's window now and records the audit
	// event with it: NOT_FOUND, VOUCHER_NOT_LIVE.
	EndVoucher(ctx context.Context, code string, audit AuditEvent) (Voucher, error)
	// ExtendVoucher sets a voucher's total and end in one conditional
	// update (the rules of CheckExtension) and records the audit event made
	// by audit from the values before and after, in one transaction:
	// NOT_FOUND, VOUCHER_NOT_LIVE, INVALID_INPUT (totalLimit, endsAt).
	ExtendVoucher(ctx context.Context, code string, totalLimit int, endsAt time.Time, audit func(before, after Voucher) AuditEvent) (before, after Voucher, err error)
	// PeriodCounts lists a voucher's period counts that hold uses, latest
	// period first, at most limit.
	PeriodCounts(ctx context.Context, code string, limit int) ([]PeriodCount, error)
	AddAuditEvent(ctx context.Context, e AuditEvent) error
	AuditEvents(ctx context.Context, code string, limit int) ([]AuditEvent, error)
	ReservationEvents(ctx context.Context, code string, limit int) ([]ReservationEvent, error)
	RecentReservations(ctx context.Context, code string, limit int) ([]Reservation, error)
	// RemainingSamples returns a voucher's latest samples, newest first.
	RemainingSamples(ctx context.Context, code string, limit int) ([]RemainingSample, error)
	// SampleOpenVouchers samples the counters of every voucher whose window
	// is open or closed less than grace ago, where they changed.
	SampleOpenVouchers(ctx context.Context, grace time.Duration) (int, error)
	DeadLetterStore
}

// Backoffice is what marketers and operators do beyond the contract's
// operations: list and search, change and end vouchers, read a voucher's
// activity. It runs on the service and a BackofficeStore.
type Backoffice struct {
	svc   *Service
	store BackofficeStore
	now   func() time.Time
}

// NewBackoffice returns the back office over the service and a store.
func NewBackoffice(svc *Service, store BackofficeStore) *Backoffice {
	return &Backoffice{svc: svc, store: store, now: clockNow}
}

// Service is the voucher service the back office runs on.
func (b *Backoffice) Service() *Service { return b.svc }

// ListVouchers lists vouchers with their state and, for flash vouchers, the
// gate's counter. A gate that does not answer is shown as such, not as an
// error. Errors: FORBIDDEN.
func (b *Backoffice) ListVouchers(ctx context.Context, f VoucherFilter) ([]VoucherOverview, error) {
	if err := authorize(ctx, OpRead); err != nil {
		return nil, err
	}
	f, err := checkFilter(f)
	if err != nil {
		return nil, err
	}
	vs, err := b.store.SearchVouchers(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]VoucherOverview, len(vs))
	for i, v := range vs {
		out[i] = b.overview(ctx, v)
	}
	return out, nil
}

// checkFilter bounds a filter's page and refuses what names nothing.
func checkFilter(f VoucherFilter) (VoucherFilter, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	f.Limit = min(f.Limit, 500)
	f.Offset = max(f.Offset, 0)
	f.Search = strings.TrimSpace(f.Search)
	if f.State != "" && !slices.Contains(VoucherStates, f.State) {
		return f, Invalid("state", "state must be scheduled, live, sold-out or ended")
	}
	if f.Sort != SortNewest && !slices.Contains(VoucherSorts, f.Sort) {
		return f, Invalid("sort", "sort must be live, start, state or usage")
	}
	return f, nil
}

// PageVouchers is ListVouchers with the count of every match, for a list
// that pages. Errors: FORBIDDEN, INVALID_INPUT.
func (b *Backoffice) PageVouchers(ctx context.Context, f VoucherFilter) (VoucherPage, error) {
	rows, err := b.ListVouchers(ctx, f)
	if err != nil {
		return VoucherPage{}, err
	}
	f, _ = checkFilter(f) // ListVouchers has checked it
	total := len(rows) + f.Offset
	if len(rows) == f.Limit || (len(rows) == 0 && f.Offset > 0) {
		// More may follow (or the page is past the end): count them.
		if total, err = b.store.CountVouchers(ctx, f); err != nil {
			return VoucherPage{}, err
		}
	}
	return VoucherPage{Rows: rows, Total: total}, nil
}

func (b *Backoffice) overview(ctx context.Context, v Voucher) VoucherOverview {
	o := VoucherOverview{Voucher: v, State: v.State(b.now())}
	n, ok, err := b.svc.GateRemaining(ctx, v)
	switch {
	case err != nil:
		o.GateUnavailable = true
	case ok:
		o.Gate = &n
	}
	return o
}

// Voucher returns one voucher's overview. Errors: FORBIDDEN, INVALID_INPUT,
// NOT_FOUND.
func (b *Backoffice) Voucher(ctx context.Context, code string) (VoucherOverview, error) {
	v, err := b.svc.Voucher(ctx, code)
	if err != nil {
		return VoucherOverview{}, err
	}
	o := b.overview(ctx, v)
	if len(v.PeriodLimits) > 0 && v.CampaignID == 0 {
		if o.PeriodCounts, err = b.store.PeriodCounts(ctx, v.Code, 20); err != nil {
			return VoucherOverview{}, err
		}
	}
	return o, nil
}

// Activity returns a voucher's page: its figures, samples of its remaining
// uses, recent reservations, their events and the voucher's audit log.
// Errors: FORBIDDEN, INVALID_INPUT, NOT_FOUND.
func (b *Backoffice) Activity(ctx context.Context, code string) (VoucherActivity, error) {
	o, err := b.Voucher(ctx, code)
	if err != nil {
		return VoucherActivity{}, err
	}
	code = o.Code // the stored form
	a := VoucherActivity{VoucherOverview: o}
	if a.Samples, err = b.store.RemainingSamples(ctx, code, ActivitySamples); err != nil {
		return VoucherActivity{}, err
	}
	slices.Reverse(a.Samples)
	if a.Reservations, err = b.store.RecentReservations(ctx, code, ActivityReservations); err != nil {
		return VoucherActivity{}, err
	}
	if a.Events, err = b.store.ReservationEvents(ctx, code, ActivityEvents); err != nil {
		return VoucherActivity{}, err
	}
	if a.Audit, err = b.store.AuditEvents(ctx, code, ActivityAudit); err != nil {
		return VoucherActivity{}, err
	}
	return a, nil
}

// CreateVoucher creates a voucher as the service does and records who did.
// Errors: FORBIDDEN, INVALID_INPUT, VOUCHER_EXISTS.
func (b *Backoffice) CreateVoucher(ctx context.Context, n NewVoucher) (Voucher, error) {
	v, err := b.svc.CreateVoucher(ctx, n)
	if err != nil {
		return Voucher{}, err
	}
	// The audit row follows the voucher in its own transaction: the
	// contract's createVoucher path (service and store) is not the back
	// office's to change. A failure here is logged, the voucher stands.
	if err := b.store.AddAuditEvent(ctx, auditOf(ctx, v.Code, AuditCreated, describeTerms(v))); err != nil {
		b.svc.logger.ErrorContext(ctx, "could not record a voucher's creation", "code", v.Code, "err", err)
	}
	return v, nil
}

// VoucherChange is a change of a voucher that has not started: nil fields
// keep their value. A change of DiscountType drops the other type's terms
// (FIXED: the percent and its cap; PERCENT: the amount) unless given.
type VoucherChange struct {
	Code              *string // a new code
	DiscountType      *DiscountType
	DiscountAmount    *int64
	DiscountPercent   *int
	MaxDiscountAmount *int64
	Currency          *string
	BudgetAmount      *int64
	MinOrderAmount    *int64
	TotalLimit        *int
	PerUserLimit      *int
	StartsAt          *time.Time
	EndsAt            *time.Time
	Flash             *bool
	// ClearMaxDiscountAmount removes the cap and ClearBudgetAmount the
	// budget: a nil amount above keeps it. Neither goes with its amount.
	ClearMaxDiscountAmount bool
	ClearBudgetAmount      bool
	// Restrictions replaces the period limits, time zone, segments and
	// appliesTo together; nil keeps them.
	Restrictions *Restrictions
}

// check refuses a change that both sets and clears an amount.
func (c VoucherChange) check() error {
	if c.ClearMaxDiscountAmount && c.MaxDiscountAmount != nil {
		return Invalid("maxDiscountAmount", "give maxDiscountAmount or clearMaxDiscountAmount, not both")
	}
	if c.ClearBudgetAmount && c.BudgetAmount != nil {
		return Invalid("budgetAmount", "give budgetAmount or clearBudgetAmount, not both")
	}
	return nil
}

// Apply returns the voucher's terms with the change made.
func (c VoucherChange) Apply(v Voucher) NewVoucher {
	n := NewVoucher{
		Code: v.Code, DiscountType: v.DiscountType, DiscountAmount: v.DiscountAmount,
		DiscountPercent: v.DiscountPercent, MaxDiscountAmount: v.MaxDiscountAmount, Currency: v.Currency,
		BudgetAmount:   v.BudgetAmount,
		MinOrderAmount: v.MinOrderAmount,
		TotalLimit:     v.TotalLimit, PerUserLimit: v.PerUserLimit,
		StartsAt: v.StartsAt, EndsAt: v.EndsAt, Flash: v.Flash,
		Restrictions: v.Restrictions,
	}
	set(&n.Code, c.Code)
	if c.DiscountType != nil && *c.DiscountType != v.DiscountType {
		n.DiscountType, n.DiscountAmount, n.DiscountPercent, n.MaxDiscountAmount = *c.DiscountType, 0, 0, nil
	}
	set(&n.DiscountAmount, c.DiscountAmount)
	set(&n.DiscountPercent, c.DiscountPercent)
	if c.MaxDiscountAmount != nil {
		n.MaxDiscountAmount = c.MaxDiscountAmount
	}
	set(&n.Currency, c.Currency)
	if c.BudgetAmount != nil {
		n.BudgetAmount = c.BudgetAmount
	}
	if c.ClearMaxDiscountAmount {
		n.MaxDiscountAmount = nil
	}
	if c.ClearBudgetAmount {
		n.BudgetAmount = nil
	}
	set(&n.MinOrderAmount, c.MinOrderAmount)
	set(&n.TotalLimit, c.TotalLimit)
	set(&n.PerUserLimit, c.PerUserLimit)
	set(&n.StartsAt, c.StartsAt)
	set(&n.EndsAt, c.EndsAt)
	set(&n.Flash, c.Flash)
	set(&n.Restrictions, c.Restrictions)
	return n
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// UpdateVoucher changes any term of a voucher whose window has not opened,
// records it in the audit log with who did it and, for a flash voucher,
// reloads its gate with the new terms.
// Errors: FORBIDDEN, INVALID_INPUT, NOT_FOUND, VOUCHER_STARTED, VOUCHER_EXISTS.
func (b *Backoffice) UpdateVoucher(ctx context.Context, code string, c VoucherChange) (Voucher, error) {
	if err := authorize(ctx, OpManageVoucher); err != nil {
		return Voucher{}, err
	}
	if err := c.check(); err != nil {
		return Voucher{}, err
	}
	before, err := b.svc.Voucher(ctx, code)
	if err != nil {
		return Voucher{}, err
	}
	code = before.Code // the stored form
	if before.CampaignID != 0 {
		return Voucher{}, campaignCodeError()
	}
	if before.State(b.now()) != StateScheduled || before.UsedCount > 0 {
		return Voucher{}, startedError(code)
	}
	n := c.Apply(before)
	if err := n.Validate(); err != nil {
		return Voucher{}, err
	}
	if err := b.svc.checkTerms(n); err != nil {
		return Voucher{}, err
	}
	n.Code = upperCode(n.Code)
	detail := describeChange(before, n)
	if detail == "" {
		return before, nil // nothing changed: nothing to record
	}
	after, err := b.store.UpdateVoucher(ctx, code, n, auditOf(ctx, n.Code, AuditUpdated, detail))
	if err != nil {
		return Voucher{}, err
	}
	b.reloadGate(ctx, before, after)
	return after, nil
}

// reloadGate makes the gate follow a changed voucher that has not started
// (so no reserve can be in flight): the old gate goes, a flash voucher's new
// one is loaded from the database. A failure is logged: the first reserve
// or the warm-up job loads the gate anyway.
func (b *Backoffice) reloadGate(ctx context.Context, before, after Voucher) {
	gate := b.svc.gate
	if gate == nil {
		return
	}
	if before.Flash {
		if err := gate.Unload(ctx, before.Code); err != nil {
			b.svc.logger.ErrorContext(ctx, "could not unload the gate of a changed voucher", "code", before.Code, "err", err)
		}
	}
	if after.Flash {
		if err := b.svc.WarmGate(ctx, after.Code); err != nil {
			b.svc.logger.WarnContext(ctx, "could not load the gate of a changed voucher", "code", after.Code, "err", err)
		}
	}
}

// EndVoucher closes a live voucher's window now: no new reserve is taken,
// while its reservations keep their rules (a held one may still be confirmed
// or released until it expires). Recorded in the audit log with who did it.
// Errors: FORBIDDEN, INVALID_INPUT, NOT_FOUND, VOUCHER_NOT_LIVE.
func (b *Backoffice) EndVoucher(ctx context.Context, code string) (Voucher, error) {
	if err := authorize(ctx, OpManageVoucher); err != nil {
		return Voucher{}, err
	}
	code, err := CanonicalCode(code)
	if err != nil {
		return Voucher{}, err
	}
	v, err := b.svc.Voucher(ctx, code)
	if err == nil && v.CampaignID != 0 {
		return Voucher{}, campaignCodeError()
	}
	if err == nil && v.Flash && b.svc.gate != nil &&
		(v.State(b.now()) == StateLive || v.State(b.now()) == StateSoldOut) {
		// The gate first: in kafka mode it decides the window itself, and a
		// gate that stopped early only undersells if the database then fails.
		if err := b.svc.gate.End(ctx, code); err != nil {
			return Voucher{}, unavailable(err)
		}
	}
	return b.store.EndVoucher(ctx, code, auditOf(ctx, code, AuditEnded, "ended early, before its window closed"))
}

// The audit actions of an operator's repairs.
const (
	AuditGateRebuilt = "gate-rebuilt"
	AuditReconciled  = "reconciled"
	AuditGatesWarmed = "gates-warmed"
)

// OperationAuditLimit is how many repairs the drift page lists.
const OperationAuditLimit = 20

// RebuildGate rebuilds a flash voucher's gate from the database (as the
// service does) and records who did it. Errors: FORBIDDEN, INVALID_INPUT,
// NOT_FOUND, UNAVAILABLE.
func (b *Backoffice) RebuildGate(ctx context.Context, code string) error {
	if err := b.svc.RebuildGate(ctx, code); err != nil {
		return err
	}
	code = upperCode(code) // valid: RebuildGate checked it
	// After the repair, in its own transaction: the gate is not the
	// database's to roll back, so a failure to record is logged, not undone.
	if err := b.store.AddAuditEvent(ctx, auditOf(ctx, code, AuditGateRebuilt, "the gate was rebuilt from the database")); err != nil {
		b.svc.logger.ErrorContext(ctx, "could not record a gate rebuild", "code", code, "err", err)
	}
	return nil
}

// Reconcile runs a reconciliation pass by hand (as the service does) and
// records who did it with what it found. Errors: FORBIDDEN, UNAVAILABLE.
func (b *Backoffice) Reconcile(ctx context.Context) ([]DriftReport, error) {
	reports, err := b.svc.Reconcile(ctx)
	if err != nil {
		return reports, err
	}
	drifting := 0
	for _, r := range reports {
		if r.Drift != 0 {
			drifting++
		}
	}
	detail := fmt.Sprintf("%d flash voucher(s) checked, %d with drift", len(reports), drifting)
	if err := b.store.AddAuditEvent(ctx, auditOf(ctx, "", AuditReconciled, detail)); err != nil {
		b.svc.logger.ErrorContext(ctx, "could not record a reconciliation", "err", err)
	}
	return reports, nil
}

// ReconcileVoucher runs one reconciliation pass of one flash voucher (or
// campaign gate) by hand, as Reconcile does for all of them, and records who
// did it with what it found. Errors: FORBIDDEN, INVALID_INPUT, NOT_FOUND,
// UNAVAILABLE.
func (b *Backoffice) ReconcileVoucher(ctx context.Context, code string) (DriftReport, error) {
	d, err := b.svc.ReconcileVoucher(ctx, code)
	if err != nil {
		return d, err
	}
	detail := fmt.Sprintf("%s checked by hand: drift %d", d.VoucherCode, d.Drift)
	if err := b.store.AddAuditEvent(ctx, auditOf(ctx, d.VoucherCode, AuditReconciled, detail)); err != nil {
		b.svc.logger.ErrorContext(ctx, "could not record a reconciliation", "code", d.VoucherCode, "err", err)
	}
	return d, nil
}

// WarmGates loads every flash gate that is live or starts soon and is not
// loaded yet (as the warm-up job does) and records who did it; the count is
// of the gates looked at. Errors: FORBIDDEN, UNAVAILABLE.
func (b *Backoffice) WarmGates(ctx context.Context) (int, error) {
	if err := authorize(ctx, OpOperate); err != nil {
		return 0, err
	}
	n, err := b.svc.warmGates(ctx)
	if err != nil {
		return n, unavailable(err)
	}
	if err := b.store.AddAuditEvent(ctx, auditOf(ctx, "", AuditGatesWarmed, fmt.Sprintf("%d flash gate(s) warmed", n))); err != nil {
		b.svc.logger.ErrorContext(ctx, "could not record a warm-up", "err", err)
	}
	return n, nil
}

// DriftReports returns the latest reconciliation of every flash voucher (as
// the service does). Errors: FORBIDDEN.
func (b *Backoffice) DriftReports(ctx context.Context) ([]DriftReport, error) {
	return b.svc.DriftReports(ctx)
}

// OperationAudit returns the latest repairs, newest first. Errors: FORBIDDEN.
func (b *Backoffice) OperationAudit(ctx context.Context) ([]AuditEvent, error) {
	if err := authorize(ctx, OpOperate); err != nil {
		return nil, err
	}
	return b.store.OperationAudit(ctx, OperationAuditLimit)
}

// SampleOpenVouchers samples the counters of vouchers in their window, for
// the chart of remaining uses; the service's own job calls it.
func (b *Backoffice) SampleOpenVouchers(ctx context.Context) (int, error) {
	return b.store.SampleOpenVouchers(ctx, time.Minute)
}

// campaignCodeError refuses to change one code of a campaign: its terms are
// the campaign's, for all its codes.
func campaignCodeError() error {
	return Invalid("code", "code is a code of a campaign: its terms are the campaign's, for all its codes")
}

func startedError(code string) error {
	return Errorf(VoucherStarted, "voucher %s has started; it can only be ended now", code)
}

// auditOf names the context's caller as the actor; a context without one is
// the service itself.
func auditOf(ctx context.Context, code, action, detail string) AuditEvent {
	actor, role := Actor(ctx)
	return AuditEvent{VoucherCode: code, Actor: actor, ActorRole: role, Action: action, Detail: detail}
}

func describeTerms(v Voucher) string {
	discount := fmt.Sprintf("discountAmount %d", v.DiscountAmount)
	if v.DiscountType == DiscountPercent {
		discount = fmt.Sprintf("discountPercent %d, maxDiscountAmount %s", v.DiscountPercent, optional(v.MaxDiscountAmount))
	}
	return fmt.Sprintf("discountType %s, %s, currency %s, budgetAmount %s, minOrderAmount %d, totalLimit %d, perUserLimit %d, startsAt %s, endsAt %s, flash %t",
		v.DiscountType, discount, v.Currency, optional(v.BudgetAmount), v.MinOrderAmount, v.TotalLimit, v.PerUserLimit, stamp(v.StartsAt), stamp(v.EndsAt), v.Flash) +
		restrictionsTerm(v.Restrictions)
}

// restrictionsTerm is ", restrictions ..." for a voucher with any; "" else.
func restrictionsTerm(r Restrictions) string {
	if d := r.Describe(); d != "" {
		return ", restrictions " + d
	}
	return ""
}

// optional shows an optional amount for people: "none" when not set.
func optional(n *int64) string {
	if n == nil {
		return "none"
	}
	return fmt.Sprint(*n)
}

// describeChange says what differs, field by field; empty when nothing does.
func describeChange(v Voucher, n NewVoucher) string {
	var parts []string
	diff := func(field string, a, b any) {
		if a != b {
			parts = append(parts, fmt.Sprintf("%s %v → %v", field, a, b))
		}
	}
	diff("code", v.Code, n.Code)
	diff("discountType", v.DiscountType, n.DiscountType)
	diff("discountAmount", v.DiscountAmount, n.DiscountAmount)
	diff("discountPercent", v.DiscountPercent, n.DiscountPercent)
	diff("maxDiscountAmount", optional(v.MaxDiscountAmount), optional(n.MaxDiscountAmount))
	diff("currency", v.Currency, n.Currency)
	diff("budgetAmount", optional(v.BudgetAmount), optional(n.BudgetAmount))
	diff("minOrderAmount", v.MinOrderAmount, n.MinOrderAmount)
	diff("totalLimit", v.TotalLimit, n.TotalLimit)
	diff("perUserLimit", v.PerUserLimit, n.PerUserLimit)
	diff("startsAt", stamp(v.StartsAt), stamp(n.StartsAt))
	diff("endsAt", stamp(v.EndsAt), stamp(n.EndsAt))
	diff("flash", v.Flash, n.Flash)
	diff("restrictions", v.Describe(), n.Describe())
	return strings.Join(parts, "; ")
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// ReservationFilter narrows a voucher's reservations.
type ReservationFilter struct {
	Status     Status // empty: any
	CustomerID int64  // 0: any
	// After is the cursor of the last reservation of the previous page.
	After *ReservationCursor
	// Limit bounds a page; default 100, at most 1000.
	Limit int
}

// ReservationCursor is where a page of reservations (newest first) ends.
type ReservationCursor struct {
	CreatedAt time.Time
	OrderID   string
}

// Cursor is the reservation's place in the newest-first order.
func (r Reservation) Cursor() ReservationCursor {
	return ReservationCursor{CreatedAt: r.CreatedAt, OrderID: r.OrderID}
}

// exportBatch is how many reservations an export reads at a time: the
// export holds one batch in memory, whatever the voucher's size.
const exportBatch = 1000

func checkReservationFilter(f ReservationFilter) (ReservationFilter, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	f.Limit = min(f.Limit, exportBatch)
	switch f.Status {
	case "", StatusReserved, StatusConfirmed, StatusReleased, StatusRolledBack:
	default:
		return f, Invalid("status", "status must be RESERVED, CONFIRMED or RELEASED")
	}
	if f.CustomerID < 0 {
		return f, Invalid("customerId", "customerId must be greater than 0")
	}
	return f, nil
}

// Reservations returns a page of a voucher's reservations, newest first,
// and the cursor of the next page (nil on the last).
// Errors: FORBIDDEN, INVALID_INPUT, NOT_FOUND.
func (b *Backoffice) Reservations(ctx context.Context, code string, f ReservationFilter) ([]Reservation, *ReservationCursor, error) {
	v, err := b.svc.Voucher(ctx, code)
	if err != nil {
		return nil, nil, err
	}
	code = v.Code // the stored form
	f, err = checkReservationFilter(f)
	if err != nil {
		return nil, nil, err
	}
	want := f.Limit
	f.Limit++ // one more says whether a next page exists
	rows, err := b.store.ReservationPage(ctx, code, f)
	if err != nil {
		return nil, nil, err
	}
	if len(rows) <= want {
		return rows, nil, nil
	}
	rows = rows[:want]
	next := rows[want-1].Cursor()
	return rows, &next, nil
}

// ExportReservations hands every reservation of a voucher that the filter
// keeps to each, newest first, reading the database a batch at a time;
// an error from each stops it. Errors: FORBIDDEN, INVALID_INPUT, NOT_FOUND.
func (b *Backoffice) ExportReservations(ctx context.Context, code string, f ReservationFilter, each func(Reservation) error) error {
	v, err := b.svc.Voucher(ctx, code)
	if err != nil {
		return err
	}
	code = v.Code // the stored form
	f.Limit = exportBatch
	f, err = checkReservationFilter(f)
	if err != nil {
		return err
	}
	for {
		rows, err := b.store.ReservationPage(ctx, code, f)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := each(r); err != nil {
				return err
			}
		}
		if len(rows) < f.Limit {
			return nil
		}
		next := rows[len(rows)-1].Cursor()
		f.After = &next
	}
}
