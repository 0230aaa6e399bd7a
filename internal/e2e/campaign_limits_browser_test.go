package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboard_CampaignFormSetsAPeriodLimit fills the new-campaign form's
// first period limit row, its calendar and segments in Chromium: a max of 0
// is refused on the limit (the focus on it, what was typed kept), then a
// max of 3 per week per customer creates the campaign with them, which its
// page shows.
func TestDashboard_CampaignFormSetsAPeriodLimit(t *testing.T) {
	chromiumPath(t)
	dbURL, db := ownDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL})
	const password = "correct horse battery"
	addUser(t, map[string]string{"DATABASE_URL": dbURL}, "mia@example.com", "Mia Marketer", "marketer", password)

	b := newTab(t, s, "camp-limits")
	fill := func(sel, value string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
			const el = document.querySelector(%q);
			el.value = %q;
			el.dispatchEvent(new Event("input", {bubbles: true}));
			el.dispatchEvent(new Event("change", {bubbles: true}));
		})()`, sel, value))
	}
	b.signIn("mia@example.com", password)
	b.open("/admin/campaigns/new", `[data-testid=campaign-form]`)
	now := time.Now().UTC()
	b.step("a limit of 0",
		fill(`#name`, "Weekly regulars"),
		fill(`#codeCount`, "5"),
		fill(`#discountAmount`, "2.50"),
		fill(`#currency`, "EUR"),
		fill(`#startsAt`, now.Add(-time.Hour).Format("2006-01-02T15:04")),
		fill(`#endsAt`, now.Add(48*time.Hour).Format("2006-01-02T15:04")),
		fill(`#tz`, "UTC"),
		fill(`[data-testid=limitScope-0]`, "CUSTOMER"),
		fill(`[data-testid=limitPeriod-0]`, "WEEK"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=limitMax-0]`), "0"),
		fill(`#timeZone`, "Asia/Tokyo"),
		fill(`#eligibleSegments`, "vip, regular"),
		pressJS(`[data-testid=campaign-submit]`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=error-periodLimits]`)),
	)
	if got := b.text(`[data-testid=error-periodLimits]`); !strings.Contains(got, "max must be at least 1") {
		t.Errorf("the message next to the limits is %q", got)
	}
	b.step("the focus on the limit", chromedp.Poll[chromedp.Void](`document.readyState === "complete"`, chromedp.WithPollingInterval(50*time.Millisecond)))
	if got := b.eval(`document.activeElement.dataset.testid + " " + document.activeElement.value`); got != "limitMax-0 0" {
		t.Errorf("after the refusal the focus is on %q, want the first limit's max, 0", got)
	}
	if got := b.eval(`[document.querySelector("[data-testid=limitPeriod-0]").value, document.querySelector("#timeZone").value, document.querySelector("#eligibleSegments").value].join("|")`); got != "WEEK|Asia/Tokyo|vip, regular" {
		t.Errorf("the refused form kept %q", got)
	}
	b.axe("the new-campaign form with its limit refused")

	b.step("a limit of 3",
		fill(`[data-testid=limitMax-0]`, "3"),
		pressJS(`[data-testid=campaign-submit]`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=campaign-title]`)),
	)
	if got := b.text(`[data-testid=fig-period-limits]`); got != "3 per week per customer (Asia/Tokyo)" {
		t.Errorf("the campaign's page shows the limits %q", got)
	}
	if got := b.text(`[data-testid=fig-segments]`); got != "vip, regular" {
		t.Errorf("the campaign's page shows the segments %q", got)
	}
	var limits, segments []string
	var zone string
	if err := db.QueryRow(context.Background(), `SELECT v.period_limits, v.time_zone, v.eligible_segments
		FROM campaign c JOIN voucher v ON v.code = c.voucher_code WHERE c.name = 'Weekly regulars'`).Scan(&limits, &zone, &segments); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%v %s %v", limits, zone, segments); got != "[CUSTOMER:WEEK:3] Asia/Tokyo [vip regular]" {
		t.Errorf("the campaign's row holds %s", got)
	}
}
