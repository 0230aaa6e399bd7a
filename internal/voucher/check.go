package voucher

import (
	"context"
	"time"
)

// CheckRequest asks what a reserve now would answer, holding nothing.
type CheckRequest struct {
	Code        string
	CustomerID  int64
	OrderAmount int64
	Currency    string // optional, as in ReserveRequest
	// CustomerSegments and Items: as in ReserveRequest.
	CustomerSegments []string
	Items            []LineItem
}

// reserve is the reserve the check asks about (without an orderId).
func (c CheckRequest) reserve() ReserveRequest {
	return ReserveRequest{Code: c.Code, CustomerID: c.CustomerID, OrderID: "check", OrderAmount: c.OrderAmount, Currency: c.Currency,
		CustomerSegments: c.CustomerSegments, Items: c.Items}
}

// Validate returns INVALID_INPUT naming the first field at fault: the
// reserve's rules, without an orderId.
func (c CheckRequest) Validate() error {
	return c.reserve().Validate()
}

// Availability is what a check is decided on besides the voucher's terms:
// the uses left, the customer's uses held and the budget left (nil: no
// budget), as the database or a flash voucher's gate holds them now.
type Availability struct {
	Remaining    int
	CustomerUses int
	BudgetLeft   *int64
	// Room is MoneyRoom of the voucher's budgetUsed: the discount its sum
	// can still take; nil when unknown (a gate loaded before it kept it).
	Room *int64
	// CodeRemaining is a campaign code's own uses left, when they are read
	// apart from the campaign's (a flash campaign's gate); nil otherwise.
	CodeRemaining *int
	// PeriodUses counts the uses held in the current period of each of the
	// voucher's period limits (nil: it has none).
	PeriodUses PeriodUses
}

// Check answers a check as a reserve would decide it at now, in the
// reserve's order of rules (the orderId's aside): NOT_ELIGIBLE (currency,
// window, minimum, segments, items), ALREADY_USED, PERIOD_LIMIT_REACHED,
// OUT_OF_STOCK, INVALID_INPUT for a
// discount the voucher's sum cannot take (Voucher.BudgetRefusal),
// BUDGET_EXHAUSTED; else the
// discount the reserve would hold.
func (v Voucher) Check(now time.Time, c CheckRequest, a Availability) (int64, error) {
	r := c.reserve()
	r.Code = v.Code
	if err := v.CheckEligible(now, r); err != nil {
		return 0, err
	}
	if a.CustomerUses >= v.PerUserLimit {
		return 0, Errorf(AlreadyUsed, "customer %d already holds %d use(s) of voucher %s", c.CustomerID, v.PerUserLimit, v.Code)
	}
	if err := v.checkPeriods(now, a.PeriodUses); err != nil {
		return 0, err
	}
	if a.Remaining <= 0 || a.CodeRemaining != nil && *a.CodeRemaining <= 0 {
		return 0, Errorf(OutOfStock, "voucher %s is sold out", v.Code)
	}
	discount := v.DiscountOf(r)
	if a.Room != nil && discount > *a.Room {
		return 0, SumTooLarge()
	}
	if a.BudgetLeft != nil && discount > *a.BudgetLeft {
		return 0, Errorf(BudgetExhausted, "the budget of voucher %s cannot cover a discount of %d", v.Code, discount)
	}
	return discount, nil
}

// CheckVoucher answers what a reserve now would: the discount it would
// hold, or the code it would be refused with. It is advice (the reserve
// decides) and holds nothing. An ordinary voucher is read from the
// database; a flash voucher from its gate (or this instance's sold-out
// snapshot), never its hot row, so a stampede of checks costs what a
// sold-out reserve does. Errors: INVALID_INPUT, NOT_FOUND, NOT_ELIGIBLE,
// ALREADY_USED, PERIOD_LIMIT_REACHED, OUT_OF_STOCK, BUDGET_EXHAUSTED,
// UNAVAILABLE.
func (s *Service) CheckVoucher(ctx context.Context, c CheckRequest) (int64, error) {
	if err := authorize(ctx, OpCheckout); err != nil {
		return 0, err
	}
	if err := c.Validate(); err != nil {
		return 0, err
	}
	c.Code = upperCode(c.Code)
	// The terms a reserve would take: a flash voucher's, or a READY flash
	// campaign's for one of its codes (decided at the campaign's gate, which
	// holds the code's uses with the campaign's); anything else is read
	// from the database.
	v, flash, err := s.flash.reserveTerms(ctx, c.Code)
	if err != nil {
		return 0, err
	}
	if flash {
		return s.checkAtGate(ctx, v, c)
	}
	v, now, a, err := s.store.Availability(ctx, c.Code, c.CustomerID)
	if err != nil {
		return 0, err
	}
	return v.Check(now, c, a)
}

// checkAtGate decides a flash voucher's check from the sold-out snapshot or
// the gate, on this instance's clock as the sync path's reserve does.
func (s *Service) checkAtGate(ctx context.Context, v Voucher, c CheckRequest) (int64, error) {
	now := clockNow()
	gk := gateCode(v) // a campaign code's campaign's gate
	if uses, ok := s.soldOut.customerUses(gk, c.CustomerID); ok && v.soldOutMemoryAnswers(gk) {
		return v.Check(now, c, Availability{CustomerUses: uses})
	}
	// The counts of the periods holding now, as the sync path's reserve
	// counts at this instance's now.
	periods := v.gatePeriods(now, false)
	a, loaded, err := s.gate.Availability(ctx, gk, v.Code, c.CustomerID, periods...)
	if err == nil && !loaded {
		if err = s.flashFor(gk).warm(ctx, gk); err == nil {
			a, loaded, err = s.gate.Availability(ctx, gk, v.Code, c.CustomerID, periods...)
		}
	}
	if err != nil {
		return 0, unavailable(err)
	}
	if !loaded {
		return 0, Errorf(Unavailable, "the sale of %s is being prepared; check again shortly", v.Code)
	}
	if a.Remaining <= 0 {
		// Sold out: the late crowd's next checks, like its reserves, are
		// answered from this instance's snapshot, not the gate.
		s.noteSoldOut(ctx, gk)
	}
	return v.Check(now, c, a)
}
