package voucher

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// The sale as it happened (voucher.sale, issue 29): every reserve answer is
// counted in memory where Service.Reserve answers it, per voucher code,
// second and outcome, and a job of every instance adds the counts to the
// database once a second (FlushSale). No request writes anything for it.
// The uses admitted are not counted: they are read, exactly, from the
// reservations themselves.

// SaleSucceeded is the outcome of a reserve answered with a reservation, an
// idempotent replay of an earlier one included.
const SaleSucceeded = "SUCCEEDED"

// saleOutcome is what a reserve's answer counts as in the sale: the
// refusals about the voucher's sale, by their code, and the successes. An
// answer that says nothing about the sale is not counted: NOT_FOUND (no
// such voucher to count it against), INVALID_INPUT (refused before any
// voucher was looked at), UNAVAILABLE (no definite answer: the outcome of
// a write that timed out is unknown), INTERNAL and FORBIDDEN.
func saleOutcome(code ErrorCode) (string, bool) {
	switch code {
	case "":
		return SaleSucceeded, true
	case OutOfStock, BudgetExhausted, AlreadyUsed, NotEligible, OrderConflict, ReservationReleased:
		return string(code), true
	}
	return "", false
}

// SaleCount is how many reserve answers of one voucher code had one outcome
// in one second on one instance.
type SaleCount struct {
	Code    string
	Second  time.Time // whole second, UTC
	Outcome string    // SaleSucceeded or a refusal's code
	Count   int64
}

// AdmittedCount is how many of a voucher's reservations were created in one
// second.
type AdmittedCount struct {
	Second time.Time
	Count  int64
}

// SaleFacts is what the database holds of a voucher's sale, read in one
// snapshot.
type SaleFacts struct {
	// Counted are the answers every instance counted (flushed), per second
	// and outcome.
	Counted []SaleCount
	// Admitted are the voucher's reservations of every status, per second.
	Admitted []AdmittedCount
	// FirstUseAt is its first reservation's creation; nil before one.
	FirstUseAt *time.Time
	// SoldOutAt is, when no use remains, the creation of its latest live
	// reservation; nil while uses remain.
	SoldOutAt *time.Time
}

// SaleStore keeps the counted answers and reads a voucher's sale.
type SaleStore interface {
	// AddSaleCounts adds counts to those stored, in one statement; a code
	// that is no voucher is left out.
	AddSaleCounts(ctx context.Context, counts []SaleCount) error
	// SaleFacts: NOT_FOUND.
	SaleFacts(ctx context.Context, code string) (SaleFacts, error)
}

// RefusalCount is how many reserves one refusal code answered.
type RefusalCount struct {
	Code  ErrorCode
	Count int64
}

// SaleSecond is one entry of a sale's series: the uses admitted and the
// reserves refused from At for the report's Step.
type SaleSecond struct {
	At       time.Time
	Admitted int64
	Refused  int64
	// RefusedBy is Refused by code, in the order of the report's Refusals.
	RefusedBy []int64
}

// SaleReport is a voucher's sale as it happened.
type SaleReport struct {
	Code string
	// FirstUseAt is the first use taken; nil before.
	FirstUseAt *time.Time
	// SoldOutAt is when the last use was taken and the voucher sold out;
	// nil while uses remain (again after a release).
	SoldOutAt *time.Time
	// Requests are the reserve answers counted on every instance and path:
	// the refusals, plus the successes or the uses admitted, whichever is
	// more. Successes include idempotent replays (one use, many answers);
	// admitted uses are exact even before the last second's counts are
	// flushed, or after an instance died with its counts unflushed.
	Requests int64
	// Admitted are the voucher's reservations of every status: an admitted
	// use released later was still admitted.
	Admitted int64
	// Refusals are the refused reserves by code, most first.
	Refusals []RefusalCount
	// Series runs from the first request's second to the last, one entry
	// per Step: a second, or a minute (an hour, a day) when a second each
	// would make more than MaxSaleSeries entries.
	Series []SaleSecond
	Step   time.Duration
}

// Refused is the sum of the refusals.
func (r SaleReport) Refused() int64 {
	var n int64
	for _, c := range r.Refusals {
		n += c.Count
	}
	return n
}

// MaxSaleSeries bounds a report's series.
const MaxSaleSeries = 3600

// Sale reports a voucher's sale: its first use, when it sold out, the
// requests answered, the uses admitted, the refusals by code and a series.
// Answers of the last second may not be counted yet (each instance adds
// its counts once a second). Errors: INVALID_INPUT, NOT_FOUND.
func (s *Service) Sale(ctx context.Context, code string) (SaleReport, error) {
	if err := authorize(ctx, OpReadSale); err != nil {
		return SaleReport{}, err
	}
	code, err := CanonicalCode(code)
	if err != nil {
		return SaleReport{}, err
	}
	f, err := s.store.SaleFacts(ctx, code)
	if err != nil {
		return SaleReport{}, err
	}
	return saleReport(code, f), nil
}

// saleReport builds a report from what the database holds.
func saleReport(code string, f SaleFacts) SaleReport {
	r := SaleReport{Code: code, FirstUseAt: f.FirstUseAt, SoldOutAt: f.SoldOutAt, Step: time.Second}
	var succeeded int64
	refused := map[ErrorCode]int64{}
	var first, last time.Time
	see := func(t time.Time) {
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	for _, c := range f.Counted {
		see(c.Second)
		if c.Outcome == SaleSucceeded {
			succeeded += c.Count
		} else {
			refused[ErrorCode(c.Outcome)] += c.Count
		}
	}
	for _, a := range f.Admitted {
		see(a.Second)
		r.Admitted += a.Count
	}
	for code, n := range refused {
		r.Refusals = append(r.Refusals, RefusalCount{Code: code, Count: n})
	}
	slices.SortFunc(r.Refusals, func(a, b RefusalCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Code, b.Code))
	})
	r.Requests = r.Refused() + max(succeeded, r.Admitted)
	if first.IsZero() {
		r.Series = []SaleSecond{}
		return r
	}
	r.Step = seriesStep(first, last)
	first, last = first.Truncate(r.Step), last.Truncate(r.Step)
	r.Series = make([]SaleSecond, int(last.Sub(first)/r.Step)+1)
	column := make(map[ErrorCode]int, len(r.Refusals))
	for i, c := range r.Refusals {
		column[c.Code] = i
	}
	for i := range r.Series {
		r.Series[i] = SaleSecond{At: first.Add(time.Duration(i) * r.Step), RefusedBy: make([]int64, len(r.Refusals))}
	}
	at := func(t time.Time) *SaleSecond { return &r.Series[int(t.Truncate(r.Step).Sub(first)/r.Step)] }
	for _, a := range f.Admitted {
		at(a.Second).Admitted += a.Count
	}
	for _, c := range f.Counted {
		if c.Outcome == SaleSucceeded {
			continue
		}
		e := at(c.Second)
		e.Refused += c.Count
		e.RefusedBy[column[ErrorCode(c.Outcome)]] += c.Count
	}
	return r
}

// seriesStep is the shortest of a second, a minute, an hour and a day (then
// whole days) that covers first to last in at most MaxSaleSeries entries.
func seriesStep(first, last time.Time) time.Duration {
	for _, step := range []time.Duration{time.Second, time.Minute, time.Hour, 24 * time.Hour} {
		if last.Truncate(step).Sub(first.Truncate(step))/step < MaxSaleSeries {
			return step
		}
	}
	days := last.Sub(first)/(24*time.Hour)/(MaxSaleSeries-1) + 1
	return days * 24 * time.Hour
}

// FlushSale adds the reserve answers counted since the last flush to the
// database. Every instance runs it once a second and once more when it
// stops. Counts it could not write are kept for the next flush.
func (s *Service) FlushSale(ctx context.Context) error {
	s.saleFlush.Lock()
	defer s.saleFlush.Unlock()
	counts := s.sales.take(s.saleBuf[:0])
	if len(counts) == 0 {
		return nil
	}
	s.obs.DatabaseWrite("sale-counts")
	if err := s.store.AddSaleCounts(ctx, counts); err != nil {
		s.sales.putBack(counts)
		return err
	}
	s.saleBuf = counts
	return nil
}

// saleKey is one counter: a voucher code's answers of one outcome in one
// second (Unix seconds).
type saleKey struct {
	code    string
	second  int64
	outcome string
}

// saleCounter counts reserve answers in memory. A count is a map increment
// under a mutex held for nothing else: no allocation once the voucher's key
// of the second exists, and take swaps two maps so that the next second's
// keys reuse the buckets of the last.
type saleCounter struct {
	mu    sync.Mutex
	cur   map[saleKey]int64
	spare map[saleKey]int64
}

func newSaleCounter() *saleCounter {
	return &saleCounter{cur: map[saleKey]int64{}, spare: map[saleKey]int64{}}
}

// add counts one answer of code at t with the reserve's error code ("" for
// a success); answers that say nothing about the sale are not counted.
func (c *saleCounter) add(code string, t time.Time, errCode ErrorCode) {
	outcome, ok := saleOutcome(errCode)
	if !ok {
		return
	}
	k := saleKey{code: code, second: t.Unix(), outcome: outcome}
	c.mu.Lock()
	c.cur[k]++
	c.mu.Unlock()
}

// take returns the counts since the last take, appended to buf, and starts
// counting afresh.
func (c *saleCounter) take(buf []SaleCount) []SaleCount {
	c.mu.Lock()
	m := c.cur
	c.cur = c.spare
	c.mu.Unlock()
	for k, n := range m {
		buf = append(buf, SaleCount{Code: k.code, Second: time.Unix(k.second, 0).UTC(), Outcome: k.outcome, Count: n})
	}
	clear(m)
	c.mu.Lock()
	c.spare = m
	c.mu.Unlock()
	return buf
}

// putBack adds counts that could not be written back to the counters.
func (c *saleCounter) putBack(counts []SaleCount) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range counts {
		c.cur[saleKey{code: n.Code, second: n.Second.Unix(), outcome: n.Outcome}] += n.Count
	}
}
