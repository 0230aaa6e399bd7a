package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"voucherd/internal/voucher"
	"voucherd/web"
)

// The create, edit and voucher pages set and show a voucher's period
// limits, the limits' time zone (chosen from the list), its segments and
// the items it applies to; the voucher page shows the period counts.
func TestVoucherForm_SetsAndShowsPeriodLimitsSegmentsAndItems(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	admin := voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleAdmin, Name: "test"})

	page := doc(t, f.do(t, http.MethodGet, "/admin/vouchers/new", &m, nil, nil))
	if n := page.Find(`select[name=timeZone] option`).Length(); n < 10 {
		t.Errorf("the limits' time zone offers %d zones, want a list", n)
	}
	if n := page.Find(`input[name=limitMax]`).Length(); n != voucher.MaxPeriodLimits {
		t.Errorf("%d period limit rows, want %d", n, voucher.MaxPeriodLimits)
	}

	code := "PL-" + unique()
	form := voucherForm(code, m.csrf, 24*time.Hour)
	form["limitScope"] = []string{"CUSTOMER", "VOUCHER", "CUSTOMER"}
	form["limitPeriod"] = []string{"DAY", "MONTH", "WEEK"}
	form["limitMax"] = []string{"3", "100", ""} // an empty row is no limit
	form.Set("timeZone", "Europe/Berlin")
	form.Set("eligibleSegments", "vip, tier:gold")
	form.Set("appliesToCategories", "shoes")
	if rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, form, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("create: %d: %s", rec.Code, rec.Body)
	}
	v, err := f.svc.Voucher(admin, code)
	if err != nil {
		t.Fatal(err)
	}
	want := voucher.Restrictions{
		PeriodLimits: []voucher.PeriodLimit{{Scope: voucher.ScopeCustomer, Period: voucher.PeriodDay, Max: 3}, {Scope: voucher.ScopeVoucher, Period: voucher.PeriodMonth, Max: 100}},
		TimeZone:     "Europe/Berlin", EligibleSegments: []string{"vip", "tier:gold"},
		AppliesTo: &voucher.AppliesTo{SKUs: []string{}, Categories: []string{"shoes"}},
	}
	if diff := cmp.Diff(want, v.Restrictions); diff != "" {
		t.Fatalf("stored restrictions (-want +got):\n%s", diff)
	}

	// The edit form is filled with them, and saving changes them.
	edit := doc(t, f.do(t, http.MethodGet, "/admin/vouchers/"+code+"/edit", &m, nil, nil))
	if got := edit.Find(`select[name=timeZone] option[selected]`).Text(); got != "Europe/Berlin" {
		t.Errorf("edit form's zone: %q", got)
	}
	if got := edit.Find(`[data-testid=limitMax-1]`).AttrOr("value", ""); got != "100" {
		t.Errorf("edit form's second limit: %q, want 100", got)
	}
	change := voucherForm(code, m.csrf, 24*time.Hour)
	change["limitScope"], change["limitPeriod"], change["limitMax"] = []string{"VOUCHER"}, []string{"WEEK"}, []string{"7"}
	change.Set("timeZone", "Asia/Tokyo")
	if rec := f.do(t, http.MethodPost, "/admin/vouchers/"+code, &m, change, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("update: %d: %s", rec.Code, rec.Body)
	}
	if v, err = f.svc.Voucher(admin, code); err != nil {
		t.Fatal(err)
	}
	if v.TimeZone != "Asia/Tokyo" || len(v.PeriodLimits) != 1 || v.PeriodLimits[0].Max != 7 || v.EligibleSegments != nil || v.AppliesTo != nil {
		t.Fatalf("after the change: %+v", v.Restrictions)
	}

	// Refused input stays next to its field, and nothing is made.
	bad := voucherForm("PLX-"+unique(), m.csrf, 24*time.Hour)
	bad["limitScope"], bad["limitPeriod"], bad["limitMax"] = []string{"CUSTOMER"}, []string{"DAY"}, []string{"0"}
	bad.Set("timeZone", "Mars/Base")
	rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, bad, nil)
	if rec.Code != http.StatusUnprocessableEntity {
		t.Fatalf("bad limits: %d, want 422", rec.Code)
	}
	d := doc(t, rec)
	for _, field := range []string{"periodLimits", "timeZone"} {
		if d.Find(`[data-testid=error-`+field+`]`).Length() != 1 {
			t.Errorf("no error next to %s", field)
		}
	}
}

func TestVoucherPage_ShowsTheRestrictionsAndThePeriodCounts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	admin := voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleAdmin, Name: "test"})
	code := "PLV-" + unique()
	if _, err := f.svc.CreateVoucher(admin, voucher.NewVoucher{Code: code, DiscountAmount: 100, TotalLimit: 50, PerUserLimit: 5,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
		Restrictions: voucher.Restrictions{TimeZone: "Europe/Berlin", EligibleSegments: []string{"vip"},
			PeriodLimits: []voucher.PeriodLimit{{Scope: voucher.ScopeCustomer, Period: voucher.PeriodDay, Max: 2}}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := f.svc.Reserve(admin, voucher.ReserveRequest{Code: code, CustomerID: 42, OrderID: "plv-" + unique() + string(rune('a'+i)), OrderAmount: 500, CustomerSegments: []string{"vip"}}); err != nil {
			t.Fatal(err)
		}
	}
	d := doc(t, f.do(t, http.MethodGet, "/admin/vouchers/"+url.PathEscape(code), &m, nil, nil))
	if got := d.Find(`[data-testid=fig-period-limits]`).Text(); got != "2 per day per customer (Europe/Berlin)" {
		t.Errorf("period limits shown: %q", got)
	}
	if got := d.Find(`[data-testid=fig-segments]`).Text(); got != "vip" {
		t.Errorf("segments shown: %q", got)
	}
	rows := d.Find(`[data-testid=period-count]`)
	if rows.Length() != 1 || !strings.Contains(rows.Text(), "customer 42") || !strings.Contains(rows.Text(), "2") {
		t.Errorf("period counts shown: %d rows, %q", rows.Length(), rows.Text())
	}
}
