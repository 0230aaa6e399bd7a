package components

import (
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"voucherd/internal/voucher"
)

// TestSaleSection_DrawsAdmittedAndRefusalsByCodeWithTheSellOut: a bar per
// second, admitted below and each refusal code stacked on it in its own
// colour, the sell-out marked, the sentence and the CSV link.
func TestSaleSection_DrawsAdmittedAndRefusalsByCodeWithTheSellOut(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	first, soldOut := t0.Add(100*time.Millisecond), t0.Add(380*time.Millisecond)
	r := voucher.SaleReport{
		Code: "SALE", FirstUseAt: &first, SoldOutAt: &soldOut, Requests: 48_263, Admitted: 50, Step: time.Second,
		Refusals: []voucher.RefusalCount{{Code: voucher.OutOfStock, Count: 48_200}, {Code: voucher.AlreadyUsed, Count: 13}},
		Series: []voucher.SaleSecond{
			{At: t0, Admitted: 50, Refused: 30_010, RefusedBy: []int64{30_000, 10}},
			{At: t0.Add(time.Second), Refused: 18_203, RefusedBy: []int64{18_200, 3}},
		},
	}
	c := SaleChartOf(r, time.UTC)
	doc := render(t, SaleSection(c))
	if got := doc.Find(testid("sale-sentence")).Text(); got != "Sold out 0.28 s after the first use; 48,213 turned away." {
		t.Errorf("sentence %q", got)
	}
	bars := doc.Find(testid("sale-bar"))
	if bars.Length() != 5 { // 3 in the first second, 2 in the second
		t.Fatalf("%d bars, want 5", bars.Length())
	}
	classes := []string{}
	bars.Each(func(_ int, b *goquery.Selection) { classes = append(classes, b.AttrOr("class", "")) })
	if strings.Join(classes, " ") != "admitted refused-0 refused-1 refused-0 refused-1" {
		t.Errorf("bar classes %v", classes)
	}
	if doc.Find(testid("sale-sold-out")).Length() != 1 {
		t.Error("no sell-out mark")
	}
	if got := doc.Find(testid("sale-csv")).AttrOr("href", ""); got != "/admin/vouchers/SALE/sale.csv" {
		t.Errorf("CSV link %q", got)
	}
	if got := doc.Find(testid("sale-legend")).Text(); !strings.Contains(got, "Refused: OUT_OF_STOCK: 48,200") || !strings.Contains(got, "Admitted: 50") {
		t.Errorf("legend %q", got)
	}
	rows := SaleCSV(r)
	if strings.Join(rows[0], ",") != "second,admitted,refused,OUT_OF_STOCK,ALREADY_USED" ||
		strings.Join(rows[1], ",") != "2026-12-01T12:00:00Z,50,30010,30000,10" || len(rows) != 3 {
		t.Errorf("CSV %v", rows)
	}

	// Uses remain; nothing yet.
	r.SoldOutAt = nil
	if got := SaleSentence(r); got != "50 admitted of 48,263 requests; 48,213 turned away; uses remain." {
		t.Errorf("sentence while uses remain %q", got)
	}
	if got := render(t, SaleSection(SaleChartOf(voucher.SaleReport{Code: "NEW", Series: []voucher.SaleSecond{}}, time.UTC))); got.Find(testid("sale-chart")).Length() != 0 ||
		got.Find(testid("sale-sentence")).Text() != "No reserve answered yet." {
		t.Errorf("an unsold voucher: %s", got.Text())
	}
}
