package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"voucherd/internal/accounts"
	"voucherd/internal/voucher"
	"voucherd/web"
)

// TestUsers_PagesAndSearchReachEveryUser: past a page of users the list
// pages (each user on exactly one page, Previous and Next where they lead
// somewhere), the search finds a user by any part of the email in any case,
// and a search that is no email's text is refused without a stack trace.
func TestUsers_PagesAndSearchReachEveryUser(t *testing.T) {
	t.Parallel()
	f, own := newOwnFixture(t, web.Config{})
	a := f.signIn(t, voucher.RoleAdmin)
	// Two and a half pages: written directly, as an import would.
	if _, err := own.Exec(context.Background(), `INSERT INTO dashboard_user (email, role, password_hash)
		SELECT 'staff' || lpad(i::text, 4, '0') || '@example.com', 'marketer', 'x' FROM generate_series(1, 2 * $1 + $1 / 2) i`, accounts.UserPageSize); err != nil {
		t.Fatal(err)
	}
	var total int
	if err := own.QueryRow(context.Background(), `SELECT count(*) FROM dashboard_user`).Scan(&total); err != nil {
		t.Fatal(err)
	}

	seen := map[string]int{}
	target, pages := "/admin/users", 0
	for target != "" {
		pages++
		if pages > 10 {
			t.Fatalf("still paging after %d pages", pages)
		}
		rec := f.do(t, http.MethodGet, target, &a, nil, nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", target, rec.Code)
		}
		d := doc(t, rec)
		rows := d.Find(`[data-testid=user-row]`)
		rows.Each(func(_ int, s *goquery.Selection) { seen[s.AttrOr("data-email", "")]++ })
		next, hasNext := d.Find(`[data-testid=users-page-next]`).Attr("href")
		_, hasPrev := d.Find(`[data-testid=users-page-prev]`).Attr("href")
		if pages == 1 && (rows.Length() != accounts.UserPageSize || hasPrev || !hasNext) {
			t.Errorf("page 1: %d rows, Previous %v, Next %v; want %d rows and only Next", rows.Length(), hasPrev, hasNext, accounts.UserPageSize)
		}
		if pages > 1 && !hasPrev {
			t.Errorf("page %d has no Previous", pages)
		}
		target = ""
		if hasNext {
			target = next
		}
	}
	if want := (total + accounts.UserPageSize - 1) / accounts.UserPageSize; pages != want {
		t.Errorf("%d pages for %d users, want %d", pages, total, want)
	}
	if len(seen) != total {
		t.Errorf("the pages showed %d users of %d", len(seen), total)
	}
	for email, n := range seen {
		if n != 1 {
			t.Errorf("%s shown on %d pages", email, n)
		}
	}

	found := doc(t, f.do(t, http.MethodGet, "/admin/users?q=STAFF0137%40", &a, nil, nil))
	if rows := found.Find(`[data-testid=user-row]`); rows.Length() != 1 || rows.AttrOr("data-email", "") != "staff0137@example.com" {
		t.Errorf("searching STAFF0137@ showed %d rows (%q), want staff0137@example.com alone", rows.Length(), rows.Text())
	}
	if found.Find(`[data-testid=users-pager]`).Length() != 0 {
		t.Error("a search with one match shows a pager")
	}
	if v, _ := found.Find(`[data-testid=user-search-input]`).Attr("value"); v != "STAFF0137@" {
		t.Errorf("the search box holds %q after the search", v)
	}
	none := doc(t, f.do(t, http.MethodGet, "/admin/users?q=nobody-such", &a, nil, nil))
	if none.Find(`[data-testid=user-row]`).Length() != 0 || !strings.Contains(none.Find(`[data-testid=users-none]`).Text(), "nobody-such") {
		t.Errorf("a search without matches: %q", none.Find(`[data-testid=users-none]`).Text())
	}
	// A page that is not a small whole number is the first, as on the
	// vouchers list.
	first := doc(t, f.do(t, http.MethodGet, "/admin/users", &a, nil, nil)).Find(`[data-testid=user-row]`).First().AttrOr("data-email", "")
	for _, p := range []string{"abc", "-3", "0", "99999999999999999999"} {
		if got := doc(t, f.do(t, http.MethodGet, "/admin/users?page="+p, &a, nil, nil)).Find(`[data-testid=user-row]`).First().AttrOr("data-email", "?"); got != first {
			t.Errorf("page=%s starts with %s, want the first page's %s", p, got, first)
		}
	}
	for _, q := range []string{strings.Repeat("a", 255), "%ff%fe", "a%00b"} {
		rec := f.do(t, http.MethodGet, "/admin/users?q="+q, &a, nil, nil)
		if body := rec.Body.String(); rec.Code != http.StatusUnprocessableEntity || strings.Contains(body, "goroutine") || strings.Contains(body, "SQL") {
			t.Errorf("search %.20q: %d, want 422 with the rule", q, rec.Code)
		}
	}
	m := f.signIn(t, voucher.RoleMarketer)
	if rec := f.do(t, http.MethodGet, "/admin/users?q=staff", &m, nil, nil); rec.Code != http.StatusForbidden {
		t.Errorf("a marketer searching users: %d, want 403", rec.Code)
	}
}
