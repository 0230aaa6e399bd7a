package components

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"voucherd/internal/voucher"
)

// SaleChart is the voucher page's drawing of its sale (voucher.SaleReport):
// per entry of the series a bar of the uses admitted with the refusals
// stacked on it by code, the sell-out moment marked, and a sentence.
type SaleChart struct {
	Width, Height float64
	Bars          []SaleBar
	YLabels       []ChartLabel
	XLabels       []ChartLabel
	Legend        []SaleLegend
	// SoldOut marks the sell-out moment; nil while uses remain.
	SoldOut *ChartLabel
	// Sentence says what happened, in a line.
	Sentence string
	// Step is what one bar covers, for people ("a second").
	Step  string
	Empty bool
	// CSV is the series as a file.
	CSV string
}

// SaleBar is one rectangle of a bar: admitted, or one refusal code.
type SaleBar struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

// SaleLegend names a colour of the chart.
type SaleLegend struct {
	Class, Text string
	Count       int64
}

// saleClasses colour the refusal codes in the order of the report's
// refusals (most first); past these, the last is reused.
var saleClasses = []string{"refused-0", "refused-1", "refused-2", "refused-3", "refused-4", "refused-5"}

func saleClass(i int) string { return saleClasses[min(i, len(saleClasses)-1)] }

// SaleChartOf lays out a voucher's sale for its page.
func SaleChartOf(r voucher.SaleReport, zone *time.Location) SaleChart {
	c := SaleChart{Width: chartWidth, Height: chartHeight, Sentence: SaleSentence(r), CSV: "/admin/vouchers/" + r.Code + "/sale.csv", Step: stepLabel(r.Step)}
	if len(r.Series) == 0 {
		c.Empty = true
		return c
	}
	c.Legend = append(c.Legend, SaleLegend{Class: "admitted", Text: "Admitted", Count: r.Admitted})
	for i, rc := range r.Refusals {
		c.Legend = append(c.Legend, SaleLegend{Class: saleClass(i), Text: "Refused: " + string(rc.Code), Count: rc.Count})
	}
	var top int64 = 1
	for _, e := range r.Series {
		top = max(top, e.Admitted+e.Refused)
	}
	w := chartWidth - chartLeft - chartRight
	h := chartHeight - chartTop - chartBottom
	n := float64(len(r.Series))
	bw := w / n
	gap := 0.0
	if bw > 4 {
		gap = 1
	}
	y := func(v int64) float64 { return chartTop + h*(1-float64(v)/float64(top)) }
	for i, e := range r.Series {
		x := chartLeft + float64(i)*bw
		at := e.At.In(zone).Format("15:04:05")
		var base int64
		stack := func(v int64, class, what string) {
			if v <= 0 {
				return
			}
			y0, y1 := y(base+v), y(base)
			c.Bars = append(c.Bars, SaleBar{X: x, Y: y0, W: max(bw-gap, 0.5), H: y1 - y0, Class: class,
				Title: fmt.Sprintf("%s: %s %s", at, thousands(v), what)})
			base += v
		}
		stack(e.Admitted, "admitted", "admitted")
		for j, v := range e.RefusedBy {
			stack(v, saleClass(j), "refused "+string(r.Refusals[j].Code))
		}
	}
	for _, v := range []int64{0, top / 2, top} {
		c.YLabels = append(c.YLabels, ChartLabel{X: chartLeft - 6, Y: y(v) + 4, Text: thousands(v)})
	}
	first := r.Series[0].At
	end := r.Series[len(r.Series)-1].At.Add(r.Step)
	span := end.Sub(first).Seconds()
	layout := "15:04:05"
	if end.Sub(first) > 24*time.Hour {
		layout = "2 Jan 15:04"
	}
	c.XLabels = []ChartLabel{
		{X: chartLeft, Y: chartHeight - 8, Text: first.In(zone).Format(layout)},
		{X: chartWidth - chartRight, Y: chartHeight - 8, Text: end.In(zone).Format(layout)},
	}
	if r.SoldOutAt != nil {
		x := chartLeft + w*r.SoldOutAt.Sub(first).Seconds()/span
		c.SoldOut = &ChartLabel{X: min(max(x, chartLeft), chartWidth-chartRight), Y: chartTop, Text: "sold out " + r.SoldOutAt.In(zone).Format("15:04:05.000")}
	}
	return c
}

// SaleSentence says in a line how the sale went: "Sold out 0.28 s after
// the first use; 48,213 turned away."
func SaleSentence(r voucher.SaleReport) string {
	refused := r.Refused()
	away := thousands(refused) + " turned away"
	switch {
	case r.Requests == 0:
		return "No reserve answered yet."
	case r.FirstUseAt != nil && r.SoldOutAt != nil:
		return "Sold out " + Seconds(r.SoldOutAt.Sub(*r.FirstUseAt)) + " after the first use; " + away + "."
	case r.Admitted == 0:
		return "No use taken; " + away + "."
	}
	return thousands(r.Admitted) + " admitted of " + thousands(r.Requests) + " requests; " + away + "; uses remain."
}

// Seconds formats a short lapse for people: "0.28 s", "12.4 s", "3 min 12 s",
// longer ones as Duration does.
func Seconds(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
	return Duration(d)
}

func stepLabel(d time.Duration) string {
	switch d {
	case time.Second:
		return "a second"
	case time.Minute:
		return "a minute"
	case time.Hour:
		return "an hour"
	}
	return strings.TrimSpace(Duration(d))
}

// SaleCSV is the series as rows: a header (second, admitted, refused, then
// a column per refusal code), then an entry a row, times in UTC.
func SaleCSV(r voucher.SaleReport) [][]string {
	first := "second"
	if r.Step != time.Second {
		first = "from" // a minute (an hour, a day) from then
	}
	head := []string{first, "admitted", "refused"}
	for _, c := range r.Refusals {
		head = append(head, string(c.Code))
	}
	rows := [][]string{head}
	for _, e := range r.Series {
		row := []string{e.At.UTC().Format(time.RFC3339), strconv.FormatInt(e.Admitted, 10), strconv.FormatInt(e.Refused, 10)}
		for _, v := range e.RefusedBy {
			row = append(row, strconv.FormatInt(v, 10))
		}
		rows = append(rows, row)
	}
	return rows
}
