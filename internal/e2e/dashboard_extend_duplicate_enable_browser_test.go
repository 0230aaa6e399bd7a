package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboard_ExtendDuplicateEnable walks in Chromium what issue 15 left
// for last: a marketer extends a flash sale that sold out (a lower total is
// refused next to its field; 10 raised to 15 makes 5 more uses to sell, the
// fast counter with them), then duplicates it into a new voucher with the
// same terms; an admin enables a user who was disabled and lifts a sign-in
// lock from the list of locks. Each page and form
// state has no serious axe-core violation, fits 390 px, and is kept as a
// screenshot (web/testdata/screenshots/r3-*.png).
func TestDashboard_ExtendDuplicateEnable(t *testing.T) {
	chromiumPath(t)
	dbURL, _ := ownDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL})
	env := map[string]string{"DATABASE_URL": dbURL}
	const password = "correct horse battery"
	addUser(t, env, "mia@example.com", "Mia Marketer", "marketer", password)
	addUser(t, env, "ada@example.com", "Ada Admin", "admin", password)
	addUser(t, env, "otto@example.com", "Otto Operator", "operator", password)

	now := time.Now().UTC()
	code := uniqueCode("R3-SALE")
	r := gql(t, s, adminToken, `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { voucher { code } error { code message } } }`,
		map[string]any{"in": map[string]any{
			"code": code, "discountType": "PERCENT", "discountPercent": 20, "maxDiscountAmount": 1500, "currency": "EUR",
			"budgetAmount": 50000, "minOrderAmount": 2000, "totalLimit": 10, "perUserLimit": 1, "flash": true,
			"startsAt": now.Add(-time.Hour).Format(time.RFC3339), "endsAt": now.Add(2 * time.Hour).Format(time.RFC3339),
		}})
	if str(path(r.Body, "data", "createVoucher", "voucher", "code")) != code {
		t.Fatalf("creating %s: %s", code, r.Raw)
	}
	if counts := stampede(30, func(i int) string { return restAPI{s}.reserve(t, code, int64(60_000+i), uniqueOrder(), 5000).Error }); counts[""] != 10 {
		t.Fatalf("selling out: %v", counts)
	}

	b := newTab(t, s, "r3")
	fill := func(sel, value string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
			const el = document.querySelector(%q);
			el.value = %q;
			el.dispatchEvent(new Event("input", {bubbles: true}));
			el.dispatchEvent(new Event("change", {bubbles: true}));
		})()`, sel, value))
	}
	b.signIn("mia@example.com", password)

	// Extend: the form, a refused lower total, the raise.
	b.open("/admin/vouchers/"+code, `[data-testid=extend-voucher]`)
	b.step("open the extend form", chromedp.Click(chromedp.CSS(`[data-testid=extend-voucher]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=extend-form]`)))
	if got := b.text(`[data-testid=extend-now]`); !strings.Contains(got, "10 uses in total, 10 held or sold") {
		t.Errorf("the extend form says %q, want the total and what is held", got)
	}
	b.axe("the extend form")
	b.phone("r3-extend-390", `[data-testid=extend-submit]`, `#totalLimit`)
	b.step("a lower total for a flash sale",
		fill(`#totalLimit`, "8"),
		pressJS(`[data-testid=extend-submit]`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=error-totalLimit]`)),
	)
	if got := b.text(`[data-testid=error-totalLimit]`); !strings.Contains(got, "below the 10 uses already held or sold") {
		t.Errorf("the refusal next to the total says %q", got)
	}
	if got := b.eval(`document.activeElement.id + " " + document.querySelector("#totalLimit").getAttribute("aria-invalid")`); got != "totalLimit true" {
		t.Errorf("after the refusal the focus and aria-invalid are %q, want the total field, invalid", got)
	}
	b.axe("the extend form refused")
	b.phone("r3-extend-refused-390", `[data-testid=error-totalLimit]`, `[data-testid=extend-submit]`)
	b.step("raise the total to 15",
		fill(`#totalLimit`, "15"),
		pressJS(`[data-testid=extend-submit]`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=notice]`)),
	)
	if got := b.text(`[data-testid=fig-remaining]`); got != "5" {
		t.Errorf("remaining after the raise = %q, want 5", got)
	}
	if got := b.text(`[data-testid=fig-gate]`); !strings.HasPrefix(got, "5") {
		t.Errorf("the fast counter after the raise = %q, want 5", got)
	}
	if got := b.text(`[data-testid=audit]`); !strings.Contains(got, "mia@example.com") || !strings.Contains(got, "totalLimit 10 → 15") {
		t.Errorf("the audit log after the raise: %q", got)
	}
	b.axe("the voucher page after the raise")
	b.phone("r3-extended-390", `[data-testid=notice]`, `[data-testid=duplicate-voucher]`)
	if counts := stampede(30, func(i int) string { return restAPI{s}.reserve(t, code, int64(70_000+i), uniqueOrder(), 5000).Error }); counts[""] != 5 {
		t.Errorf("the sale after the raise: %v, want exactly 5 successes", counts)
	}

	// Duplicate: the form with the terms, a new code and window.
	b.step("duplicate it", chromedp.Click(chromedp.CSS(`[data-testid=duplicate-voucher]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=duplicate-of]`)))
	for sel, want := range map[string]string{"#code": "", "#startsAt": "", "#discountAmount": "", "#discountPercent": "20", "#maxDiscountAmount": "15.00", "#currency": "EUR", "#budgetAmount": "500.00", "#minOrderAmount": "20.00", "#totalLimit": "15"} {
		if got := b.eval(fmt.Sprintf(`document.querySelector(%q).value`, sel)); got != want {
			t.Errorf("the duplicate form's %s = %q, want %q", sel, got, want)
		}
	}
	if got := b.eval(`String(document.querySelector("[data-testid=flash]").checked)`); got != "true" {
		t.Errorf("the duplicate form's flash = %s, want true", got)
	}
	b.axe("the duplicate form")
	b.phone("r3-duplicate-390", `[data-testid=voucher-submit]`, `#code`)
	copyCode := uniqueCode("R3-COPY")
	b.step("fill in the new code and window",
		fill(`#code`, copyCode),
		fill(`#startsAt`, now.Add(24*time.Hour).Format("2006-01-02T15:04")),
		fill(`#endsAt`, now.Add(30*time.Hour).Format("2006-01-02T15:04")),
		fill(`#tz`, "UTC"),
		pressJS(`[data-testid=voucher-submit]`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=voucher-title]`)),
	)
	if got := b.text(`[data-testid=voucher-title]`); !strings.Contains(got, copyCode) {
		t.Fatalf("after submitting the duplicate the page is %q", got)
	}
	if got := b.text(`[data-testid=audit]`); !strings.Contains(got, "duplicated from "+code) || !strings.Contains(got, "mia@example.com") {
		t.Errorf("the duplicate's audit log: %q", got)
	}
	if got := b.text(`[data-testid=fig-discount]`); !strings.Contains(got, "20") {
		t.Errorf("the duplicate's discount: %q", got)
	}
	b.axe("the duplicated voucher")
	b.phone("r3-duplicated-390", `[data-testid=notice]`)

	// Enable: an admin lets a disabled user back in.
	if _, err := voucherdRun(dbURL, "user", "disable", "-email", "otto@example.com"); err != nil {
		t.Fatal(err)
	}
	a := newTab(t, s, "r3-admin")
	a.signIn("ada@example.com", password)
	otto := `[data-testid=user-row][data-email="otto@example.com"]`
	a.open("/admin/users", otto+` [data-testid=enable-user]`)
	a.axe("the users page with a disabled user")
	a.phone("r3-users-disabled-390", otto+` [data-testid=enable-user]`)
	a.step("enable otto", chromedp.Click(chromedp.CSS(otto+` [data-testid=enable-user]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=notice]`)))
	if got := a.text(otto + ` [data-testid=user-status]`); got != "active" {
		t.Errorf("otto's status after enabling = %q", got)
	}
	if got := a.text(`[data-testid=user-audit]`); !strings.Contains(got, "enabled") {
		t.Errorf("the users' audit log after enabling: %q", got)
	}
	a.axe("the users page after enabling")
	a.phone("r3-users-enabled-390", `[data-testid=notice]`, otto+` [data-testid=disable-user]`)
	if st := newDashboardClient(s).signIn(t, "otto@example.com", password); st != 303 {
		t.Errorf("otto signing in after being enabled: %d, want 303", st)
	}

	// Sign-in locks: the page lists mia's email, locked by five wrong
	// passwords, and its row's button lifts it.
	for range 5 {
		newDashboardClient(s).signIn(t, "mia@example.com", "not her password")
	}
	mia := `[data-testid=lock-row][data-key="mia@example.com"]`
	a.open("/admin/sign-in-locks", mia+` [data-testid=lift-lock]`)
	if got := a.text(mia + ` [data-testid=lock-attempts]`); got != "5" {
		t.Errorf("mia's lock lists %q failures, want 5", got)
	}
	a.axe("the sign-in locks page")
	a.phone("r3-locks-390", mia+` [data-testid=lift-lock]`, `[data-testid=lift-lock-submit]`)
	a.step("lift mia's lock", chromedp.Click(chromedp.CSS(mia+` [data-testid=lift-lock]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=no-locks]`)))
	if st := newDashboardClient(s).signIn(t, "mia@example.com", password); st != 303 {
		t.Errorf("mia signing in after her lock was lifted: %d, want 303", st)
	}
}

// pressJS clicks an element as a script does: after typing, the window's
// preview and the amounts' echo re-render parts of the form, and a click by
// coordinates can land where the button was (the flake of a full run).
func pressJS(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).click()`, sel))
}
