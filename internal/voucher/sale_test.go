package voucher

import (
	"sync"
	"testing"
	"time"
)

// TestSaleCounter_CountsEveryAnswerOnceAcrossTakes: answers counted from
// many goroutines while another takes the counts again and again are each
// in exactly one take, by code, second and outcome; answers that say
// nothing about the sale are not counted.
func TestSaleCounter_CountsEveryAnswerOnceAcrossTakes(t *testing.T) {
	c := newSaleCounter()
	t0 := time.Unix(1_800_000_000, 0)
	const workers, each = 8, 5000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				at := t0.Add(time.Duration(i%3) * time.Second)
				switch i % 5 {
				case 0:
					c.add("SALE", at, "")
				case 1, 2:
					c.add("SALE", at, OutOfStock)
				case 3:
					c.add("OTHER", at, AlreadyUsed)
				default:
					// Not about the sale: no voucher, no definite answer.
					c.add("SALE", at, []ErrorCode{NotFound, Unavailable, InvalidInput, Internal}[w%4])
				}
			}
		})
	}
	got := map[saleKey]int64{}
	done := make(chan struct{})
	var takes sync.WaitGroup
	takes.Go(func() {
		var buf []SaleCount
		for {
			select {
			case <-done:
				return
			default:
			}
			buf = c.take(buf[:0])
			for _, n := range buf {
				got[saleKey{n.Code, n.Second.Unix(), n.Outcome}] += n.Count
			}
		}
	})
	wg.Wait()
	close(done)
	takes.Wait()
	for _, n := range c.take(nil) {
		got[saleKey{n.Code, n.Second.Unix(), n.Outcome}] += n.Count
	}

	want := map[saleKey]int64{}
	for i := range each {
		sec := t0.Unix() + int64(i%3)
		switch i % 5 {
		case 0:
			want[saleKey{"SALE", sec, SaleSucceeded}] += workers
		case 1, 2:
			want[saleKey{"SALE", sec, "OUT_OF_STOCK"}] += workers
		case 3:
			want[saleKey{"OTHER", sec, "ALREADY_USED"}] += workers
		}
	}
	if len(got) != len(want) {
		t.Errorf("counted %d keys, want %d: %v", len(got), len(want), got)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%v: counted %d, want %d", k, got[k], n)
		}
	}
	if rest := c.take(nil); len(rest) != 0 {
		t.Errorf("a take after the last left %v", rest)
	}
}

// TestSaleCounter_PutBackKeepsCountsForTheNextTake: a flush that failed
// gives its counts back, added to what was counted meanwhile.
func TestSaleCounter_PutBackKeepsCountsForTheNextTake(t *testing.T) {
	c := newSaleCounter()
	at := time.Unix(1_800_000_000, 0)
	c.add("SALE", at, OutOfStock)
	c.add("SALE", at, OutOfStock)
	failed := c.take(nil)
	c.add("SALE", at, OutOfStock)
	c.putBack(failed)
	got := c.take(nil)
	if len(got) != 1 || got[0].Count != 3 || got[0].Outcome != "OUT_OF_STOCK" || !got[0].Second.Equal(at) {
		t.Fatalf("after a put-back: %+v, want one count of 3 OUT_OF_STOCK at %v", got, at)
	}
}

// TestSaleReport_SeriesAndTotals: requests are the refusals plus the
// successes or the admitted uses, whichever is more; the series is dense
// from the first second to the last, refusals by code in the order of
// Refusals (most first); a span of more than an hour goes per minute.
func TestSaleReport_SeriesAndTotals(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := SaleFacts{
		Counted: []SaleCount{
			{Second: t0, Outcome: SaleSucceeded, Count: 40},
			{Second: t0.Add(time.Second), Outcome: SaleSucceeded, Count: 12}, // 2 replays
			{Second: t0.Add(time.Second), Outcome: "OUT_OF_STOCK", Count: 200},
			{Second: t0.Add(3 * time.Second), Outcome: "OUT_OF_STOCK", Count: 40},
			{Second: t0.Add(3 * time.Second), Outcome: "ALREADY_USED", Count: 10},
		},
		Admitted: []AdmittedCount{{Second: t0, Count: 40}, {Second: t0.Add(time.Second), Count: 10}},
	}
	r := saleReport("SALE", f)
	if r.Admitted != 50 || r.Requests != 302 || r.Refused() != 250 {
		t.Fatalf("admitted %d requests %d refused %d, want 50, 302, 250", r.Admitted, r.Requests, r.Refused())
	}
	if len(r.Refusals) != 2 || r.Refusals[0] != (RefusalCount{OutOfStock, 240}) || r.Refusals[1] != (RefusalCount{AlreadyUsed, 10}) {
		t.Fatalf("refusals %v", r.Refusals)
	}
	if r.Step != time.Second || len(r.Series) != 4 {
		t.Fatalf("step %v, %d entries, want 1s and 4", r.Step, len(r.Series))
	}
	want := []SaleSecond{
		{At: t0, Admitted: 40, RefusedBy: []int64{0, 0}},
		{At: t0.Add(time.Second), Admitted: 10, Refused: 200, RefusedBy: []int64{200, 0}},
		{At: t0.Add(2 * time.Second), RefusedBy: []int64{0, 0}},
		{At: t0.Add(3 * time.Second), Refused: 50, RefusedBy: []int64{40, 10}},
	}
	for i, w := range want {
		g := r.Series[i]
		if !g.At.Equal(w.At) || g.Admitted != w.Admitted || g.Refused != w.Refused || g.RefusedBy[0] != w.RefusedBy[0] || g.RefusedBy[1] != w.RefusedBy[1] {
			t.Errorf("series[%d] = %+v, want %+v", i, g, w)
		}
	}

	// Admitted more than counted (an instance died before its flush).
	f.Counted = f.Counted[2:]
	if r := saleReport("SALE", f); r.Requests != 300 {
		t.Errorf("requests %d with successes uncounted, want 250 + 50 admitted", r.Requests)
	}

	// Two hours: per minute.
	f.Counted = append(f.Counted, SaleCount{Second: t0.Add(2 * time.Hour), Outcome: "OUT_OF_STOCK", Count: 1})
	r = saleReport("SALE", f)
	if r.Step != time.Minute || len(r.Series) != 121 || r.Series[0].Admitted != 50 || r.Series[120].Refused != 1 {
		t.Errorf("two hours: step %v, %d entries (first %+v)", r.Step, len(r.Series), r.Series[0])
	}
	if r := saleReport("SALE", SaleFacts{}); r.Requests != 0 || len(r.Series) != 0 || r.Series == nil {
		t.Errorf("no sale: %+v", r)
	}
}

// BenchmarkSaleCounter_Add is the cost the counting adds to one reserve,
// from as many goroutines as GOMAXPROCS, all on one voucher as in a flash
// sale.
func BenchmarkSaleCounter_Add(b *testing.B) {
	c := newSaleCounter()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			code := OutOfStock
			if i%10 == 0 {
				code = ""
			}
			c.add("FLASH-SALE", time.Now(), code)
			i++
		}
	})
}
