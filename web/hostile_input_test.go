package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"voucherd/internal/voucher"
	"voucherd/web"
)

func TestForm_AnOversizedBodyIs413BeforeTheCSRFCheckReadsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	code := "BIG-" + unique()
	form := voucherForm(code, m.csrf, time.Hour).Encode() + "&pad=" + strings.Repeat("x", 11<<20)
	for _, target := range []string{"/admin/vouchers", "/admin/sign-in", "/admin/sign-out"} {
		for _, chunked := range []bool{false, true} {
			req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if chunked {
				req.ContentLength = -1 // as a client that streams the body sends it
			}
			req.RemoteAddr = uniqueAddress()
			req.AddCookie(m.cookie)
			rec := httptest.NewRecorder()
			f.h.ServeHTTP(rec, req)
			if rec.Code != http.StatusRequestEntityTooLarge {
				t.Errorf("an 11 MiB POST to %s (chunked %v): %d, want 413", target, chunked, rec.Code)
			}
		}
	}
	admin := voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleAdmin, Name: "test"})
	if _, err := f.svc.Voucher(admin, code); voucher.ErrorCodeOf(err) != voucher.NotFound {
		t.Errorf("the oversized form created the voucher (%v)", err)
	}
	if rec := f.do(t, http.MethodGet, "/admin/vouchers", &m, nil, nil); rec.Code != http.StatusOK {
		t.Errorf("the session after a refused body: %d, want 200", rec.Code)
	}
}

func TestCreateVoucherForm_IntegersOutsideTheirTypeAndMalformedTimesAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	admin := voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleAdmin, Name: "test"})
	for _, tc := range []struct{ field, value, want string }{
		{"totalLimit", "4294967396", "2147483647"},
		{"totalLimit", "2147483648", "2147483647"},
		{"totalLimit", "9223372036854775807", "2147483647"},
		{"perUserLimit", "4294967297", "2147483647"},
		{"discountAmount", "9223372036854775808", "too large"},
		{"discountAmount", "92233720368547758.08", "too large"},
		{"minOrderAmount", "9223372036854775808", "too large"},
		{"budgetAmount", "1e3", "an amount in USD"},
		{"maxDiscountAmount", "-1", "for a percentage only"},
		{"startsAt", "yesterday", "date and time"},
		{"startsAt", "2026-12-01T10:00:00Z", "date and time"},
		{"code", "BAD-\xff", "1-32 characters"},
		{"code", "BAD-\x00", "1-32 characters"},
	} {
		code := "WRAP-" + unique()
		form := voucherForm(code, m.csrf, time.Hour)
		form.Set(tc.field, tc.value)
		rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, form, nil)
		if rec.Code != http.StatusUnprocessableEntity {
			t.Errorf("%s = %q: %d, want 422", tc.field, tc.value, rec.Code)
			continue
		}
		if got := doc(t, rec).Find(`[data-testid=error-` + tc.field + `]`).Text(); !strings.Contains(got, tc.want) {
			t.Errorf("%s = %q: the message next to it is %q, want it to say %q", tc.field, tc.value, got, tc.want)
		}
		if _, err := f.svc.Voucher(admin, code); voucher.ErrorCodeOf(err) != voucher.NotFound {
			t.Errorf("%s = %q created the voucher (%v)", tc.field, tc.value, err)
		}
	}
}
