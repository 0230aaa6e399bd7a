package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"voucherd/internal/voucher"
	"voucherd/web"
)

// The voucher form takes amounts in the currency's own units (issue 13):
// "50" USD is 50.00, 5000 minor units; "500" JPY is 500 (no minor unit).
func TestCreateVoucherForm_AmountsAreTypedInTheCurrencysUnits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	admin := voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleAdmin, Name: "test"})
	created := func(desc string, form map[string]string) voucher.Voucher {
		t.Helper()
		code := "AMT-" + unique()
		v := voucherForm(code, m.csrf, time.Hour)
		for k, val := range form {
			v.Set(k, val)
		}
		if rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, v, nil); rec.Code != http.StatusSeeOther {
			t.Fatalf("%s: %d: %s", desc, rec.Code, doc(t, rec).Find(`.error`).Text())
		}
		got, err := f.svc.Voucher(admin, code)
		if err != nil {
			t.Fatalf("%s: reading the voucher: %v", desc, err)
		}
		return got
	}
	usd := created("USD 50", map[string]string{"currency": "USD", "discountAmount": "50", "minOrderAmount": "25.5", "budgetAmount": "1 000"})
	if usd.DiscountAmount != 5000 || usd.MinOrderAmount != 2550 || usd.BudgetAmount == nil || *usd.BudgetAmount != 100_000 {
		t.Errorf("discount 50, minimum 25.5 and budget 1 000 USD saved as %d, %d and %v minor units, want 5000, 2550 and 100000", usd.DiscountAmount, usd.MinOrderAmount, usd.BudgetAmount)
	}
	if cents := created("USD 50.00", map[string]string{"currency": "USD", "discountAmount": "50.00"}); cents.DiscountAmount != 5000 {
		t.Errorf("50.00 USD saved as %d minor units, want 5000", cents.DiscountAmount)
	}
	if byDefault := created("no currency", map[string]string{"discountAmount": "12.34"}); byDefault.DiscountAmount != 1234 || byDefault.Currency != "USD" {
		t.Errorf("12.34 in the default currency saved as %d %s, want 1234 USD", byDefault.DiscountAmount, byDefault.Currency)
	}
	if jpy := created("JPY 500", map[string]string{"currency": "JPY", "discountAmount": "500"}); jpy.DiscountAmount != 500 {
		t.Errorf("500 JPY saved as %d minor units, want 500", jpy.DiscountAmount)
	}
	if bhd := created("BHD 1.25", map[string]string{"currency": "BHD", "discountAmount": "1.25"}); bhd.DiscountAmount != 1250 {
		t.Errorf("1.25 BHD saved as %d minor units, want 1250", bhd.DiscountAmount)
	}
	pct := created("PERCENT with a cap", map[string]string{"discountType": "PERCENT", "discountAmount": "", "discountPercent": "10", "maxDiscountAmount": "7.5", "currency": "EUR"})
	if pct.MaxDiscountAmount == nil || *pct.MaxDiscountAmount != 750 {
		t.Errorf("a cap of 7.5 EUR saved as %v, want 750", pct.MaxDiscountAmount)
	}

	for _, tc := range []struct{ field, currency, value, want string }{
		{"discountAmount", "JPY", "500.5", "Discount must be a whole amount in JPY (JPY has no decimals), e.g. 500"},
		{"discountAmount", "USD", "50.505", "Discount must be an amount in USD with at most 2 decimals, e.g. 50.00"},
		{"discountAmount", "", "50.505", "Discount must be an amount in USD with at most 2 decimals, e.g. 50.00"},
		{"discountAmount", "USD", "50,00", "Discount must use a point for decimals, not a comma"},
		{"minOrderAmount", "BHD", "1.2345", "Minimum order must be an amount in BHD with at most 3 decimals"},
		{"minOrderAmount", "USD", "-1", "Minimum order must be an amount in USD"},
		{"budgetAmount", "USD", "90071992547409.92", "Budget is too large: at most 90,071,992,547,409.91 USD"},
	} {
		code := "AMT-BAD-" + unique()
		form := voucherForm(code, m.csrf, time.Hour)
		form.Set("currency", tc.currency)
		form.Set(tc.field, tc.value)
		rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, form, nil)
		if got := doc(t, rec).Find(`[data-testid=error-` + tc.field + `]`).Text(); rec.Code != http.StatusUnprocessableEntity || !strings.Contains(got, tc.want) {
			t.Errorf("%s %q %s: %d %q, want 422 with %q", tc.field, tc.value, tc.currency, rec.Code, got, tc.want)
		}
		if _, err := f.svc.Voucher(admin, code); voucher.ErrorCodeOf(err) != voucher.NotFound {
			t.Errorf("%s %q %s created the voucher (%v)", tc.field, tc.value, tc.currency, err)
		}
	}
}

// Without a currency typed, amounts are read in DEFAULT_CURRENCY, the
// currency the voucher gets; the form says so and the script is told.
func TestCreateVoucherForm_WithoutACurrencyReadsAmountsInTheDefaultOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{DefaultCurrency: "JPY"})
	m := f.signIn(t, voucher.RoleMarketer)
	page := doc(t, f.do(t, http.MethodGet, "/admin/vouchers/new", &m, nil, nil))
	if got := page.Find(`[data-testid=hint-discountAmount]`).Text(); !strings.Contains(got, "in JPY") || strings.Contains(got, "minor") || strings.Contains(got, "cents") {
		t.Errorf("the discount's hint = %q, want it in JPY", got)
	}
	cur := page.Find(`#currency`)
	if d, _ := cur.Attr("data-default-currency"); d != "JPY" {
		t.Errorf("the currency field's data-default-currency = %q, want JPY", d)
	}
	if d, _ := cur.Attr("data-digits"); !strings.Contains(d, `"JPY":0`) || !strings.Contains(d, `"BHD":3`) || strings.Contains(d, `"USD"`) {
		t.Errorf("the currency field's data-digits = %q, want JPY 0 and BHD 3 (and no USD: 2 is the default)", d)
	}
	if page.Find(`input[data-amount]`).Length() != 4 {
		t.Errorf("%d inputs marked data-amount, want the 4 amounts", page.Find(`input[data-amount]`).Length())
	}

	admin := voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleAdmin, Name: "test"})
	code := "YEN-" + unique()
	form := voucherForm(code, m.csrf, time.Hour)
	form.Set("discountAmount", "500.5")
	rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, form, nil)
	if got := doc(t, rec).Find(`[data-testid=error-discountAmount]`).Text(); rec.Code != http.StatusUnprocessableEntity || !strings.Contains(got, "whole amount in JPY") {
		t.Errorf("500.5 without a currency, JPY the default: %d %q, want 422, a whole amount in JPY", rec.Code, got)
	}
	if _, err := f.svc.Voucher(admin, code); voucher.ErrorCodeOf(err) != voucher.NotFound {
		t.Errorf("500.5 JPY created the voucher (%v)", err)
	}
	form.Set("discountAmount", "500")
	if rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, form, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("500 without a currency, JPY the default: %d", rec.Code)
	}
	if v, err := f.svc.Voucher(admin, code); err != nil || v.DiscountAmount != 500 || v.Currency != "JPY" {
		t.Errorf("500 without a currency, JPY the default, saved as %d %s (%v), want 500 JPY", v.DiscountAmount, v.Currency, err)
	}
}

// A refused submit and the edit form say what the amounts shown were read
// as; the edit form shows them in the currency's units, and a change that
// leaves the currency empty reads them in the voucher's.
func TestVoucherForm_EchoesAmountsAndEditsThemInTheCurrencysUnits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	admin := voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleAdmin, Name: "test"})
	form := voucherForm("ECHO-"+unique(), m.csrf, time.Hour)
	form.Set("discountAmount", "50")
	form.Set("minOrderAmount", "1_000.5")
	form.Set("totalLimit", "none")
	page := doc(t, f.do(t, http.MethodPost, "/admin/vouchers", &m, form, nil))
	if got := page.Find(`[data-testid=hint-discountAmount]`).Text(); !strings.Contains(got, "in USD") || !strings.Contains(got, "You typed 50 = 50.00 USD.") {
		t.Errorf("the discount's hint after a refused submit = %q, want it in USD, echoing 50 = 50.00 USD", got)
	}
	if got := page.Find(`[data-testid=hint-minOrderAmount]`).Text(); !strings.Contains(got, "You typed 1_000.5 = 1,000.50 USD.") {
		t.Errorf("the minimum's hint after a refused submit = %q", got)
	}
	if v, _ := page.Find(`#minOrderAmount`).Attr("value"); v != "1_000.5" {
		t.Errorf("the minimum typed comes back as %q, want it as typed", v)
	}

	code := "EDITAMT-" + unique()
	start := time.Now().Add(24 * time.Hour)
	budget, limit := int64(123_456), int64(50)
	if _, err := f.svc.CreateVoucher(admin, voucher.NewVoucher{Code: code, DiscountAmount: 1050, MinOrderAmount: 2500, BudgetAmount: &budget,
		TotalLimit: 5, PerUserLimit: 1, Currency: "USD", StartsAt: start, EndsAt: start.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	yen := "EDITYEN-" + unique()
	if _, err := f.svc.CreateVoucher(admin, voucher.NewVoucher{Code: yen, DiscountType: voucher.DiscountPercent, DiscountPercent: 10, MaxDiscountAmount: &limit,
		TotalLimit: 5, PerUserLimit: 1, Currency: "JPY", StartsAt: start, EndsAt: start.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	edit := doc(t, f.do(t, http.MethodGet, "/admin/vouchers/"+code+"/edit", &m, nil, nil))
	for field, want := range map[string]string{"discountAmount": "10.50", "minOrderAmount": "25.00", "budgetAmount": "1234.56", "maxDiscountAmount": ""} {
		if got, _ := edit.Find(`#` + field).Attr("value"); got != want {
			t.Errorf("the edit form shows %s as %q, want %q", field, got, want)
		}
	}
	if got := edit.Find(`[data-testid=hint-discountAmount]`).Text(); !strings.Contains(got, "You typed 10.50 = 10.50 USD.") {
		t.Errorf("the edit form's discount hint = %q", got)
	}
	edit = doc(t, f.do(t, http.MethodGet, "/admin/vouchers/"+yen+"/edit", &m, nil, nil))
	if got, _ := edit.Find(`#maxDiscountAmount`).Attr("value"); got != "50" {
		t.Errorf("the edit form shows a cap of 50 JPY as %q", got)
	}

	// Saved as shown, nothing changes; typed with the currency left empty,
	// the amounts are the voucher's currency's (yen), not the default's.
	change := voucherForm(yen, m.csrf, 24*time.Hour)
	change.Set("discountType", "PERCENT")
	change.Set("discountAmount", "")
	change.Set("discountPercent", "10")
	change.Set("maxDiscountAmount", "70")
	change.Set("currency", "")
	if rec := f.do(t, http.MethodPost, "/admin/vouchers/"+yen, &m, change, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("changing the yen voucher: %d: %s", rec.Code, doc(t, rec).Find(`.error`).Text())
	}
	if v, err := f.svc.Voucher(admin, yen); err != nil || v.MaxDiscountAmount == nil || *v.MaxDiscountAmount != 70 || v.Currency != "JPY" {
		t.Errorf("a cap of 70 typed for a yen voucher saved as %v %s (%v), want 70 JPY", v.MaxDiscountAmount, v.Currency, err)
	}
	change.Set("maxDiscountAmount", "70.5")
	rec := f.do(t, http.MethodPost, "/admin/vouchers/"+yen, &m, change, nil)
	if got := doc(t, rec).Find(`[data-testid=error-maxDiscountAmount]`).Text(); rec.Code != http.StatusUnprocessableEntity || !strings.Contains(got, "whole amount in JPY") {
		t.Errorf("a cap of 70.5 for a yen voucher: %d %q, want 422, a whole amount in JPY", rec.Code, got)
	}
}
