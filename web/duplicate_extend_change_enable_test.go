package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"voucherd/internal/voucher"
	"voucherd/web"
)

var adminCtx = voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleAdmin, Name: "test"})

// TestDuplicateVoucher_FillsTheTermsAndRecordsWhereFrom: "Duplicate" opens
// the new-voucher form with the voucher's terms and an empty code and
// window; submitting creates a voucher with those terms, audited with who
// did it and what it was duplicated from. Operators may not.
func TestDuplicateVoucher_FillsTheTermsAndRecordsWhereFrom(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	capAmount, budget := int64(1500), int64(90000)
	src, err := f.svc.CreateVoucher(adminCtx, voucher.NewVoucher{
		Code: "SRC-" + unique(), DiscountType: voucher.DiscountPercent, DiscountPercent: 15, MaxDiscountAmount: &capAmount,
		Currency: "EUR", BudgetAmount: &budget, MinOrderAmount: 2500, TotalLimit: 40, PerUserLimit: 2,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	m := f.signIn(t, voucher.RoleMarketer)
	page := doc(t, f.do(t, http.MethodGet, "/admin/vouchers/"+src.Code, &m, nil, nil))
	if href, _ := page.Find(`[data-testid=duplicate-voucher]`).Attr("href"); href != "/admin/vouchers/"+src.Code+"/duplicate" {
		t.Errorf("the voucher page's Duplicate link: %q", href)
	}
	rec := f.do(t, http.MethodGet, "/admin/vouchers/"+src.Code+"/duplicate", &m, nil, nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("the duplicate form: %d", rec.Code)
	}
	form := doc(t, rec)
	value := func(name string) string {
		v, _ := form.Find(`[data-testid=voucher-form] [name=` + name + `]`).Attr("value")
		return v
	}
	for name, want := range map[string]string{
		"code": "", "startsAt": "", "endsAt": "", "duplicateOf": src.Code,
		"discountPercent": "15", "maxDiscountAmount": "15.00", "currency": "EUR", "budgetAmount": "900.00",
		"minOrderAmount": "25.00", "totalLimit": "40", "perUserLimit": "2",
	} {
		if got := value(name); got != want {
			t.Errorf("the duplicate form's %s = %q, want %q", name, got, want)
		}
	}
	if got, _ := form.Find(`#discountType option[selected]`).Attr("value"); got != "PERCENT" {
		t.Errorf("the discount type chosen: %q, want PERCENT", got)
	}
	if op := f.signIn(t, voucher.RoleOperator); f.do(t, http.MethodGet, "/admin/vouchers/"+src.Code+"/duplicate", &op, nil, nil).Code != http.StatusForbidden {
		t.Error("an operator reached the duplicate form")
	}

	// Submitted as the browser would: every field of the form, a new code
	// and window filled in.
	submit := url.Values{"csrf": {m.csrf}}
	for _, name := range []string{"duplicateOf", "discountPercent", "maxDiscountAmount", "currency", "budgetAmount", "minOrderAmount", "totalLimit", "perUserLimit"} {
		submit.Set(name, value(name))
	}
	copyCode := strings.ToUpper("COPY-" + unique())
	now := time.Now().UTC()
	submit.Set("discountType", "PERCENT")
	submit.Set("code", copyCode)
	submit.Set("tz", "UTC")
	submit.Set("startsAt", now.Add(24*time.Hour).Format("2006-01-02T15:04"))
	submit.Set("endsAt", now.Add(48*time.Hour).Format("2006-01-02T15:04"))
	rec = f.do(t, http.MethodPost, "/admin/vouchers", &m, submit, nil)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/admin/vouchers/"+copyCode+"?notice=duplicated" {
		t.Fatalf("submitting the duplicate: %d to %q: %s", rec.Code, rec.Header().Get("Location"), rec.Body)
	}
	cp, err := f.svc.Voucher(adminCtx, copyCode)
	if err != nil {
		t.Fatal(err)
	}
	if cp.DiscountType != src.DiscountType || cp.DiscountPercent != 15 || *cp.MaxDiscountAmount != capAmount || cp.Currency != "EUR" ||
		*cp.BudgetAmount != budget || cp.MinOrderAmount != 2500 || cp.TotalLimit != 40 || cp.PerUserLimit != 2 || cp.Flash != src.Flash {
		t.Errorf("the duplicate's terms: %+v, want those of %+v", cp, src)
	}
	audit := doc(t, f.do(t, http.MethodGet, "/admin/vouchers/"+copyCode, &m, nil, nil)).Find(`[data-testid=audit]`).Text()
	for _, want := range []string{f.users[voucher.RoleMarketer], "duplicated", "duplicated from " + src.Code} {
		if !strings.Contains(audit, want) {
			t.Errorf("the duplicate's audit log %q lacks %q", audit, want)
		}
	}
	// A duplicate of a voucher that does not exist creates nothing.
	submit.Set("duplicateOf", "NOPE-"+unique())
	submit.Set("code", "COPY2-"+unique())
	if rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, submit, nil); rec.Code != http.StatusNotFound {
		t.Errorf("duplicating an unknown voucher: %d, want 404", rec.Code)
	}
	if _, err := f.svc.Voucher(adminCtx, submit.Get("code")); voucher.ErrorCodeOf(err) != voucher.NotFound {
		t.Errorf("a duplicate of an unknown voucher was created (%v)", err)
	}
}

// TestExtendVoucher_FromTheDashboard: a live voucher's page offers Extend;
// a total below what is held is refused next to its field and changes
// nothing; a raise and a later end are saved and audited with who made them
// and the old and new values.
func TestExtendVoucher_FromTheDashboard(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	ends := time.Now().Add(time.Hour).UTC().Truncate(time.Minute)
	v, err := f.svc.CreateVoucher(adminCtx, voucher.NewVoucher{
		Code: "EXT-" + unique(), DiscountAmount: 100, TotalLimit: 10, PerUserLimit: 1,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: ends,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := f.svc.Reserve(adminCtx, voucher.ReserveRequest{Code: v.Code, CustomerID: int64(i + 1), OrderID: "ext-" + unique(), OrderAmount: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	m := f.signIn(t, voucher.RoleMarketer)
	page := doc(t, f.do(t, http.MethodGet, "/admin/vouchers/"+v.Code, &m, nil, nil))
	if href, _ := page.Find(`[data-testid=extend-voucher]`).Attr("href"); href != "/admin/vouchers/"+v.Code+"/extend" {
		t.Fatalf("the live voucher's Extend link: %q", href)
	}
	form := doc(t, f.do(t, http.MethodGet, "/admin/vouchers/"+v.Code+"/extend", &m, nil, nil))
	endsShown, _ := form.Find(`#endsAt`).Attr("value")
	totalShown, _ := form.Find(`#totalLimit`).Attr("value")
	if endsShown != ends.Format("2006-01-02T15:04") || totalShown != "10" {
		t.Fatalf("the extend form shows end %q and total %q", endsShown, totalShown)
	}
	post := func(end, total string) (int, string) {
		rec := f.do(t, http.MethodPost, "/admin/vouchers/"+v.Code+"/extend", &m, url.Values{"csrf": {m.csrf}, "endsAt": {end}, "totalLimit": {total}, "tz": {"UTC"}}, nil)
		return rec.Code, rec.Header().Get("Location") + doc(t, rec).Find(`.error`).Text()
	}
	if code, got := post(endsShown, "2"); code != http.StatusUnprocessableEntity || !strings.Contains(got, "below the 3 uses already held or sold") {
		t.Errorf("a total below what is held: %d %q, want 422 saying why", code, got)
	}
	if code, got := post(ends.Add(-time.Minute).Format("2006-01-02T15:04"), totalShown); code != http.StatusUnprocessableEntity || !strings.Contains(got, "only move later") {
		t.Errorf("an earlier end: %d %q, want 422 saying why", code, got)
	}
	if code, got := post(endsShown, totalShown); code != http.StatusUnprocessableEntity || !strings.Contains(got, "nothing was changed") {
		t.Errorf("nothing changed: %d %q, want 422", code, got)
	}
	if now, _ := f.svc.Voucher(adminCtx, v.Code); now.TotalLimit != 10 || !now.EndsAt.Equal(ends) {
		t.Fatalf("the refusals changed the voucher: %+v", now)
	}
	later := ends.Add(24 * time.Hour)
	if code, got := post(later.Format("2006-01-02T15:04"), "20"); code != http.StatusSeeOther || !strings.Contains(got, "notice=extended") {
		t.Fatalf("extending: %d %q", code, got)
	}
	after, _ := f.svc.Voucher(adminCtx, v.Code)
	if after.TotalLimit != 20 || !after.EndsAt.Equal(later) {
		t.Errorf("after extending: total %d, end %v; want 20 and %v", after.TotalLimit, after.EndsAt, later)
	}
	audit := doc(t, f.do(t, http.MethodGet, "/admin/vouchers/"+v.Code, &m, nil, nil)).Find(`[data-testid=audit]`).Text()
	for _, want := range []string{f.users[voucher.RoleMarketer], "extended", "totalLimit 10 → 20", "endsAt " + ends.Format(time.RFC3339) + " → " + later.Format(time.RFC3339)} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit log %q lacks %q", audit, want)
		}
	}
	if op := f.signIn(t, voucher.RoleOperator); f.do(t, http.MethodGet, "/admin/vouchers/"+v.Code+"/extend", &op, nil, nil).Code != http.StatusForbidden {
		t.Error("an operator reached the extend form")
	}
}

// TestUsers_AnAdminEnablesADisabledUser: the users page offers Enable for a
// disabled user; it lets them sign in again, is audited, and is the admins'
// alone.
func TestUsers_AnAdminEnablesADisabledUser(t *testing.T) {
	t.Parallel()
	// A database of its own: a page lists UserPageSize users, disabled ones
	// last, and the shared database holds every test's users.
	f, _ := newOwnFixture(t, web.Config{})
	a := f.signIn(t, voucher.RoleAdmin)
	email := f.users[voucher.RoleOperator]
	if _, err := f.accounts.DisableUser(adminCtx, email); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := f.accounts.SignIn(context.Background(), unique(), email, password); err == nil {
		t.Fatal("a disabled user signed in")
	}
	users := doc(t, f.do(t, http.MethodGet, "/admin/users", &a, nil, nil))
	row := users.Find(`[data-testid=user-row]`).FilterFunction(func(_ int, s *goquery.Selection) bool { return strings.Contains(s.Text(), email) })
	if row.Find(`[data-testid=enable-user]`).Length() != 1 {
		t.Fatalf("the disabled user's row offers no Enable: %q", row.Text())
	}
	m := f.signIn(t, voucher.RoleMarketer)
	if rec := f.do(t, http.MethodPost, "/admin/users/enable", &m, url.Values{"csrf": {m.csrf}, "email": {email}}, nil); rec.Code != http.StatusForbidden {
		t.Errorf("a marketer enabling a user: %d, want 403", rec.Code)
	}
	rec := f.do(t, http.MethodPost, "/admin/users/enable", &a, url.Values{"csrf": {a.csrf}, "email": {email}}, nil)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/admin/users?notice=enabled" {
		t.Fatalf("enabling: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	if _, _, _, err := f.accounts.SignIn(context.Background(), unique(), email, password); err != nil {
		t.Errorf("the enabled user signing in: %v", err)
	}
	users = doc(t, f.do(t, http.MethodGet, "/admin/users?notice=enabled", &a, nil, nil))
	if got := users.Find(`[data-testid=notice]`).Text(); !strings.Contains(got, "User enabled") {
		t.Errorf("the notice: %q", got)
	}
	if audit := users.Find(`[data-testid=user-audit]`).Text(); !strings.Contains(audit, "enabled") || !strings.Contains(audit, email) {
		t.Errorf("the users' audit log %q lacks the enable of %s", audit, email)
	}
}

// TestChangeVoucher_AnEmptiedBudgetOrCapIsRemoved: the edit form's fields
// are the new terms, so a budget or cap emptied there is none afterwards,
// not kept.
func TestChangeVoucher_AnEmptiedBudgetOrCapIsRemoved(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	capAmount, budget := int64(1500), int64(90000)
	v, err := f.svc.CreateVoucher(adminCtx, voucher.NewVoucher{
		Code: "CLR-" + unique(), DiscountType: voucher.DiscountPercent, DiscountPercent: 10, MaxDiscountAmount: &capAmount,
		BudgetAmount: &budget, TotalLimit: 10, PerUserLimit: 1,
		StartsAt: time.Now().Add(24 * time.Hour), EndsAt: time.Now().Add(48 * time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	m := f.signIn(t, voucher.RoleMarketer)
	form := voucherForm(v.Code, m.csrf, 24*time.Hour)
	form.Set("discountType", "PERCENT")
	form.Set("discountAmount", "")
	form.Set("discountPercent", "10")
	form.Set("maxDiscountAmount", "")
	form.Set("budgetAmount", "")
	if rec := f.do(t, http.MethodPost, "/admin/vouchers/"+v.Code, &m, form, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("saving the form: %d: %s", rec.Code, rec.Body)
	}
	after, _ := f.svc.Voucher(adminCtx, v.Code)
	if after.MaxDiscountAmount != nil || after.BudgetAmount != nil {
		t.Errorf("after emptying the cap and the budget: cap %v, budget %v; want none", after.MaxDiscountAmount, after.BudgetAmount)
	}
}
