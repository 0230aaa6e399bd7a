package e2e

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestSaleChart_TheVoucherPageDrawsTheSaleAndItsCSV: a sale of 10 uses over
// three seconds (8 customers, then 5 of them again and 2 more, then 25
// late ones) is drawn on a marketer's voucher page in Chromium: admitted
// bars with ALREADY_USED and OUT_OF_STOCK stacked on them in colours of
// their own, the sell-out marked, "Sold out ... after the first use; 30
// turned away"; its CSV link gives the series with a header row and a
// column per refusal code, adding up to 10 admitted, 25 OUT_OF_STOCK and 5
// ALREADY_USED. The page has no serious axe-core violation and the chart
// fits 390 px.
func TestSaleChart_TheVoucherPageDrawsTheSaleAndItsCSV(t *testing.T) {
	s := sharedServer(t)
	email := "sale-marketer-" + strings.ToLower(uniqueOrder()) + "@example.com"
	const pass = "the sale marketer's password"
	addUser(t, nil, email, "Sale Marketer", "marketer", pass)
	code := createVoucher(t, s, voucherSpec{TotalLimit: 10, Flash: true})
	answers := map[string]int{}
	reserve := func(customer int) {
		answers[restAPI{s}.reserve(t, code, int64(50_000+customer), uniqueOrder(), 100).Error]++
	}
	for c := range 8 {
		reserve(c)
	}
	time.Sleep(1100 * time.Millisecond)
	for c := range 5 {
		reserve(c) // holds its one use already
	}
	reserve(8)
	reserve(9)
	time.Sleep(1100 * time.Millisecond)
	for c := range 25 {
		reserve(10 + c)
	}
	if answers[""] != 10 || answers["OUT_OF_STOCK"] != 25 || answers["ALREADY_USED"] != 5 {
		t.Fatalf("the sale's answers: %v", answers)
	}
	waitSale(t, s, code, 40, 10)

	b := newTab(t, s, "sale")
	b.signIn(email, pass)
	b.open("/admin/vouchers/"+code, `[data-testid=sale-chart]`)
	sentence := b.text(`[data-testid=sale-sentence]`)
	if !regexp.MustCompile(`^Sold out (\d+\.\d+ s|\d+ min \d+ s) after the first use; 30 turned away\.$`).MatchString(sentence) {
		t.Errorf("sentence %q", sentence)
	}
	classes := b.eval(`[...new Set([...document.querySelectorAll("[data-testid=sale-bar]")].map(r => r.getAttribute("class")))].sort().join(" ")`)
	if classes != "admitted refused-0 refused-1" {
		t.Errorf("bar colours %q, want admitted and two refusal codes", classes)
	}
	if bars, _ := strconv.Atoi(b.eval(`String(new Set([...document.querySelectorAll("[data-testid=sale-bar]")].map(r => r.getAttribute("x"))).size)`)); bars < 3 {
		t.Errorf("bars at %d places, want one a second over at least 3 seconds", bars)
	}
	if got := b.eval(`String(document.querySelectorAll("[data-testid=sale-sold-out]").length)`); got != "1" {
		t.Errorf("%s sell-out marks, want 1", got)
	}
	if legend := b.text(`[data-testid=sale-legend]`); !strings.Contains(legend, "Admitted: 10") || !strings.Contains(legend, "Refused: OUT_OF_STOCK: 25") || !strings.Contains(legend, "Refused: ALREADY_USED: 5") {
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
	if strings.Join(rows[0], ",") != "second,admitted,refused,OUT_OF_STOCK,ALREADY_USED" {
		t.Errorf("CSV header %v", rows[0])
	}
	sums := make([]int, len(rows[0]))
	for _, r := range rows[1:] {
		for i := 1; i < len(r); i++ {
			n, err := strconv.Atoi(r[i])
			if err != nil {
				t.Fatalf("CSV row %v: %v", r, err)
			}
			sums[i] += n
		}
	}
	if want := []int{0, 10, 30, 25, 5}; !slices.Equal(sums, want) || len(rows) < 4 {
		t.Errorf("CSV sums %v over %d rows, want %v over at least 3", sums, len(rows)-1, want)
	}

	// The chart alone, for docs/dashboard.md.
	shot, err := chromedp.Run(b.ctx, chromedp.Screenshot(chromedp.CSS(`[data-testid=sale]`)))
	if err != nil {
		t.Fatalf("a screenshot of the sale: %v", err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir, "sale-chart.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}

	b.axe("the voucher page with its sale")
	b.phone("sale-390px", `[data-testid=sale-chart]`, `[data-testid=sale-csv]`)
}
