package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestVoucherList_ShowsAVoucherCreatedAfterThePageLoaded: the list that
// refreshes itself during a sale also shows a voucher created after it
// loaded (in its place in the order, with the total), without a reload and
// with the keyboard focus kept on the link it was on.
func TestVoucherList_ShowsAVoucherCreatedAfterThePageLoaded(t *testing.T) {
	dbURL, _ := ownDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL})
	const password = "mia's long password"
	addUser(t, map[string]string{"DATABASE_URL": dbURL}, "mia@example.com", "Mia Marketer", "marketer", password)
	first := createVoucher(t, s, voucherSpec{Code: uniqueCode("LIVE"), StartsAt: time.Now().Add(-2 * time.Hour)})

	b := newTab(t, s, "live-list")
	b.signIn("mia@example.com", password)
	link := `[data-testid=voucher-row][data-code="` + first + `"] [data-testid=voucher-code]`
	b.step("focus the first voucher's link",
		chromedp.WaitVisible(chromedp.CSS(link)),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('`+link+`').focus(); window.stillThisPage = "yes"`),
	)
	before := b.text(`[data-testid=list-total]`)

	created := createVoucher(t, s, voucherSpec{Code: uniqueCode("NEWER"), StartsAt: time.Now().Add(-time.Minute)})
	b.step("the new voucher appears",
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`!!document.querySelector('[data-testid=voucher-row][data-code="%s"]')`, created),
			chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)),
	)
	if got := b.eval(`JSON.stringify([...document.querySelectorAll("[data-testid=voucher-row]")].map(r => r.dataset.code))`); got != fmt.Sprintf(`[%q,%q]`, created, first) {
		t.Errorf("the rows after the refresh: %s, want the newer live voucher first", got)
	}
	if got := b.text(`[data-testid=list-total]`); got == before || !strings.Contains(got, "2") {
		t.Errorf("the total after the refresh = %q (before %q)", got, before)
	}
	if got := b.eval(`document.activeElement && document.activeElement.closest("[data-code]") ? document.activeElement.closest("[data-code]").dataset.code : String(document.activeElement && document.activeElement.tagName)`); got != first {
		t.Errorf("after the rows were refreshed the focus is on %q, want still %s's link", got, first)
	}
	if got := b.eval(`window.stillThisPage || "reloaded"`); got != "yes" {
		t.Error("the page was reloaded to show the new voucher")
	}
	// The figures of the new row refresh in place from then on.
	if got := b.eval(`document.querySelector("#list-poll").getAttribute("hx-get")`); !strings.Contains(got, "shown=") {
		t.Errorf("the poll after the refresh asks %q", got)
	}
	b.axe("the list after new rows")
	b.shots.take(b.ctx, "live-list-new-voucher")
}
