package voucher

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxLimit is the largest totalLimit or perUserLimit: the database keeps
// them (and the counts under them) as 32-bit integers, and GraphQL's Int is
// 32 bits. A larger one is INVALID_INPUT, never wrapped.
const MaxLimit = math.MaxInt32

// Status is the state of a reservation: RESERVED -> CONFIRMED, or
// RESERVED -> RELEASED, and CONFIRMED -> ROLLED_BACK (a refund). Nothing
// leaves RELEASED or ROLLED_BACK.
type Status string

// The reservation states.
const (
	StatusReserved  Status = "RESERVED"
	StatusConfirmed Status = "CONFIRMED"
	StatusReleased  Status = "RELEASED"
	// StatusRolledBack is a confirmed use given back (a payment refunded, an
	// order cancelled after it was paid): it holds no use, as a released one.
	StatusRolledBack Status = "ROLLED_BACK"
)

// HoldsUse reports whether a reservation in this state holds a use of its
// voucher (counts in usedCount, the customer's count and the budget).
func (s Status) HoldsUse() bool { return s == StatusReserved || s == StatusConfirmed }

// Path says how a change reached the database, for the audit log and metrics.
type Path string

// The write paths.
const (
	PathDatabase Path = "database"  // an ordinary voucher: the conditional update alone
	PathGateSync Path = "gate-sync" // a flash winner written in the request
	PathKafka    Path = "kafka"     // a flash winner written by the consumer
	PathExpiry   Path = "expiry"    // the expiry sweep, or a confirm that found it expired
)

// DiscountType says how a voucher's discount is reckoned from an order.
type DiscountType string

// The discount types.
const (
	// DiscountFixed takes DiscountAmount off, never more than the order.
	DiscountFixed DiscountType = "FIXED"
	// DiscountPercent takes DiscountPercent of the order, rounded down to
	// a minor unit, at most MaxDiscountAmount when set.
	DiscountPercent DiscountType = "PERCENT"
)

// Voucher is a discount with a limited number of uses.
type Voucher struct {
	Code         string
	DiscountType DiscountType
	// DiscountAmount is a FIXED voucher's discount; 0 for PERCENT.
	DiscountAmount int64
	// DiscountPercent is a PERCENT voucher's 1-100; 0 for FIXED.
	DiscountPercent int
	// MaxDiscountAmount caps a PERCENT voucher's discount; nil: no cap.
	MaxDiscountAmount *int64
	// Currency is the ISO 4217 code the amounts are minor units of.
	Currency string
	// BudgetAmount bounds the sum of the discounts held and confirmed;
	// nil: no budget. BudgetUsed is that sum, per the database.
	BudgetAmount   *int64
	BudgetUsed     int64
	MinOrderAmount int64
	TotalLimit     int
	PerUserLimit   int
	UsedCount      int // RESERVED + CONFIRMED, per the database
	ReservedCount  int
	ConfirmedCount int
	// RolledBackCount counts the uses confirmed and then rolled back; they
	// count in neither UsedCount nor ConfirmedCount.
	RolledBackCount int
	StartsAt        time.Time
	EndsAt          time.Time
	Flash           bool
	CreatedAt       time.Time
	// CampaignID is the campaign a code belongs to (its counts are then the
	// code's own, its terms the campaign's); 0 for a standalone voucher.
	CampaignID int64
	// Restrictions are its period limits, segments and items.
	Restrictions
}

// Remaining is how many uses are neither held nor sold.
func (v Voucher) Remaining() int { return v.TotalLimit - v.UsedCount }

// BudgetCovers reports whether the budget left (budgetUsed of it spent)
// covers a discount; always true without a budget.
func (v Voucher) BudgetCovers(budgetUsed, discount int64) bool {
	return v.BudgetAmount == nil || discount <= *v.BudgetAmount-budgetUsed
}

// DiscountFor is the discount a reservation of an order of orderAmount (>= 0)
// holds: the one place it is reckoned, on every path. FIXED: the amount, at
// most the order; PERCENT: the percentage rounded down to a minor unit, at
// most the cap. A reservation keeps the figure it got.
func (v Voucher) DiscountFor(orderAmount int64) int64 {
	if v.DiscountType == DiscountPercent {
		// floor(a * p / 100) without overflow: a = 100q + r, so it is
		// q*p + floor(r*p/100), and q*p <= a since p <= 100.
		p := int64(v.DiscountPercent)
		d := orderAmount/100*p + orderAmount%100*p/100
		if v.MaxDiscountAmount != nil {
			d = min(d, *v.MaxDiscountAmount)
		}
		return d
	}
	return min(v.DiscountAmount, orderAmount)
}

// CheckCurrency returns NOT_ELIGIBLE when a request names a currency other
// than the voucher's (none named: the voucher's).
func (v Voucher) CheckCurrency(currency string) error {
	if currency != "" && currency != v.Currency {
		return Errorf(NotEligible, "voucher %s is for orders in %s, not %s", v.Code, v.Currency, currency)
	}
	return nil
}

// CheckEligible returns NOT_ELIGIBLE when the request names another currency,
// now is outside the voucher's window, the order is below its minimum, the
// customer is in none of its segments or no item is one it applies to.
func (v Voucher) CheckEligible(now time.Time, r ReserveRequest) error {
	if err := v.CheckCurrency(r.Currency); err != nil {
		return err
	}
	orderAmount := r.OrderAmount
	if now.Before(v.StartsAt) {
		return Errorf(NotEligible, "voucher %s is not valid before %s", v.Code, v.StartsAt.UTC().Format(time.RFC3339))
	}
	if now.After(v.EndsAt) {
		return Errorf(NotEligible, "voucher %s expired at %s", v.Code, v.EndsAt.UTC().Format(time.RFC3339))
	}
	if orderAmount < v.MinOrderAmount {
		return Errorf(NotEligible, "order amount %d is below the minimum %d", orderAmount, v.MinOrderAmount)
	}
	return v.checkOrderLines(r.CustomerSegments, r.Items)
}

// NewVoucher is what a marketer gives to create a voucher.
type NewVoucher struct {
	Code string
	// DiscountType: empty is FIXED.
	DiscountType DiscountType
	// DiscountAmount: FIXED only (> 0); DiscountPercent: PERCENT only (1-100).
	DiscountAmount    int64
	DiscountPercent   int
	MaxDiscountAmount *int64 // PERCENT only; nil: no cap
	// Currency: ISO 4217; empty takes the service's default.
	Currency string
	// BudgetAmount (> 0) bounds the discounts held and confirmed; nil: none.
	BudgetAmount   *int64
	MinOrderAmount int64
	TotalLimit     int
	PerUserLimit   int
	StartsAt       time.Time
	EndsAt         time.Time
	Flash          bool
	// Restrictions: period limits, segments, items; fixed at creation.
	Restrictions
}

// newVoucherFields is the order in which Validate reports fields at fault.
var newVoucherFields = []string{"code", "discountType", "discountAmount", "discountPercent", "maxDiscountAmount", "currency", "budgetAmount", "minOrderAmount", "totalLimit", "perUserLimit", "startsAt", "endsAt", "periodLimits", "timeZone", "eligibleSegments", "appliesTo"}

// Validate returns INVALID_INPUT naming the first field at fault (FieldErrors
// has the rules and every message).
func (n NewVoucher) Validate() error {
	errs := n.FieldErrors()
	for _, field := range newVoucherFields {
		if msg, ok := errs[field]; ok {
			return Invalid(field, msg)
		}
	}
	return nil
}

// Reservation is one use of a voucher held for, or sold to, one order.
type Reservation struct {
	OrderID        string
	VoucherCode    string
	CustomerID     int64
	OrderAmount    int64
	DiscountAmount int64
	Status         Status
	CreatedAt      time.Time
	ExpiresAt      time.Time
	ConfirmedAt    *time.Time
	ReleasedAt     *time.Time
	// RolledBackAt and RollbackReason are set by a rollback (the reason
	// only when one was given).
	RolledBackAt   *time.Time
	RollbackReason string
	// Position is its place among the voucher's admitted reserves (a
	// campaign's, for a campaign code): 1 for the first use ever taken,
	// fixed when the use is taken, never reused after a release. 0: not
	// known (a reservation answered from a gate loaded before positions
	// were kept).
	Position int
}

// ReserveRequest asks to hold one use of a voucher for an order.
type ReserveRequest struct {
	Code        string
	CustomerID  int64
	OrderID     string
	OrderAmount int64
	// Currency, when given, must be the voucher's (else NOT_ELIGIBLE).
	Currency string
	// CustomerSegments are the segments the storefront knows the customer
	// is in (a voucher with eligibleSegments needs one of them).
	CustomerSegments []string
	// Items are the order's lines (nil: not given); their quantity x
	// unitAmount add up to OrderAmount.
	Items []LineItem
	// PeriodAt and GatePeriods are a flash path's, for a voucher with period
	// limits (Voucher.withPeriods): the moment the gate counts the use at
	// and the periods it may count it in. On the sync path the database
	// writes the reservation's createdAt = PeriodAt, so the database counts
	// (and later gives back) the use in the very period the gate counted.
	// Zero otherwise: the database's clock is the createdAt.
	PeriodAt    time.Time
	GatePeriods []GatePeriod
	// GateKeepsDiscount is a flash path's: the reserve's discount
	// (DiscountOf) is not the one its amount gives (appliesTo), so the gate
	// keeps it with the order for its give-backs (prelude.lua's
	// order_discount).
	GateKeepsDiscount bool
}

// Validate returns INVALID_INPUT naming the first field at fault.
func (r ReserveRequest) Validate() error {
	if err := ValidateCode(r.Code); err != nil {
		return err
	}
	if r.CustomerID <= 0 {
		return Invalid("customerId", "customerId must be a positive 64-bit integer")
	}
	if err := ValidateOrderID(r.OrderID); err != nil {
		return err
	}
	if err := ValidateMoney("orderAmount", r.OrderAmount, 0); err != nil {
		return err
	}
	if r.Currency != "" {
		if err := ValidateCurrency(r.Currency); err != nil {
			return err
		}
	}
	if r.CustomerSegments != nil || r.Items != nil {
		return validateOrderLines(r.CustomerSegments, r.Items, r.OrderAmount)
	}
	return nil
}

// Retry applies the contract's rule 2 to an orderId that was reserved before:
// the same code, customer and amount get the earlier reservation back (or
// RESERVATION_RELEASED once it is released); anything else is ORDER_CONFLICT.
// It does not look at the clock: RetryAt does.
func (r ReserveRequest) Retry(earlier Reservation) (Reservation, error) {
	return r.RetryAt(earlier, time.Time{})
}

// RetryAt is Retry by the clock that decides confirms (the database's): a
// reservation still RESERVED at or past its expiresAt, its sweep not yet
// run, is RESERVATION_RELEASED, as its confirm is. Before, a retry got it
// back RESERVED with an expiresAt already gone a moment after its confirm
// was refused (explorer seed 165). A zero now skips the check.
func (r ReserveRequest) RetryAt(earlier Reservation, now time.Time) (Reservation, error) {
	if earlier.VoucherCode != r.Code || earlier.CustomerID != r.CustomerID || earlier.OrderAmount != r.OrderAmount {
		return Reservation{}, Errorf(OrderConflict, "order %s was already used with another voucher, customer or amount", r.OrderID)
	}
	switch earlier.Status {
	case StatusReleased:
		return Reservation{}, Errorf(ReservationReleased, "the reservation for order %s was released", r.OrderID)
	case StatusRolledBack:
		// Its use was given back: the orderId cannot take another.
		return Reservation{}, Errorf(ReservationReleased, "the reservation for order %s was rolled back", r.OrderID)
	}
	if earlier.Status == StatusReserved && !now.IsZero() && !now.Before(earlier.ExpiresAt) {
		return Reservation{}, Errorf(ReservationReleased, "the reservation for order %s expired at %s", r.OrderID, earlier.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return earlier, nil
}

// ValidateCode checks a voucher code: 1-32 characters of A-Z a-z 0-9 _ -.
// A byte loop rather than a regexp: it runs on every reserve, and the
// characters allowed are all one byte, so bytes and characters agree.
func ValidateCode(code string) error {
	ok := len(code) >= 1 && len(code) <= 32
	for i := 0; ok && i < len(code); i++ {
		c := code[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if !ok {
		return Invalid("code", "code must be 1-32 characters of A-Z, a-z, 0-9, _ and -")
	}
	return nil
}

// CanonicalCode checks a voucher code as a caller gave it and returns it as
// it is stored: in capital letters, since codes are case-insensitive (a
// customer types winter25 for WINTER25). Every operation that takes a code
// calls it once, where the code enters the service, so stores, the gate's
// Redis keys and events only ever see the stored form.
func CanonicalCode(code string) (string, error) {
	if err := ValidateCode(code); err != nil {
		return "", err
	}
	return upperCode(code), nil
}

// upperCode capitalises a valid code (ASCII only), without allocating when
// it is in capitals already (a reserve's usual case).
func upperCode(code string) string {
	for i := 0; i < len(code); i++ {
		if c := code[i]; c >= 'a' && c <= 'z' {
			return strings.ToUpper(code)
		}
	}
	return code
}

// ValidateOrderID checks an orderId: 1-64 characters of valid UTF-8 with no
// control characters (the database could not store a NUL byte).
func ValidateOrderID(orderID string) error {
	if err := ValidateText("orderId", orderID); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(orderID); n < 1 || n > 64 {
		return Invalid("orderId", "orderId must be 1-64 characters")
	}
	for _, c := range orderID {
		if unicode.IsControl(c) {
			return Invalid("orderId", "orderId must not contain control characters")
		}
	}
	return nil
}

// ValidateRollbackReason checks a rollback's reason, when one is given:
// 1-200 characters of text, no control characters.
func ValidateRollbackReason(reason *string) error {
	if reason == nil {
		return nil
	}
	if err := ValidateText("reason", *reason); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(*reason); n < 1 || n > 200 {
		return Invalid("reason", "reason must be 1-200 characters")
	}
	for _, c := range *reason {
		if unicode.IsControl(c) {
			return Invalid("reason", "reason must not contain control characters")
		}
	}
	return nil
}

// ValidateText checks that a string given as the field is valid UTF-8
// without a NUL: text is kept as its bytes, never repaired, so two inputs
// that differ in any byte stay two inputs (a transport that decodes must
// refuse what its decoder would have replaced, before it replaces it).
func ValidateText(field, s string) error {
	if !utf8.ValidString(s) {
		return Invalid(field, field+" must be valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return Invalid(field, field+" must not contain a NUL character")
	}
	return nil
}

// ParseCustomerID reads a customerId given as decimal digits.
func ParseCustomerID(s string) (int64, error) {
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, Invalid("customerId", "customerId must be the decimal digits of a positive 64-bit integer")
		}
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, Invalid("customerId", "customerId must be the decimal digits of a positive 64-bit integer")
	}
	return id, nil
}
