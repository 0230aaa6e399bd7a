package e2e

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestSaleChart_TheVoucherPageDrawsTheSaleAndItsCSV: after 40 reserves on 10
// uses of a flash voucher, a marketer's voucher page in Chromium draws the
// sale (admitted bars and OUT_OF_STOCK stacked on them, the sell-out
// marked), says "Sold out ... after the first use; 30 turned away", and its
// CSV link gives the series with a header row and a column per refusal
// code, adding up to 10 admitted and 30 refused. The page has no serious
// axe-core violation and the chart fits 390 px.
func TestSaleChart_TheVoucherPageDrawsTheSaleAndItsCSV(t *testing.T) {
	s := sharedServer(t)
	email := "sale-marketer-" + strings.ToLower(uniqueOrder()) + "@example.com"
	const pass = "the sale marketer's password"
	addUser(t, nil, email, "Sale Marketer", "marketer", pass)
	code := createVoucher(t, s, voucherSpec{TotalLimit: 10, Flash: true})
	answers := stampede(40, func(i int) string {
		return restAPI{s}.reserve(t, code, int64(50_000+i), uniqueOrder(), 100).Error
	})
	if answers[""] != 10 || answers["OUT_OF_STOCK"] != 30 {
		t.Fatalf("40 reserves on 10 uses: %v", answers)
	}
	waitSale(t, s, code, 40, 10)

	b := newTab(t, s, "sale")
	b.signIn(email, pass)
	b.open("/admin/vouchers/"+code, `[data-testid=sale-chart]`)
	sentence := b.text(`[data-testid=sale-sentence]`)
	if !regexp.MustCompile(`^Sold out \d+\.\d\d s after the first use; 30 turned away\.$`).MatchString(sentence) {
		t.Errorf("sentence %q", sentence)
	}
	classes := b.eval(`[...new Set([...document.querySelectorAll("[data-testid=sale-bar]")].map(r => r.getAttribute("class")))].sort().join(" ")`)
	if classes != "admitted refused-0" {
		t.Errorf("bar colours %q, want admitted and one refusal code", classes)
	}
	if got := b.eval(`String(document.querySelectorAll("[data-testid=sale-sold-out]").length)`); got != "1" {
		t.Errorf("%s sell-out marks, want 1", got)
	}
	if legend := b.text(`[data-testid=sale-legend]`); !strings.Contains(legend, "Admitted: 10") || !strings.Contains(legend, "Refused: OUT_OF_STOCK: 30") {
		t.Errorf("legend %q", legend)
	}
	// The chart is drawn, not an empty box: its bars have height.
	if got := b.eval(`String([...document.querySelectorAll("[data-testid=sale-bar]")].every(r => r.getBoundingClientRect().height > 0))`); got != "true" {
		t.Error("a bar of the sale is not drawn")
	}

	// The CSV, fetched as the link gives it, with the page's session.
	fetchCtx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	out, err := chromedp.Run(fetchCtx, chromedp.Evaluate[string](`fetch(document.querySelector("[data-testid=sale-csv]").href, {credentials: "same-origin"}).then(async r => JSON.stringify({
		status: r.status, type: r.headers.get("Content-Type"), disposition: r.headers.get("Content-Disposition"), body: await r.text()}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("fetching the CSV: %v", err)
	}
	var export struct {
		Status            int
		Type, Disposition string
		Body              string
	}
	if err := json.Unmarshal([]byte(out), &export); err != nil {
		t.Fatalf("the CSV: %v (%.200s)", err, out)
	}
	if export.Status != 200 || !strings.Contains(export.Type, "text/csv") || !strings.Contains(export.Disposition, "attachment") {
		t.Fatalf("the CSV answered %d, %q, %q", export.Status, export.Type, export.Disposition)
	}
	rest := export.Body
	rows, err := csv.NewReader(strings.NewReader(rest)).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("the CSV %q: %v", rest, err)
	}
	if strings.Join(rows[0], ",") != "second,admitted,refused,OUT_OF_STOCK" {
		t.Errorf("CSV header %v", rows[0])
	}
	var admitted, refused, outOfStock int
	for _, r := range rows[1:] {
		a, _ := strconv.Atoi(r[1])
		f, _ := strconv.Atoi(r[2])
		o, _ := strconv.Atoi(r[3])
		admitted, refused, outOfStock = admitted+a, refused+f, outOfStock+o
	}
	if admitted != 10 || refused != 30 || outOfStock != 30 {
		t.Errorf("CSV sums admitted %d refused %d OUT_OF_STOCK %d, want 10, 30, 30", admitted, refused, outOfStock)
	}

	b.axe("the voucher page with its sale")
	b.phone("sale-390px", `[data-testid=sale-chart]`, `[data-testid=sale-csv]`)
}
