package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"voucherd/internal/accounts"
	"voucherd/internal/voucher"
	"voucherd/web"
)

// TestSignInLocks_ThePageListsTheLocksNowAndLiftsOneFromItsRow: the admin's
// page lists what is locked now (an email past its limit, an address past
// its own, each with its failures and until when), not what is below its
// limit; each row's button lifts that lock alone, after which it signs in.
func TestSignInLocks_ThePageListsTheLocksNowAndLiftsOneFromItsRow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	email := f.users[voucher.RoleMarketer]
	// An IPv6 client counts by its /64, which the page lists.
	remote := v6Peer(randomIPv6Net() + ":1")
	ip := accounts.SignInAddress(strings.Trim(remote[:strings.LastIndex(remote, ":")], "[]"))
	for range 3 { // the fixture's limit per email
		signInThroughTheForm(t, f, email, "wrong password", uniqueAddress())
	}
	for i := range 6 { // and per address
		signInThroughTheForm(t, f, fmt.Sprintf("guess-%d-%s@example.com", i, unique()), "wrong password", remote)
	}
	below := f.users[voucher.RoleOperator]
	signInThroughTheForm(t, f, below, "wrong password", uniqueAddress())

	admin := f.signIn(t, voucher.RoleAdmin)
	row := func(page *goquery.Document, key string) *goquery.Selection {
		return page.Find(`[data-testid=lock-row][data-key="` + key + `"]`)
	}
	list := func() *goquery.Document {
		t.Helper()
		rec := f.do(t, http.MethodGet, "/admin/sign-in-locks", &admin, nil, nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("the sign-in locks page: %d", rec.Code)
		}
		return doc(t, rec)
	}
	page := list()
	for _, want := range []struct{ key, field, attempts string }{{email, "email", "3"}, {ip, "address", "6"}} {
		r := row(page, want.key)
		if r.Length() != 1 {
			t.Fatalf("the page lists %s %d times, want once", want.key, r.Length())
		}
		if field, _ := r.Attr("data-field"); field != want.field || r.Find(`[data-testid=lock-attempts]`).Text() != want.attempts {
			t.Errorf("%s: %s with %q failures, want %s with %s", want.key, field, r.Find(`[data-testid=lock-attempts]`).Text(), want.field, want.attempts)
		}
		if strings.TrimSpace(r.Find(`[data-testid=lock-until]`).Text()) == "" {
			t.Errorf("%s: no time it is locked until", want.key)
		}
	}
	if row(page, below).Length() != 0 {
		t.Errorf("an email with one failure of three is listed as locked")
	}
	if !strings.Contains(page.Text(), "after 3 failed sign-ins within 15 minutes, an address after 6") {
		t.Errorf("the page does not state the limits in force")
	}

	lift := func(r *goquery.Selection) {
		t.Helper()
		form := url.Values{}
		r.Find("form input").Each(func(_ int, in *goquery.Selection) {
			name, _ := in.Attr("name")
			value, _ := in.Attr("value")
			form.Set(name, value)
		})
		action, _ := r.Find("form").Attr("action")
		rec := f.do(t, http.MethodPost, action, &admin, form, nil)
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/admin/sign-in-locks?notice=unlocked" {
			t.Fatalf("lifting from the row: %d %s", rec.Code, rec.Header().Get("Location"))
		}
	}
	lift(row(page, email))
	page = list()
	if row(page, email).Length() != 0 || row(page, ip).Length() != 1 {
		t.Errorf("after lifting the email's lock: email listed %d, address listed %d; want 0 and 1", row(page, email).Length(), row(page, ip).Length())
	}
	if rec := signInThroughTheForm(t, f, email, password, uniqueAddress()); rec.Code != http.StatusSeeOther {
		t.Errorf("the email once its lock is lifted: %d, want 303", rec.Code)
	}
	lift(row(page, ip))
	if row(list(), ip).Length() != 0 {
		t.Errorf("the address is still listed after its lock was lifted")
	}
	if rec := signInThroughTheForm(t, f, f.users[voucher.RoleAdmin], password, remote); rec.Code != http.StatusSeeOther {
		t.Errorf("the address once its lock is lifted: %d, want 303", rec.Code)
	}

	op := f.signIn(t, voucher.RoleOperator)
	if rec := f.do(t, http.MethodGet, "/admin/sign-in-locks", &op, nil, nil); rec.Code != http.StatusForbidden {
		t.Errorf("an operator on the sign-in locks page: %d, want 403", rec.Code)
	}
}

// A request the service refuses as malformed (INVALID_INPUT) is a 422 with
// the rule on every page, not a 409 (which says the state is in the way):
// a voucher code that no code can be, a role that does not exist.
func TestDashboard_AMalformedRequestIsA422WithTheRule(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	for _, target := range []string{"/admin/vouchers/not%20a%20code/edit", "/admin/vouchers/" + strings.Repeat("A", 40) + "/edit"} {
		rec := f.do(t, http.MethodGet, target, &m, nil, nil)
		body := rec.Body.String()
		if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(body, "code") || strings.Contains(body, "goroutine") {
			t.Errorf("GET %s: %d, want 422 naming the code's rule", target, rec.Code)
		}
	}
	admin := f.signIn(t, voucher.RoleAdmin)
	rec := f.do(t, http.MethodPost, "/admin/users/role", &admin, url.Values{"csrf": {admin.csrf}, "email": {f.users[voucher.RoleOperator]}, "role": {"emperor"}}, nil)
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), "role") {
		t.Errorf("a role that does not exist: %d, want 422 with the rule", rec.Code)
	}
}
