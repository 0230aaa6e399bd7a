package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"voucherd/internal/voucher"
	"voucherd/sql/db"
)

// The two writers of a reserve, one per rule, over one set of queries per
// table (the ...Many ones; a single reserve is a batch of one):
//
//   - takeUses: the database decides (a reserve on the database path, the
//     sync flash path's admitted winners). Each statement checks its rule by
//     the database's clock and takes a use only where the rule allows it.
//   - recordUses: the gate decided (the Kafka consumer's reserved events).
//     The statements count what the gate took, whatever the clock; the CHECK
//     constraints still bound every count.
//
// Both take their locks in reserve's one order: the orders' rows
// (voucher_redemption), the customers' counts (voucher_customer), the
// period counts (voucher_period_use, takeUses only), the events
// (reservation_event), the campaign codes' counts (voucher_code), then the
// voucher's hot row (voucher) last, so its lock is held only for its update
// and the commit. Each set in a fixed order (order id, customer, code), so
// two writers never wait on each other in a cycle.

// claim is one reserve for takeUses: its order, customer, amount, the
// discount the voucher's terms give it (Voucher.DiscountFor) and the code it
// was made with (a campaign's code, else the voucher's own).
type claim struct {
	orderID    string
	customerID int64
	amount     int64
	discount   int64
	code       string
	// createdAt, when not zero, is the reservation's createdAt: the moment
	// the flash gate counted the use's period limits at
	// (ReserveRequest.PeriodAt). Zero: the database's clock.
	createdAt time.Time
}

// takeRule is the rule that kept takeUses from taking every claim.
type takeRule int

const (
	// byCustomer: a customer would pass their per-customer limit.
	byCustomer takeRule = iota + 1
	// byPeriod: a period of a period limit has fewer uses left than claims
	// in it (takeRefused.refusal says which and until when).
	byPeriod
	// byCode: a campaign code has fewer uses left than claims on it.
	byCode
	// bySum: the claims' discounts together would take budgetUsed past
	// voucher.MaxMoney by the row read before the update.
	bySum
	// byVoucher: the voucher's conditional update took nothing (fewer uses
	// left than claims, the budget, or the window by the database's clock).
	byVoucher
)

// takeRefused: takeUses took nothing (the caller rolls back); suspects[i]
// says which claims the rule refused (byCustomer, byCode, bySum), so a batch
// writes the others together and those alone, each getting its own answer.
type takeRefused struct {
	rule     takeRule
	suspects []bool
	// refusal is a byPeriod claim's answer (PERIOD_LIMIT_REACHED).
	refusal *voucher.Error
}

func (e *takeRefused) Error() string {
	return fmt.Sprintf("postgres: the claims cannot all be taken (rule %d)", e.rule)
}

// takeUses is the writer of reserves the database decides, in the caller's
// transaction: it claims the orderIds the voucher's terms admit (window and
// minimum by the database's clock; an order already held, or not eligible,
// gets no row and is left out) and takes a use of each claimed one from its
// customer, its campaign code and the voucher owner (the voucher row the uses
// count on: the code's own, or its campaign's; campaign says which). It
// returns the claimed rows by order id, or *takeRefused when a rule refused
// some of them (nothing taken; the caller rolls back). v is the owner's row
// as read in this transaction (its budgetUsed bounds the batch's sum).
func takeUses(ctx context.Context, q *db.Queries, owner string, campaign bool, v voucher.Voucher, ttl time.Duration, path voucher.Path, claims []claim) (map[string]db.VoucherRedemption, error) {
	orderIDs := make([]string, len(claims))
	customerIDs := make([]int64, len(claims))
	amounts := make([]int64, len(claims))
	discounts := make([]int64, len(claims))
	codes := make([]string, len(claims))
	created := make([]int64, len(claims))
	for i, c := range claims {
		orderIDs[i], customerIDs[i], amounts[i], discounts[i], codes[i] = c.orderID, c.customerID, c.amount, c.discount, c.code
		if !c.createdAt.IsZero() {
			created[i] = c.createdAt.UnixMilli()
		}
	}
	var claimed []db.VoucherRedemption
	var err error
	if campaign {
		claimed, err = q.CampaignRedemptionClaimEligible(ctx, db.CampaignRedemptionClaimEligibleParams{
			Code: owner, TtlMs: ttl.Milliseconds(), OrderIds: orderIDs, CampaignCodes: codes, CustomerIds: customerIDs,
			OrderAmounts: amounts, DiscountAmounts: discounts, CreatedMs: created,
		})
	} else {
		claimed, err = q.VoucherRedemptionClaimEligible(ctx, db.VoucherRedemptionClaimEligibleParams{
			Code: owner, TtlMs: ttl.Milliseconds(), OrderIds: orderIDs, CustomerIds: customerIDs, OrderAmounts: amounts,
			DiscountAmounts: discounts, CreatedMs: created,
		})
	}
	if err != nil || len(claimed) == 0 {
		return nil, err
	}
	rows := make(map[string]db.VoucherRedemption, len(claimed))
	for _, row := range claimed {
		rows[row.OrderID] = row
	}
	// suspectsOf marks the claims whose row is claimed and refused says so.
	suspectsOf := func(refused func(row db.VoucherRedemption) bool) []bool {
		s := make([]bool, len(claims))
		for i, c := range claims {
			row, ok := rows[c.orderID]
			s[i] = ok && refused(row)
		}
		return s
	}

	u := usesOf(len(claimed), func(i int) (string, int64) { return claimed[i].OrderID, claimed[i].CustomerID })
	taken, err := q.VoucherCustomerUsesTake(ctx, db.VoucherCustomerUsesTakeParams{Code: owner, CustomerIds: u.customers, Uses: u.uses})
	if err != nil {
		return nil, err
	}
	if len(taken) != len(u.customers) {
		ok := make(map[int64]bool, len(taken))
		for _, c := range taken {
			ok[c] = true
		}
		return nil, &takeRefused{rule: byCustomer, suspects: suspectsOf(func(row db.VoucherRedemption) bool { return !ok[row.CustomerID] })}
	}
	// The period counts after the customers' (ALREADY_USED is checked
	// first), in the period of each row's created_at.
	if over, refusal, err := takePeriodUses(ctx, q, owner, v, claims, rows); err != nil {
		return nil, err
	} else if refusal != nil {
		return nil, &takeRefused{rule: byPeriod, suspects: over, refusal: refusal}
	}
	if err := q.ReservationEventInsertMany(ctx, db.ReservationEventInsertManyParams{
		Kind: "reserved", Path: string(path), OrderIds: u.orderIDs, Codes: slices.Repeat([]string{owner}, len(u.orderIDs)), CustomerIds: u.orderCustomers,
	}); err != nil {
		return nil, err
	}
	if campaign {
		// The codes' uses before the campaign's row: two customers on one
		// code queue there, not on the campaign.
		over, err := takeCodeUses(ctx, q, claims, rows)
		if err != nil {
			return nil, err
		}
		if over != nil {
			return nil, &takeRefused{rule: byCode, suspects: over}
		}
	}
	// The hot row last. Discounts that would together take budgetUsed past
	// voucher.MaxMoney (by the row read before; the update decides under
	// its lock) are each decided alone: some of them may fit. A single
	// reserve goes to the update, which decides.
	discountsOf := make([]int64, len(claimed))
	for i, row := range claimed {
		discountsOf[i] = row.DiscountAmount
	}
	held, ok := voucher.SumMoney(discountsOf...)
	if len(claims) > 1 && (!ok || held > voucher.MoneyRoom(v.BudgetUsed)) {
		all := make([]bool, len(claims))
		for i := range all {
			all[i] = true
		}
		return nil, &takeRefused{rule: bySum, suspects: all}
	}
	// The rows are numbered in the claims' order (a batch's is its queue's)
	// by the statement that takes their uses, under the row's lock.
	numbered := make([]string, 0, len(claimed))
	seen := make(map[string]bool, len(claimed))
	for _, c := range claims {
		if _, ok := rows[c.orderID]; ok && !seen[c.orderID] {
			seen[c.orderID] = true
			numbered = append(numbered, c.orderID)
		}
	}
	last, err := q.VoucherUsesTake(ctx, db.VoucherUsesTakeParams{Code: owner, N: limit32(len(claimed)), Discount: held, MaxMoney: voucher.MaxMoney, OrderIds: numbered})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &takeRefused{rule: byVoucher}
	} else if err != nil {
		return nil, err
	}
	for i, id := range numbered {
		row := rows[id]
		row.Position = last - limit32(len(numbered)) + limit32(i+1)
		rows[id] = row
	}
	return rows, nil
}

// takeCodeUses holds the campaign codes' uses of the claimed rows, the codes
// locked in code order first (the order of every writer of several codes).
// When a code has fewer uses left than claimed rows, it takes nothing and
// returns which claims are past their code's uses, in claims' order (the
// caller rolls back; the others can be written together).
func takeCodeUses(ctx context.Context, q *db.Queries, claims []claim, rows map[string]db.VoucherRedemption) ([]bool, error) {
	uses := map[string]int32{}
	for _, row := range rows {
		if row.CampaignCode != nil {
			uses[*row.CampaignCode]++
		}
	}
	var take db.CampaignCodeUsesTakeParams
	for _, code := range slices.Sorted(maps.Keys(uses)) {
		take.Codes = append(take.Codes, code)
		take.Uses = append(take.Uses, uses[code])
	}
	locked, err := q.CampaignCodeLockMany(ctx, take.Codes)
	if err != nil {
		return nil, err
	}
	left := make(map[string]int32, len(locked))
	short := false
	for _, c := range locked {
		left[c.Code] = c.UsesLeft
		short = short || c.UsesLeft < uses[c.Code]
	}
	if short || len(locked) != len(take.Codes) {
		over := make([]bool, len(claims))
		for i, c := range claims {
			row, ok := rows[c.orderID]
			if !ok || row.CampaignCode == nil {
				continue
			}
			code := *row.CampaignCode
			if left[code] > 0 {
				left[code]--
			} else {
				over[i] = true
			}
		}
		return over, nil
	}
	taken, err := q.CampaignCodeUsesTake(ctx, take)
	if err != nil {
		return nil, err
	}
	if len(taken) != len(take.Codes) {
		// Not after the locked read above; the CHECK's twin, kept so
		// that a code's limit holds whatever that read said.
		return nil, errors.New("campaign code uses changed under their lock")
	}
	return nil, nil
}

// recordUses is the writer of reserves the gate decided, in the caller's
// transaction: a row, a customer use and a voucher use for each event (all
// of voucher code; every event carries its whole reservation, so a confirmed
// or released one makes the row its reserved one would have made) whose
// order the database does not hold yet,
// with the times the gate gave it; one update of the voucher's row for them
// all. It returns the orders it made rows for; the others were held already.
// errSumTooLarge: the discounts would take budgetUsed past voucher.MaxMoney.
func recordUses(ctx context.Context, q *db.Queries, code string, evs []voucher.Event) (map[string]bool, error) {
	p := db.VoucherRedemptionInsertManyParams{
		Code:            code,
		OrderIds:        make([]string, len(evs)),
		CustomerIds:     make([]int64, len(evs)),
		OrderAmounts:    make([]int64, len(evs)),
		DiscountAmounts: make([]int64, len(evs)),
		CreatedAts:      make([]time.Time, len(evs)),
		ExpiresAts:      make([]time.Time, len(evs)),
		Positions:       make([]int32, len(evs)),
	}
	for i, ev := range evs {
		if ev.Code != code {
			return nil, fmt.Errorf("postgres: a batch holds events of one voucher (%s)", ev)
		}
		p.OrderIds[i], p.CustomerIds[i], p.OrderAmounts[i] = ev.OrderID, ev.CustomerID, ev.OrderAmount
		p.DiscountAmounts[i], p.CreatedAts[i], p.ExpiresAts[i] = ev.DiscountAmount, ev.CreatedAt, ev.ExpiresAt
		p.Positions[i] = limit32(ev.Position)
	}
	made, err := q.VoucherRedemptionInsertMany(ctx, p)
	if err != nil || len(made) == 0 {
		return nil, err
	}
	orders := make(map[string]bool, len(made))
	for _, m := range made {
		orders[m.OrderID] = true
	}
	u := usesOf(len(made), func(i int) (string, int64) { return made[i].OrderID, made[i].CustomerID })
	if err := q.VoucherCustomerUsesRecord(ctx, db.VoucherCustomerUsesRecordParams{Code: code, CustomerIds: u.customers, Uses: u.uses}); err != nil {
		return nil, err
	}
	if err := recordPeriodUses(ctx, q, code, evs, orders); err != nil {
		return nil, err
	}
	if err := q.ReservationEventInsertMany(ctx, db.ReservationEventInsertManyParams{
		Kind: "reserved", Path: string(voucher.PathKafka), OrderIds: u.orderIDs, Codes: slices.Repeat([]string{code}, len(u.orderIDs)), CustomerIds: u.orderCustomers,
	}); err != nil {
		return nil, err
	}
	// The hot row last. A sum that does not fit (voucher.SumMoney), or
	// would take budgetUsed past voucher.MaxMoney, takes nothing.
	discountsOf := make([]int64, len(made))
	for i, m := range made {
		discountsOf[i] = m.DiscountAmount
	}
	discounts, ok := voucher.SumMoney(discountsOf...)
	if !ok {
		return nil, errSumTooLarge
	}
	// The gate's places are kept; the rows of events that carry none (made
	// before the gate kept them) are numbered after the highest, in the
	// events' order.
	var highest int32
	var unnumbered []string
	for _, m := range made {
		highest = max(highest, m.Position)
	}
	for _, ev := range evs {
		if ev.Position == 0 && orders[ev.OrderID] && !slices.Contains(unnumbered, ev.OrderID) {
			unnumbered = append(unnumbered, ev.OrderID)
		}
	}
	if _, err := q.VoucherUsesRecord(ctx, db.VoucherUsesRecordParams{
		Code: code, N: limit32(len(made)), Discount: discounts, MaxMoney: voucher.MaxMoney, Highest: highest, Unnumbered: unnumbered,
	}); errors.Is(err, pgx.ErrNoRows) {
		return nil, errSumTooLarge
	} else if err != nil {
		return nil, err
	}
	return orders, nil
}

// recordPeriodUses counts the new rows' uses in the period of their
// createdAt (the gate's, which counted them there: admit.lua) of each of
// the voucher's period limits, after the customers' counts as takeUses
// does. The gate decided: a period it let past its max (a gate loaded too
// low) is errPeriodOver, the event refused and dead-lettered like one past
// a CHECK, never a use sold past the limit in the database.
func recordPeriodUses(ctx context.Context, q *db.Queries, code string, evs []voucher.Event, made map[string]bool) error {
	row, err := q.VoucherGetByCode(ctx, code)
	if err != nil {
		return err
	}
	v := toVoucher(row)
	if len(v.PeriodLimits) == 0 {
		return nil
	}
	claims := make([]claim, 0, len(made))
	rows := make(map[string]db.VoucherRedemption, len(made))
	for _, ev := range evs {
		if _, seen := rows[ev.OrderID]; seen || !made[ev.OrderID] {
			continue
		}
		claims = append(claims, claim{orderID: ev.OrderID, customerID: ev.CustomerID, code: code})
		rows[ev.OrderID] = db.VoucherRedemption{OrderID: ev.OrderID, CustomerID: ev.CustomerID, CreatedAt: ev.CreatedAt}
	}
	_, refusal, err := takePeriodUses(ctx, q, code, v, claims, rows)
	if err != nil {
		return err
	}
	if refusal != nil {
		return fmt.Errorf("%w: %s", errPeriodOver, refusal.Message)
	}
	return nil
}

// errPeriodOver: reserved events would take a period of a period limit
// past its max in the database (the gate counted them below it).
var errPeriodOver = errors.New("the events would take a period limit's count past its max")

// errSumTooLarge: the discounts of reserved events would take the voucher's
// budgetUsed past 9007199254740991 (voucher.MaxMoney). The gate refuses such
// a reserve before its 201; an event that still carries one (a gate loaded
// before the bound, an event published before it) is refused, never retried:
// applying it again would give the same answer.
var errSumTooLarge = errors.New("the discount would take the voucher's budgetUsed past 9007199254740991 (voucher.MaxMoney)")

// batchUses is what a batch's new rows hold: each customer's uses (every
// customer once, in first-seen order) and, per row, its order and customer
// (for the reserved events).
type batchUses struct {
	customers      []int64
	uses           []int32
	orderIDs       []string
	orderCustomers []int64
}

// usesOf counts the uses of n rows; row(i) gives the ith's order and customer.
func usesOf(n int, row func(i int) (orderID string, customerID int64)) batchUses {
	u := batchUses{orderIDs: make([]string, n), orderCustomers: make([]int64, n)}
	at := make(map[int64]int, n) // customer -> index in u.customers
	for i := range n {
		orderID, customer := row(i)
		u.orderIDs[i], u.orderCustomers[i] = orderID, customer
		if j, ok := at[customer]; ok {
			u.uses[j]++
			continue
		}
		at[customer] = len(u.customers)
		u.customers = append(u.customers, customer)
		u.uses = append(u.uses, 1)
	}
	return u
}
