package voucher

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// GateVerdict is the Redis gate's atomic answer to a reserve on a flash voucher.
type GateVerdict string

// The gate's verdicts.
const (
	GateAdmitted      GateVerdict = "ADMITTED"       // one use taken for this order; write it to the database
	GateDuplicate     GateVerdict = "DUPLICATE"      // the orderId passed before with the same customer and amount
	GateReleased      GateVerdict = "RELEASED"       // the orderId passed before, same customer and amount, and was released
	GateOrderConflict GateVerdict = "ORDER_CONFLICT" // the orderId passed before with another customer or amount
	GateAlreadyUsed   GateVerdict = "ALREADY_USED"   // the customer holds perUserLimit uses
	GateOutOfStock    GateVerdict = "OUT_OF_STOCK"   // no use left
	// GateBudgetExhausted: a use is left, but the budget cannot cover the
	// order's discount.
	GateBudgetExhausted GateVerdict = "BUDGET_EXHAUSTED"
	// GateSumTooLarge: a use is left, but the order's discount would take
	// the voucher's budgetUsed past MaxMoney (checked before the budget):
	// INVALID_INPUT on orderAmount for the caller.
	GateSumTooLarge GateVerdict = "SUM_TOO_LARGE"
	GateNotLoaded   GateVerdict = "NOT_LOADED" // the gate holds nothing for the voucher: warm it up
	GatePaused      GateVerdict = "PAUSED"     // an operator is rebuilding the gate: try again shortly
	// GateCodeUsedUp: on a campaign's gate, the code reserved has no use
	// left (the campaign may have): OUT_OF_STOCK for the caller.
	GateCodeUsedUp GateVerdict = "CODE_USED_UP"
)

// campaignGatePrefix starts the code of a campaign's voucher row, '~C<id>'
// (migration 00060), which no caller can type.
const campaignGatePrefix = "~C"

// CampaignGateCode is the code of campaign id's voucher row, which names
// the campaign's one gate (keys voucher:{~C<id>}:...) for all its codes.
func CampaignGateCode(id int64) string { return campaignGatePrefix + strconv.FormatInt(id, 10) }

// IsCampaignGate reports whether code names a campaign's gate (its voucher
// row) rather than a voucher's.
func IsCampaignGate(code string) bool { return strings.HasPrefix(code, campaignGatePrefix) }

// GateOrder is an orderId the gate remembers with the values it was reserved with.
type GateOrder struct {
	OrderID     string
	CustomerID  int64
	OrderAmount int64
	Released    bool // released, and its use given back to the gate
	// In kafka mode the gate also holds the order's state and times, since
	// it decides confirm, release and expiry before the database knows
	// (flash_kafka.go); zero in sync mode.
	Confirmed bool
	Releasing bool // released, its use kept until the database releases the row
	// Pending: admitted, not yet settled by its owner nor applied by the
	// consumer (admit.lua). Void: given back before it was ever answered.
	// Lost: the database refused its event; its use stays taken.
	Pending, Void, Lost bool
	// CreatedAt is also the admission's token in kafka mode: unique per
	// order, it names which admission a settle or an event is about.
	CreatedAt time.Time
	ExpiresAt time.Time
	// Position is the order's place among the voucher's admitted reserves
	// (Reservation.Position), kept by a kafka-mode gate from the admission
	// on; 0 in sync mode and in a value written before it was kept.
	Position int
	// Discount is the discount the order's use took from the budget, when
	// the gate keeps it (voucher:{CODE}:orderdiscounts): only for an order
	// whose discount is not the one its amount gives (appliesTo). nil: the
	// amount's (Voucher.DiscountFor), as for every order kept before.
	Discount *int64
}

// OrderDiscount is the discount o's use holds: the gate's record of it,
// else the one its amount gives.
func (v Voucher) OrderDiscount(o GateOrder) int64 {
	if o.Discount != nil {
		return *o.Discount
	}
	return v.DiscountFor(o.OrderAmount)
}

// decidedAtGate reports whether the gate holds the order with its state and
// times (a kafka-mode order, CreatedAt its token), so the gate decides its
// confirm, release and expiry; a sync-mode order's are the database's.
func (o GateOrder) decidedAtGate() bool { return !o.CreatedAt.IsZero() }

// GateStale is admit.lua's verdict for a gate another Redis server holds
// than the one it was loaded on, or that lost data: it is rebuilt first.
const (
	GateStale       GateVerdict = "STALE"
	GatePending     GateVerdict = "PENDING"      // the order's admission is still being settled by its owner
	GateAdopted     GateVerdict = "ADOPTED"      // a pending admission past its lease, now this caller's
	GateLost        GateVerdict = "LOST"         // the database refused the order's event
	GateNotEligible GateVerdict = "NOT_ELIGIBLE" // outside the window or under the minimum, on the gate's clock
	// GateClaimedElsewhere: the orderId is claimed by another voucher
	// (admit.lua claims it itself on a single Redis); nothing was taken.
	GateClaimedElsewhere GateVerdict = "CLAIMED_ELSEWHERE"
)

// Admission is admit.lua's answer: the verdict, the order as the gate holds
// it after the call, and the epoch (the id of the load) the gate was in.
type Admission struct {
	Verdict GateVerdict
	Order   GateOrder
	Epoch   string
	// Claimed: the orderId's claim across vouchers was made in the same
	// script (a single Redis), so the caller needs no ClaimOrder.
	Claimed bool
	// Server is the run_id of the Redis server that decided (and, with
	// Claimed, read the claim).
	Server string
}

// SettleOp is what admission.lua does to a pending admission.
type SettleOp string

// The settle operations (admission.lua).
const (
	SettleFinalize SettleOp = "finalize" // the owner's event was acknowledged
	SettleForget   SettleOp = "forget"   // the owner's publish surely failed
	SettleVoid     SettleOp = "void"     // reconciliation: past its lease
	SettleLose     SettleOp = "lose"     // the database refused its event
	SettleRevive   SettleOp = "revive"   // an operator applies its dead letter again
)

// SettleAnswer is admission.lua's answer.
type SettleAnswer string

// The settle answers.
const (
	SettleOK    SettleAnswer = "OK"
	SettleFail  SettleAnswer = "FAIL"
	SettleStale SettleAnswer = "STALE"
)

// ApplyVerdict is the gate's word on one event before the consumer writes
// it (apply_check.lua).
type ApplyVerdict string

// The apply verdicts.
const (
	ApplyStands    ApplyVerdict = "APPLY"
	ApplySkip      ApplyVerdict = "SKIP"
	ApplyUnchecked ApplyVerdict = "UNCHECKED"
)

// GateTerms are what a gate in kafka mode decides a reserve on, besides
// stock and customers: loaded with every snapshot (load.lua).
type GateTerms struct {
	Epoch          string    // this load's id
	StartsAt       time.Time // the window, on the database's clock
	EndsAt         time.Time
	DatabaseNow    time.Time // the database's clock when the snapshot was read
	MinOrderAmount int64
	TTL            time.Duration // how long a reservation is held
	Lease          time.Duration // how long an owner has to settle its admission
}

// GateSnapshot is what the gate of one flash voucher holds: the remaining
// uses, the uses held per customer and the orders that passed.
type GateSnapshot struct {
	Code         string
	Remaining    int
	PerUserLimit int
	Customers    map[int64]int
	Orders       []GateOrder
	// ExpireAt is when the gate may forget the voucher (after its window).
	ExpireAt time.Time
	// TakenAt is the database's clock when the snapshot was read.
	TakenAt time.Time
	// Epoch is the id of the load the gate holds (kafka mode).
	Epoch string
	// Budget is the budget left (budgetAmount - budgetUsed) of a voucher
	// with one; nil: no budget.
	Budget *int64
	// Room is MoneyRoom(budgetUsed), which the gate keeps as it keeps the
	// budget, for every voucher; nil when a gate read back does not hold it
	// (loaded before it was kept: it then decides without it).
	Room *int64
	// A campaign's gate (IsCampaignGate(Code)) also holds UsesPerCode, the
	// uses held or confirmed of each of its codes that has any (Codes), and
	// the code each live order holds a use of (OrderCodes). Zero and nil for
	// a voucher's.
	UsesPerCode int
	Codes       map[string]int
	OrderCodes  map[string]string
	// Total is the totalLimit Remaining was reckoned from, which the gate
	// keeps so an extension raises it by the difference (Gate.Extend); 0:
	// unknown.
	Total int
	// Version is the gate's load's or last raise's (load.lua, extend.lua),
	// read back from a gate; "" for one loaded before versions were kept.
	Version string
	// Terms, read back from a kafka-mode gate, are the window (on the
	// database's clock) and the minimum it decides on; nil on the sync
	// path, whose gate decides neither.
	Terms *GateTerms
	// Admitted is the last position given among the voucher's admitted
	// reserves (the database's admitted_count): a kafka-mode gate numbers
	// its admissions after it, so a reloaded gate continues the count.
	Admitted int
	// Periods are the counts of the current periods (and those within
	// PeriodNear) of a voucher's period limits, and OrderPeriods the
	// indexes in it of the periods each live order counts in
	// (GatePeriodsOf); nil without limits. Read back from a gate
	// (Gate.Snapshot), Periods holds the periods asked for.
	Periods      []GatePeriodCount
	OrderPeriods map[string][]int
}

// GateExtension is a change of a flash voucher's total or end, already made
// in the database, for its gate to follow.
type GateExtension struct {
	Code                 string
	OldTotal, NewTotal   int
	OldEndsAt, NewEndsAt time.Time
	// ExpireAt is when the gate may forget the voucher after the new end.
	ExpireAt time.Time
}

// GateExpireAt is when a flash voucher's gate may forget it: a week after
// its window, so late confirms and releases still find their orders.
func GateExpireAt(endsAt time.Time) time.Time { return endsAt.Add(7 * 24 * time.Hour) }

// Gate is the Redis gate of flash vouchers: each call is one atomic script.
// Its calls are grouped by who makes them: the sync write path's decisions
// (SyncPathGate), the Kafka write path's (KafkaPathGate) and the
// administration of a gate around either (GateAdmin).
type Gate interface {
	SyncPathGate
	KafkaPathGate
	GateAdmin
}

// SyncPathGate is the sync write path's decisions at the gate
// (flash_sync.go): a reserve, and the use it took given back, forgotten or
// dropped once the database has answered. Release also gives back a use
// the database released on the Kafka write path.
type SyncPathGate interface {
	// Reserve decides one reserve: duplicate orderId, per-customer count,
	// stock, then the budget, which the discount is taken from with the use.
	// On a campaign's gate (IsCampaignGate(code)) r.Code is the campaign
	// code reserved, whose uses the same script counts (GateCodeUsedUp).
	Reserve(ctx context.Context, code string, perUserLimit int, discount int64, r ReserveRequest) (GateVerdict, error)
	// Release gives the order's use (and discount, to the budget) back if the
	// gate holds it live; false when it did not (unknown or already
	// released), so nothing is given back twice.
	Release(ctx context.Context, code, orderID string, discount int64) (bool, error)
	// Forget gives a live order's use back like Release but deletes the
	// order, so a retry of it is decided from scratch.
	Forget(ctx context.Context, code, orderID string, discount int64) (bool, error)
	// Drop deletes an order the database refused as sold out after the gate
	// admitted it, giving its customer's count and discount back but not
	// its use: the gate was a use too high, and is one lower now.
	Drop(ctx context.Context, code, orderID string, discount int64) (bool, error)
	// DropCode deletes an order of a campaign's gate the database refused
	// because its campaign code is used up: everything but the code's use
	// goes back (the gate's count of that code was too low).
	DropCode(ctx context.Context, code, orderID string, discount int64) (bool, error)
}

// KafkaPathGate is the Kafka write path's calls (flash_kafka.go,
// kafka_apply.go): the gate decides every reserve, confirm, release and
// expiry, holds the orderId's claim across vouchers, judges each event
// before the consumer writes it, and is loaded with the terms it decides
// on.
type KafkaPathGate interface {
	// Admit decides a reserve in kafka mode (admit.lua).
	// The discount is taken from the budget, if any, with the use.
	Admit(ctx context.Context, code string, r ReserveRequest, discount int64) (Admission, error)
	// Settle settles a pending admission made in epoch (admission.lua); the
	// order is as the gate holds it after the call.
	// A use given back (forget, void) gives its discount back to the budget.
	Settle(ctx context.Context, code string, op SettleOp, o GateOrder, epoch string, discount int64) (SettleAnswer, GateOrder, error)
	// ReserveTimed is Reserve remembering the order as live with its times.
	ReserveTimed(ctx context.Context, code string, perUserLimit int, discount int64, r ReserveRequest, createdAt, expiresAt time.Time) (GateVerdict, error)
	// Order reads what the gate remembers of an order; ok is false when it
	// does not know the order or holds nothing for the voucher.
	Order(ctx context.Context, code, orderID string) (o GateOrder, ok bool, err error)
	// Confirm decides a confirm (kafka mode) at the gate's own clock, the one
	// expiresAt was set on, so every instance decides the same.
	Confirm(ctx context.Context, code, orderID string) (GateDecision, GateOrder, error)
	// MarkReleased decides a release (expireOnly: an expiry, only once past
	// expiresAt on the gate's clock), keeping the use until the database
	// releases the row.
	MarkReleased(ctx context.Context, code, orderID string, expireOnly bool) (GateDecision, GateOrder, error)
	// ClaimOrder claims an orderId for a voucher across vouchers and returns
	// the voucher holding the claim (code itself when it was free or ours)
	// and the run_id of the Redis server the claim was read on.
	ClaimOrder(ctx context.Context, orderID, code string) (owner, server string, err error)
	// UnclaimOrder drops the voucher's claim on an orderId, if it holds it.
	UnclaimOrder(ctx context.Context, orderID, code string) error
	// OrderOwner reads the voucher holding the claim on an orderId, and the
	// run_id of the Redis server the claim was read on.
	OrderOwner(ctx context.Context, orderID string) (owner string, ok bool, server string, err error)
	// ApplyCheck asks the gate which events of one voucher stand
	// (apply_check.lua), one verdict per event; a confirmed or released
	// event's decision is taken at the gate if it holds the order live. A
	// reserved event the gate re-admits counts its use in periods[i] (the
	// periods of the voucher's limits holding its createdAt), if any.
	ApplyCheck(ctx context.Context, code string, evs []Event, periods [][]GatePeriod) ([]ApplyVerdict, error)
	// Recover installs a snapshot with its kafka-mode terms: mode "recover"
	// only when the gate is not loaded or stale, "replace" over it (a
	// rebuild; a retried call with the same epoch changes nothing), "load"
	// only when nothing is loaded. false when nothing was installed.
	Recover(ctx context.Context, snap GateSnapshot, terms GateTerms, mode string) (bool, error)
	// Healthy reports whether the gate holds the voucher, loaded on the
	// Redis server that now serves it, and that server's id (its run_id:
	// new with every restart and failover).
	Healthy(ctx context.Context, code string) (ok bool, server string, err error)
}

// GateAdmin is the administration of a gate on either write path: its loads
// and rebuilds (and their pauses), what is read of it, reconciliation's
// lock and repair, and an operator's changes of a voucher.
type GateAdmin interface {
	// Load installs a snapshot atomically unless the gate already holds the
	// voucher; false when it did, so two instances warming at once load once.
	Load(ctx context.Context, snap GateSnapshot) (bool, error)
	// Replace installs a snapshot over whatever the gate holds and lifts a pause.
	Replace(ctx context.Context, snap GateSnapshot) error
	// Unload forgets a voucher so the next warm-up rebuilds it from the database.
	Unload(ctx context.Context, code string) error
	// Snapshot reads what the gate holds for a voucher; ok is false when it
	// holds nothing.
	Snapshot(ctx context.Context, code string) (snap GateSnapshot, ok bool, err error)
	// Remaining reads the gate's counter; ok is false when it holds nothing.
	Remaining(ctx context.Context, code string) (n int, ok bool, err error)
	// Availability reads, at one moment, the uses left, the customer's uses
	// and the budget left; loaded is false when the gate holds nothing. On
	// a campaign's gate, the uses left are at most campaignCode's. periods
	// (those of the voucher's period limits holding now) fill PeriodUses.
	Availability(ctx context.Context, code, campaignCode string, customerID int64, periods ...GatePeriod) (a Availability, loaded bool, err error)
	// Version reads the version of the gate's load or last raise.
	Version(ctx context.Context, code string) (string, error)
	// PeriodCounts reads the gate's counts of periods (of the voucher's
	// period limits) and, for each of orderIDs, the indexes in periods of
	// those its use counts in (reconciliation).
	PeriodCounts(ctx context.Context, code string, periods []GatePeriod, orderIDs []string) ([]GatePeriodCount, map[string][]int, error)
	// Lower takes up to n uses off the counter (never below zero) and returns
	// what remains: reconciliation's only automatic repair of the count.
	// Only while the gate's version is version (Version, GateSnapshot):
	// lowered is false, nothing changed, when it was loaded again or raised
	// since the drift was reckoned.
	Lower(ctx context.Context, code string, n int, version string) (left int, lowered bool, err error)
	// LockReconcile takes the voucher's reconciliation lock across every
	// instance, renewed until unlock (a holder that dies keeps it ttl at
	// most); ok is false while another pass holds it. unlock gives it back
	// (only this holder's).
	LockReconcile(ctx context.Context, code string, ttl time.Duration) (unlock func(), ok bool, err error)
	// Pause makes Reserve answer PAUSED until Replace, or until ttl passes
	// unless HoldPause extends it.
	Pause(ctx context.Context, code string, ttl time.Duration) error
	// HoldPause makes a pause last ttl from now, only while it is there:
	// held is false when it was lifted or lapsed.
	HoldPause(ctx context.Context, code string, ttl time.Duration) (held bool, err error)
	// KeepPaused holds a pause for ttl every third of it until stop, while
	// it is there.
	KeepPaused(ctx context.Context, code string, ttl time.Duration) (stop func())
	// MarkerPending notes that the marker of a kafka-mode rebuild with
	// epoch is about to be published: the pause then lasts until the
	// consumer's reload at the last such marker, or ttl.
	MarkerPending(ctx context.Context, code, epoch string, ttl time.Duration) error
	// MarkerDropped takes back MarkerPending for a marker that was surely
	// not published.
	MarkerDropped(ctx context.Context, code, epoch string) error
	// End closes the voucher's window at the gate now (kafka mode decides
	// the window there).
	End(ctx context.Context, code string) error
	// Extend makes the gate follow a total raised or an end moved later in
	// the database: the stock gets exactly the difference, atomically;
	// false when the gate holds nothing (its next load reads the change).
	Extend(ctx context.Context, x GateExtension) (bool, error)
	// AnnounceReleased tells every instance that a use of the voucher was
	// given back, so each drops its sold-out snapshot of it.
	AnnounceReleased(ctx context.Context, code string) error
}

// PendingWrites is the Kafka write path's view of admitted reserves whose
// database write is still on its way.
type PendingWrites interface {
	// Settle waits until every write produced before the call is applied.
	Settle(ctx context.Context) error
}
