package voucher

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// LimitScope says whose uses a period limit counts.
type LimitScope string

// The scopes of a period limit.
const (
	ScopeVoucher  LimitScope = "VOUCHER"  // all customers together
	ScopeCustomer LimitScope = "CUSTOMER" // each customer on their own
)

// LimitPeriod is the calendar period a period limit counts in.
type LimitPeriod string

// The periods: calendar days, weeks starting on Monday, and months, in the
// voucher's time zone.
const (
	PeriodDay   LimitPeriod = "DAY"
	PeriodWeek  LimitPeriod = "WEEK"
	PeriodMonth LimitPeriod = "MONTH"
)

// The bounds of a voucher's restrictions (README "Period limits, segments
// and line items").
const (
	MaxPeriodLimits = 5
	MaxItems        = 100
	// maxListed bounds eligibleSegments and each list of appliesTo: they
	// are read on every reserve.
	maxListed = 100
)

// PeriodLimit is at most Max uses held (RESERVED + CONFIRMED) in one calendar
// Period, by all customers together (ScopeVoucher) or by each customer
// (ScopeCustomer). A use counts in the period of its reservation's createdAt.
type PeriodLimit struct {
	Scope  LimitScope
	Period LimitPeriod
	Max    int
}

// String is the limit as the database keeps it: SCOPE:PERIOD:MAX.
func (l PeriodLimit) String() string {
	return string(l.Scope) + ":" + string(l.Period) + ":" + strconv.Itoa(l.Max)
}

// ParsePeriodLimit reads a limit as String writes it.
func ParsePeriodLimit(s string) (PeriodLimit, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return PeriodLimit{}, fmt.Errorf("voucher: period limit %q is not SCOPE:PERIOD:MAX", s)
	}
	n, err := strconv.Atoi(parts[2])
	if err != nil {
		return PeriodLimit{}, fmt.Errorf("voucher: period limit %q: %w", s, err)
	}
	return PeriodLimit{Scope: LimitScope(parts[0]), Period: LimitPeriod(parts[1]), Max: n}, nil
}

// AppliesTo chooses the order's items a discount is taken on: those whose
// SKU is in SKUs or whose category is in Categories.
type AppliesTo struct {
	SKUs       []string
	Categories []string
}

// Covers reports whether an item is eligible.
func (a AppliesTo) Covers(it LineItem) bool {
	return slices.Contains(a.SKUs, it.SKU) || it.Category != "" && slices.Contains(a.Categories, it.Category)
}

// LineItem is one line of an order: Quantity x UnitAmount of a SKU.
type LineItem struct {
	SKU        string
	Category   string // optional
	Quantity   int
	UnitAmount int64
}

// Restrictions are the terms of a voucher (or a campaign) beyond its
// discount and totals: period limits in its time zone, the customer segments
// it is for, and the items its discount applies to. The zero value
// restricts nothing.
type Restrictions struct {
	PeriodLimits []PeriodLimit
	// TimeZone is the IANA name of the period limits' calendar; empty is UTC.
	TimeZone string
	// EligibleSegments: when any, a reserve must name one of them.
	EligibleSegments []string
	// AppliesTo: when set, the discount is taken on the eligible items'
	// subtotal only, and a reserve without one is NOT_ELIGIBLE.
	AppliesTo *AppliesTo
}

// Location is the period limits' time zone (UTC when none or unknown: a
// stored zone was checked at creation).
func (r Restrictions) Location() *time.Location {
	if r.TimeZone == "" || r.TimeZone == "UTC" {
		return time.UTC
	}
	if loc, ok := zones.Load(r.TimeZone); ok {
		return loc.(*time.Location)
	}
	loc, err := time.LoadLocation(r.TimeZone)
	if err != nil {
		return time.UTC
	}
	zones.Store(r.TimeZone, loc)
	return loc
}

// zones caches the time zones loaded (name -> *time.Location): LoadLocation
// reads and parses the zone's file each call, and a reserve of a voucher
// with period limits needs its zone. There are a few hundred names at most.
var zones sync.Map

// ZoneName is the time zone as answers show it: UTC when none was given.
func (r Restrictions) ZoneName() string {
	if r.TimeZone == "" {
		return "UTC"
	}
	return r.TimeZone
}

// fieldErrors adds the rules of the restrictions to out, by field.
func (r Restrictions) fieldErrors(out map[string]string) {
	if len(r.PeriodLimits) > MaxPeriodLimits {
		out["periodLimits"] = fmt.Sprintf("at most %d period limits", MaxPeriodLimits)
	}
	seen := map[[2]string]bool{}
	for _, l := range r.PeriodLimits {
		key := [2]string{string(l.Scope), string(l.Period)}
		switch {
		case l.Scope != ScopeVoucher && l.Scope != ScopeCustomer:
			out["periodLimits"] = "a period limit's scope must be VOUCHER or CUSTOMER"
		case l.Period != PeriodDay && l.Period != PeriodWeek && l.Period != PeriodMonth:
			out["periodLimits"] = "a period limit's period must be DAY, WEEK or MONTH"
		case l.Max < 1 || l.Max > MaxLimit:
			out["periodLimits"] = "a period limit's max must be at least 1 and at most 2147483647"
		case seen[key]:
			out["periodLimits"] = "at most one period limit per scope and period"
		}
		seen[key] = true
	}
	if r.TimeZone != "" {
		if err := ValidateTimeZone(r.TimeZone); err != nil {
			out["timeZone"] = AsError(err).Message
		}
	}
	if len(r.EligibleSegments) > maxListed {
		out["eligibleSegments"] = fmt.Sprintf("at most %d eligible segments", maxListed)
	}
	for _, s := range r.EligibleSegments {
		if err := ValidateSegment("eligibleSegments", s); err != nil {
			out["eligibleSegments"] = AsError(err).Message
		}
	}
	if a := r.AppliesTo; a != nil {
		switch {
		case len(a.SKUs) == 0 && len(a.Categories) == 0:
			out["appliesTo"] = "appliesTo needs at least one SKU or category"
		case len(a.SKUs) > maxListed || len(a.Categories) > maxListed:
			out["appliesTo"] = fmt.Sprintf("appliesTo lists at most %d SKUs and %d categories", maxListed, maxListed)
		}
		for _, s := range a.SKUs {
			if err := ValidateItemName("appliesTo.skus", s); err != nil {
				out["appliesTo"] = AsError(err).Message
			}
		}
		for _, c := range a.Categories {
			if err := ValidateItemName("appliesTo.categories", c); err != nil {
				out["appliesTo"] = AsError(err).Message
			}
		}
	}
}

// ValidateTimeZone checks an IANA time zone name this server knows.
func ValidateTimeZone(name string) error {
	if err := ValidateText("timeZone", name); err != nil {
		return err
	}
	// LoadLocation also takes "Local" and file paths: neither is a zone.
	if name == "Local" || strings.HasPrefix(name, "/") || strings.Contains(name, "..") || len(name) > 64 {
		return Invalid("timeZone", "timeZone must be an IANA time zone name, e.g. Europe/Berlin")
	}
	if _, err := time.LoadLocation(name); err != nil {
		return Invalid("timeZone", "timeZone must be an IANA time zone name, e.g. Europe/Berlin")
	}
	return nil
}

// ValidateSegment checks a customer segment: 1-64 characters of a-z 0-9 _ - :.
func ValidateSegment(field, s string) error {
	ok := len(s) >= 1 && len(s) <= 64
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == ':'
	}
	if !ok {
		return Invalid(field, "a segment must be 1-64 characters of a-z, 0-9, _, - and :")
	}
	return nil
}

// ValidateItemName checks a SKU or a category: 1-64 characters of valid
// UTF-8 text without control characters.
func ValidateItemName(field, s string) error {
	if err := ValidateText(field, s); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(s); n < 1 || n > 64 {
		return Invalid(field, field+" must be 1-64 characters")
	}
	for _, c := range s {
		if unicode.IsControl(c) {
			return Invalid(field, field+" must not contain control characters")
		}
	}
	return nil
}

// validateOrderLines checks a reserve's (or check's) segments and items:
// INVALID_INPUT with field customerSegments or items; the items must add up
// to orderAmount.
func validateOrderLines(segments []string, items []LineItem, orderAmount int64) error {
	if len(segments) > maxListed {
		return Invalid("customerSegments", fmt.Sprintf("at most %d customer segments", maxListed))
	}
	for _, s := range segments {
		if err := ValidateSegment("customerSegments", s); err != nil {
			return err
		}
	}
	if items == nil {
		return nil
	}
	if len(items) > MaxItems {
		return Invalid("items", fmt.Sprintf("at most %d items", MaxItems))
	}
	var sum int64
	for _, it := range items {
		if err := ValidateItemName("items", it.SKU); err != nil {
			return err
		}
		if it.Category != "" {
			if err := ValidateItemName("items", it.Category); err != nil {
				return err
			}
		}
		if it.Quantity < 1 || it.Quantity > MaxLimit {
			return Invalid("items", "an item's quantity must be at least 1 and at most 2147483647")
		}
		if msg := moneyRule("items", it.UnitAmount, 0); msg != "" {
			return Invalid("items", "an item's unitAmount must be an amount >= 0, at most 9007199254740991")
		}
		line, ok := lineAmount(it)
		if !ok || line > MoneyRoom(sum) {
			return Invalid("items", "the items' quantity x unitAmount must add up to orderAmount")
		}
		sum += line
	}
	if sum != orderAmount {
		return Invalid("items", "the items' quantity x unitAmount must add up to orderAmount")
	}
	return nil
}

// lineAmount is quantity x unitAmount, when it is a Money.
func lineAmount(it LineItem) (int64, bool) {
	q := int64(it.Quantity)
	if it.UnitAmount != 0 && q > MaxMoney/it.UnitAmount {
		return 0, false
	}
	return q * it.UnitAmount, true
}

// checkOrderLines returns NOT_ELIGIBLE when the voucher lists segments and
// the request names none of them, or applies to items and the request has
// no eligible one.
func (v Voucher) checkOrderLines(segments []string, items []LineItem) error {
	if len(v.EligibleSegments) > 0 && !slices.ContainsFunc(segments, func(s string) bool { return slices.Contains(v.EligibleSegments, s) }) {
		return Errorf(NotEligible, "voucher %s is for customers in the segments %s only", v.Code, strings.Join(v.EligibleSegments, ", "))
	}
	if v.AppliesTo != nil && !slices.ContainsFunc(items, v.AppliesTo.Covers) {
		return Errorf(NotEligible, "voucher %s applies to none of the order's items", v.Code)
	}
	return nil
}

// discountBase is the amount a request's discount is taken on: the order
// amount, or with AppliesTo the eligible items' subtotal (the items were
// checked to add up to the order amount, so it fits a Money).
func (v Voucher) discountBase(orderAmount int64, items []LineItem) int64 {
	if v.AppliesTo == nil {
		return orderAmount
	}
	var sub int64
	for _, it := range items {
		if v.AppliesTo.Covers(it) {
			line, _ := lineAmount(it)
			sub += line
		}
	}
	return sub
}

// DiscountOf is the discount a reserve of r holds: DiscountFor of the
// order amount, or of the eligible items' subtotal with AppliesTo.
func (v Voucher) DiscountOf(r ReserveRequest) int64 {
	return v.DiscountFor(v.discountBase(r.OrderAmount, r.Items))
}

// PeriodBounds is the calendar period of p holding t in loc: [start, end).
// Days start at midnight, weeks on Monday at midnight, months on the 1st.
func PeriodBounds(t time.Time, loc *time.Location, p LimitPeriod) (start, end time.Time) {
	y, m, d := t.In(loc).Date()
	switch p {
	case PeriodWeek:
		back := (int(time.Date(y, m, d, 0, 0, 0, 0, loc).Weekday()) + 6) % 7 // days since Monday
		start = time.Date(y, m, d-back, 0, 0, 0, 0, loc)
		end = time.Date(y, m, d-back+7, 0, 0, 0, 0, loc)
	case PeriodMonth:
		start = time.Date(y, m, 1, 0, 0, 0, 0, loc)
		end = time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	default:
		start = time.Date(y, m, d, 0, 0, 0, 0, loc)
		end = time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	}
	return start, end
}

// PeriodLimitRefusal is the refusal of a reserve past a period limit:
// PERIOD_LIMIT_REACHED with when the period ends.
func PeriodLimitRefusal(code string, l PeriodLimit, availableAt time.Time) *Error {
	who := "all customers"
	if l.Scope == ScopeCustomer {
		who = "the customer"
	}
	return &Error{
		Code:        PeriodLimitReached,
		Message:     fmt.Sprintf("voucher %s allows %d use(s) per %s to %s; available again at %s", code, l.Max, strings.ToLower(string(l.Period)), who, availableAt.UTC().Format(time.RFC3339)),
		AvailableAt: availableAt,
	}
}

// PeriodUses are the uses held in the current periods of a voucher's
// limits, as a check reads them: PeriodUses[i] counts the current period
// of PeriodLimits[i] (all customers', or the customer's, by its scope).
type PeriodUses []int

// checkPeriods returns PERIOD_LIMIT_REACHED when a limit's current period
// (the one now is in) holds its max; uses[i] is limit i's count.
func (v Voucher) checkPeriods(now time.Time, uses PeriodUses) error {
	loc := v.Location()
	var refused *PeriodLimit
	var at time.Time
	for i, l := range v.PeriodLimits {
		if i < len(uses) && uses[i] >= l.Max {
			_, end := PeriodBounds(now, loc, l.Period)
			if refused == nil || end.After(at) {
				refused, at = &v.PeriodLimits[i], end
			}
		}
	}
	if refused != nil {
		return PeriodLimitRefusal(v.Code, *refused, at)
	}
	return nil
}

// soldOutMemoryAnswers reports whether an instance's sold-out memory of
// the gate gk (soldOutCache, which knows no period counts) may answer for
// v: always without period limits; with them only on v's own gate (a
// campaign code's terms are its campaign's) and when no limit can refuse
// before the stock or ALREADY_USED (periodsRefuseBeforeStock), since
// PERIOD_LIMIT_REACHED comes before OUT_OF_STOCK.
func (v Voucher) soldOutMemoryAnswers(gk string) bool {
	return len(v.PeriodLimits) == 0 || gk == v.Code && !v.periodsRefuseBeforeStock()
}

// periodsRefuseBeforeStock reports whether a period limit could refuse a
// reserve that the sold-out memory would answer OUT_OF_STOCK or
// ALREADY_USED: a VOUCHER limit (its period may be full too when the stock
// is gone, and PERIOD_LIMIT_REACHED comes first), or a CUSTOMER limit below
// perUserLimit. A customer's uses in a period are among its live uses, so a
// CUSTOMER limit of at least perUserLimit is reached only by a customer
// that ALREADY_USED refuses first; such a voucher keeps the memory's fast
// answers after its sale (make bench, rest-period).
func (v Voucher) periodsRefuseBeforeStock() bool {
	for _, l := range v.PeriodLimits {
		if l.Scope != ScopeCustomer || l.Max < v.PerUserLimit {
			return true
		}
	}
	return false
}

// withDiscount is r for a flash path's gate and the discount its use
// takes from the budget (DiscountOf): when that is not the one its amount
// gives (appliesTo), the gate keeps it with the order
// (GateKeepsDiscount), so every give-back returns exactly it.
func (v Voucher) withDiscount(r ReserveRequest) (ReserveRequest, int64) {
	d := v.DiscountOf(r)
	r.GateKeepsDiscount = d != v.DiscountFor(r.OrderAmount)
	return r, d
}

// PeriodCount is the uses held in one period of one of a voucher's period
// limits: all customers' (CustomerID 0) or one customer's.
type PeriodCount struct {
	Scope      LimitScope
	Period     LimitPeriod
	Start, End time.Time
	CustomerID int64
	Used, Max  int
}

// Describe is the restrictions in words, for the audit log: "" for none.
func (r Restrictions) Describe() string {
	var parts []string
	for _, l := range r.PeriodLimits {
		parts = append(parts, fmt.Sprintf("%d per %s (%s)", l.Max, strings.ToLower(string(l.Period)), strings.ToLower(string(l.Scope))))
	}
	if len(r.PeriodLimits) > 0 {
		parts = append(parts, "time zone "+r.ZoneName())
	}
	if len(r.EligibleSegments) > 0 {
		parts = append(parts, "segments "+strings.Join(r.EligibleSegments, ","))
	}
	if a := r.AppliesTo; a != nil {
		parts = append(parts, "applies to SKUs ["+strings.Join(a.SKUs, ",")+"] categories ["+strings.Join(a.Categories, ",")+"]")
	}
	return strings.Join(parts, ", ")
}

// GatePeriod is one calendar period of one of a voucher's period limits as
// the flash gate counts it: a hash per limit and period in Redis (key
// voucher:{CODE}:period:SCOPE:PERIOD:START, customer -> uses, 0 for the
// voucher scope), expiring a while after End.
type GatePeriod struct {
	Limit      int // index in the voucher's PeriodLimits
	Scope      LimitScope
	Period     LimitPeriod
	Start, End time.Time
	Max        int
}

// Field is the field of a customer's use in p's hash: the customer for a
// CUSTOMER limit, 0 (all customers together) for a VOUCHER one.
func (p GatePeriod) Field(customerID int64) int64 {
	if p.Scope == ScopeCustomer {
		return customerID
	}
	return 0
}

// PeriodNear is how close to a period's bounds a moment must be for the
// neighbouring period to be offered to the gate as well (gatePeriods): the
// kafka path's gate counts a use in the period of the createdAt it gives on
// its own clock, which may be on the other side of a midnight than this
// instance's.
const PeriodNear = 5 * time.Minute

// gatePeriods are the periods of v's limits a reserve at at may count in:
// the ones holding at and, with near, those holding at ± PeriodNear (the
// gate picks, per limit, the one holding its createdAt). Nil without limits.
func (v Voucher) gatePeriods(at time.Time, near bool) []GatePeriod {
	if len(v.PeriodLimits) == 0 {
		return nil
	}
	loc := v.Location()
	var out []GatePeriod
	moments := []time.Time{at}
	if near {
		moments = append(moments, at.Add(-PeriodNear), at.Add(PeriodNear))
	}
	for i, l := range v.PeriodLimits {
		for _, t := range moments {
			start, end := PeriodBounds(t, loc, l.Period)
			if slices.ContainsFunc(out, func(p GatePeriod) bool { return p.Limit == i && p.Start.Equal(start) }) {
				continue
			}
			out = append(out, GatePeriod{Limit: i, Scope: l.Scope, Period: l.Period, Start: start, End: end, Max: l.Max})
		}
	}
	return out
}

// withPeriods is r with the periods the gate counts its use in, for a
// voucher with period limits: those holding at (the sync path, which writes
// the reservation's createdAt = at), or with near those around it too (the
// kafka path, whose gate picks by the createdAt it gives).
func (v Voucher) withPeriods(r ReserveRequest, at time.Time, near bool) ReserveRequest {
	if len(v.PeriodLimits) == 0 {
		return r
	}
	r.PeriodAt = at
	r.GatePeriods = v.gatePeriods(at, near)
	return r
}

// GatePeriodCount is a period's counts as a gate is loaded with them: all
// customers' under customer 0 (a VOUCHER limit), else each customer's.
type GatePeriodCount struct {
	GatePeriod
	Uses map[int64]int
}

// GatePeriodsOf is what a gate loaded at now holds of v's period limits:
// the counts of every period holding now or now ± PeriodNear (zero counts
// too, so a load resets what a gate held there), from the database's rows,
// and for each live order (not released) the indexes in that list of the
// periods it counts in, so the gate gives its use back there.
func GatePeriodsOf(v Voucher, now time.Time, rows []PeriodCount, orders []GateOrder) ([]GatePeriodCount, map[string][]int) {
	periods := v.gatePeriods(now, true)
	if len(periods) == 0 {
		return nil, nil
	}
	out := make([]GatePeriodCount, len(periods))
	for i, p := range periods {
		out[i] = GatePeriodCount{GatePeriod: p, Uses: map[int64]int{}}
		for _, r := range rows {
			if r.Scope == p.Scope && r.Period == p.Period && r.Start.Equal(p.Start) && r.Used > 0 {
				out[i].Uses[r.CustomerID] += r.Used
			}
		}
	}
	held := map[string][]int{}
	for _, o := range orders {
		if o.Released || o.Void || o.Lost || o.CreatedAt.IsZero() {
			continue
		}
		for i, p := range periods {
			if !o.CreatedAt.Before(p.Start) && o.CreatedAt.Before(p.End) {
				held[o.OrderID] = append(held[o.OrderID], i)
			}
		}
	}
	return out, held
}

// GatePeriodLimitReached is the prefix of a gate's verdict refusing a
// reserve past a period limit: "PERIOD_LIMIT_REACHED:LIMIT:ENDMS", the
// limit (its index) whose period ends last among those refusing, and when.
const GatePeriodLimitReached GateVerdict = "PERIOD_LIMIT_REACHED"

// PeriodRefusal reads a GatePeriodLimitReached verdict: the index of the
// limit and the end of its period; ok is false for any other verdict.
func (g GateVerdict) PeriodRefusal() (limit int, end time.Time, ok bool) {
	rest, found := strings.CutPrefix(string(g), string(GatePeriodLimitReached)+":")
	if !found {
		return 0, time.Time{}, false
	}
	a, b, found := strings.Cut(rest, ":")
	if !found {
		return 0, time.Time{}, false
	}
	i, err1 := strconv.Atoi(a)
	ms, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || i < 0 {
		return 0, time.Time{}, false
	}
	return i, time.UnixMilli(ms), true
}

// periodRefusal is the answer to a gate's GatePeriodLimitReached verdict,
// as the database path answers it (PeriodLimitRefusal); nil for any other.
func (v Voucher) periodRefusal(verdict GateVerdict) *Error {
	i, end, ok := verdict.PeriodRefusal()
	if !ok || i >= len(v.PeriodLimits) {
		return nil
	}
	return PeriodLimitRefusal(v.Code, v.PeriodLimits[i], end)
}
