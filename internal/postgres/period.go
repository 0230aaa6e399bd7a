package postgres

import (
	"cmp"
	"context"
	"slices"
	"time"

	"voucherd/internal/voucher"
	"voucherd/sql/db"
)

// restrictionColumns are a voucher's restrictions as its row keeps them:
// NOT NULL arrays (empty for none), and NULL applies_to lists when the
// discount applies to the whole order.
type restrictionColumns struct {
	timeZone   string
	limits     []string
	segments   []string
	skus, cats []string
}

func columnsOf(r voucher.Restrictions) restrictionColumns {
	c := restrictionColumns{timeZone: cmp.Or(r.TimeZone, "UTC"), limits: []string{}, segments: []string{}}
	for _, l := range r.PeriodLimits {
		c.limits = append(c.limits, l.String())
	}
	c.segments = append(c.segments, r.EligibleSegments...)
	if r.AppliesTo != nil {
		c.skus = append([]string{}, r.AppliesTo.SKUs...)
		c.cats = append([]string{}, r.AppliesTo.Categories...)
	}
	return c
}

// restrictionsOf reads a voucher row's restrictions. A limit the row holds
// was checked at creation; one that does not parse is skipped rather than
// failing every read (the CHECK keeps at most five).
func restrictionsOf(r db.Voucher) voucher.Restrictions {
	out := voucher.Restrictions{TimeZone: r.TimeZone}
	for _, s := range r.PeriodLimits {
		if l, err := voucher.ParsePeriodLimit(s); err == nil {
			out.PeriodLimits = append(out.PeriodLimits, l)
		}
	}
	if len(r.EligibleSegments) > 0 {
		out.EligibleSegments = r.EligibleSegments
	}
	if r.AppliesToSkus != nil || r.AppliesToCategories != nil {
		out.AppliesTo = &voucher.AppliesTo{SKUs: r.AppliesToSkus, Categories: r.AppliesToCategories}
	}
	return out
}

// periodKey is one row of voucher_period_use.
type periodKey struct {
	limit    int // index in the voucher's PeriodLimits
	start    time.Time
	customer int64 // 0 for a VOUCHER limit
}

// takePeriodUses takes a use of each claimed row in the period of its
// created_at of each of the owner's period limits (v's), in the caller's
// transaction, after the customers' counts and before the voucher's row
// (reserve's lock order). It returns the claims refused (rows of a period
// that has too few uses left; nothing taken, the caller rolls back), with
// the refusal a single one of them gets; nil when every use was taken.
func takePeriodUses(ctx context.Context, q *db.Queries, owner string, v voucher.Voucher, claims []claim, rows map[string]db.VoucherRedemption) ([]bool, *voucher.Error, error) {
	if len(v.PeriodLimits) == 0 {
		return nil, nil, nil
	}
	loc := v.Location()
	uses := map[periodKey]int32{}
	ends := map[periodKey]time.Time{}
	keysOf := func(row db.VoucherRedemption) []periodKey {
		keys := make([]periodKey, len(v.PeriodLimits))
		for i, l := range v.PeriodLimits {
			start, end := voucher.PeriodBounds(row.CreatedAt, loc, l.Period)
			k := periodKey{limit: i, start: start.UTC()} // a map key: one location
			if l.Scope == voucher.ScopeCustomer {
				k.customer = row.CustomerID
			}
			keys[i], ends[k] = k, end
		}
		return keys
	}
	for _, row := range rows {
		for _, k := range keysOf(row) {
			uses[k]++
		}
	}
	var p db.VoucherPeriodUsesTakeParams
	p.Code = owner
	for k, n := range uses {
		l := v.PeriodLimits[k.limit]
		p.Scopes = append(p.Scopes, string(l.Scope))
		p.Periods = append(p.Periods, string(l.Period))
		p.PeriodStarts = append(p.PeriodStarts, k.start)
		p.CustomerIds = append(p.CustomerIds, k.customer)
		p.PeriodEnds = append(p.PeriodEnds, ends[k])
		p.Uses = append(p.Uses, n)
		p.MaxUses = append(p.MaxUses, limit32(l.Max))
	}
	taken, err := q.VoucherPeriodUsesTake(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	if len(taken) == len(uses) {
		return nil, nil, nil
	}
	ok := map[periodKey]bool{}
	for _, t := range taken {
		i := slices.IndexFunc(v.PeriodLimits, func(l voucher.PeriodLimit) bool {
			return string(l.Scope) == t.Scope && string(l.Period) == t.Period
		})
		ok[periodKey{limit: i, start: t.PeriodStart.UTC(), customer: t.CustomerID}] = true
	}
	// The refusal names the limit whose period ends last: a use may be
	// taken again only once every refusing period is over.
	suspects := make([]bool, len(claims))
	var refusal *voucher.Error
	var at time.Time
	for i, c := range claims {
		row, claimed := rows[c.orderID]
		if !claimed {
			continue
		}
		for _, k := range keysOf(row) {
			if ok[k] {
				continue
			}
			suspects[i] = true
			if end := ends[k]; refusal == nil || end.After(at) {
				at = end
				refusal = voucher.PeriodLimitRefusal(c.code, v.PeriodLimits[k.limit], end)
			}
		}
	}
	return suspects, refusal, nil
}

// periodUses reads the uses held in the current periods (those holding
// now) of v's period limits, all customers' and the customer's: a check's
// view of what takePeriodUses would decide.
func periodUses(ctx context.Context, q *db.Queries, owner string, v voucher.Voucher, customerID int64, now time.Time) (voucher.PeriodUses, error) {
	if len(v.PeriodLimits) == 0 {
		return nil, nil
	}
	rows, err := q.VoucherPeriodUsesAt(ctx, db.VoucherPeriodUsesAtParams{Code: owner, CustomerID: customerID, At: now})
	if err != nil {
		return nil, err
	}
	out := make(voucher.PeriodUses, len(v.PeriodLimits))
	for _, r := range rows {
		for i, l := range v.PeriodLimits {
			if string(l.Scope) == r.Scope && string(l.Period) == r.Period {
				out[i] = int(r.UsedCount)
			}
		}
	}
	return out, nil
}

// PeriodCounts lists a voucher's period counts that hold uses, latest
// period first, at most limit of them (the dashboard's voucher page).
func (s *Store) PeriodCounts(ctx context.Context, code string, limit int) ([]voucher.PeriodCount, error) {
	rows, err := s.q.VoucherPeriodUsesList(ctx, db.VoucherPeriodUsesListParams{VoucherCode: code, Limit: limit32(limit)})
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]voucher.PeriodCount, len(rows))
	for i, r := range rows {
		out[i] = periodCountOf(r)
	}
	return out, nil
}

// periodCountOf is a voucher_period_use row as the domain counts it.
func periodCountOf(r db.VoucherPeriodUsesListRow) voucher.PeriodCount {
	return voucher.PeriodCount{
		Scope: voucher.LimitScope(r.Scope), Period: voucher.LimitPeriod(r.Period), Start: r.PeriodStart, End: r.PeriodEnd,
		CustomerID: r.CustomerID, Used: int(r.UsedCount), Max: int(r.MaxUses),
	}
}

// periodCountsAround reads a voucher's period counts of the periods that
// overlap at ± voucher.PeriodNear (those GatePeriodsOf picks among).
func periodCountsAround(ctx context.Context, q *db.Queries, code string, at time.Time) ([]voucher.PeriodCount, error) {
	rows, err := q.VoucherPeriodUsesBetween(ctx, db.VoucherPeriodUsesBetweenParams{
		Code: code, FromAt: at.Add(-voucher.PeriodNear), ToAt: at.Add(voucher.PeriodNear),
	})
	if err != nil {
		return nil, err
	}
	out := make([]voucher.PeriodCount, len(rows))
	for i, r := range rows {
		out[i] = periodCountOf(db.VoucherPeriodUsesListRow(r)) // the same columns
	}
	return out, nil
}
