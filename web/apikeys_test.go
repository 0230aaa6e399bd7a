package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"voucherd/internal/voucher"
	"voucherd/web"
	"voucherd/web/components"
)

// keyNamed is the key of a name, as the store lists it.
func keyNamed(t *testing.T, f fixture, name string) (voucher.ApiKey, bool) {
	t.Helper()
	admin := voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleAdmin, Name: "test"})
	keys, err := f.keys.List(admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Name == name {
			return k, true
		}
	}
	return voucher.ApiKey{}, false
}

// TestApiKeysPage_TheSecretIsShownOnceAndTheListShowsItsPrefix: an admin
// makes a key on the page; its secret is in that answer alone (not cached)
// with a copy button, and never on the page again, which lists the key by
// its prefix with its role, expiry, rate and "never" used; a revoke is
// audited with who did it and shown.
func TestApiKeysPage_TheSecretIsShownOnceAndTheListShowsItsPrefix(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	a := f.signIn(t, voucher.RoleAdmin)
	name := "checkout " + unique()
	expires := time.Now().Add(48 * time.Hour).UTC().Format(components.DateTimeLocal)
	rec := f.do(t, http.MethodPost, "/admin/api-keys", &a, url.Values{
		"csrf": {a.csrf}, "name": {name}, "role": {"storefront"}, "expiresAt": {expires}, "ratePerSecond": {"5"}, "burst": {"10"},
	}, nil)
	if rec.Code != http.StatusCreated || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("creating a key: %d, Cache-Control %q: %s", rec.Code, rec.Header().Get("Cache-Control"), rec.Body)
	}
	d := doc(t, rec)
	secret := d.Find(`[data-testid=api-key-secret]`).AttrOr("value", "")
	if !strings.HasPrefix(secret, voucher.ApiKeyPrefix) || len(secret) < len(voucher.ApiKeyPrefix)+32 {
		t.Fatalf("the secret shown: %q", secret)
	}
	if d.Find(`[data-testid=api-key-copy][data-copy=api-key-secret]`).Length() != 1 {
		t.Error("no copy button for the secret")
	}
	k, ok := keyNamed(t, f, name)
	if !ok || k.Role != voucher.RoleStorefront || k.RatePerSecond == nil || *k.RatePerSecond != 5 || k.Burst == nil || *k.Burst != 10 || k.ExpiresAt == nil {
		t.Fatalf("the key stored: %+v (found %v)", k, ok)
	}

	page := f.do(t, http.MethodGet, "/admin/api-keys", &a, nil, nil)
	body := page.Body.String()
	if page.Code != http.StatusOK || strings.Contains(body, secret) || strings.Contains(body, secret[len(k.Prefix):]) {
		t.Fatalf("the page after: %d, carries the secret: %v", page.Code, strings.Contains(body, secret))
	}
	row := doc(t, page).Find(`[data-testid=api-key-row][data-name="` + name + `"]`)
	if row.Find(`[data-testid=api-key-prefix]`).Text() != k.Prefix+"…" || !strings.Contains(row.Text(), "storefront") ||
		!strings.Contains(row.Text(), "5/s, burst 10") || !strings.Contains(row.Text(), "never") ||
		strings.TrimSpace(row.Find(`[data-testid=api-key-status]`).Text()) != "active" {
		t.Errorf("the key's row: %q", row.Text())
	}

	rv := f.do(t, http.MethodPost, "/admin/api-keys/"+strconv.FormatInt(k.ID, 10)+"/revoke", &a, url.Values{"csrf": {a.csrf}}, nil)
	if rv.Code != http.StatusSeeOther {
		t.Fatalf("revoking: %d %s", rv.Code, rv.Body)
	}
	after := doc(t, f.do(t, http.MethodGet, rv.Header().Get("Location"), &a, nil, nil))
	row = after.Find(`[data-testid=api-key-row][data-name="` + name + `"]`)
	if !strings.HasPrefix(strings.TrimSpace(row.Find(`[data-testid=api-key-status]`).Text()), "revoked") || row.Find(`[data-testid=api-key-revoke]`).Length() != 0 {
		t.Errorf("the revoked key's row: %q", row.Text())
	}
	audit := after.Find(`[data-testid=api-key-audit-row][data-name="` + name + `"]`)
	if audit.Length() != 2 || !strings.Contains(audit.Text(), f.users[voucher.RoleAdmin]) {
		t.Errorf("the audit of the key: %q", audit.Text())
	}
}

// TestApiKeysPage_IsForAdminsOnlyAndRefusesBadInputNextToEachField:
// marketers and operators neither see nor open the page nor make a key;
// an empty or 200-character name, an expiry in the past, a rate under 1,
// or a form without its CSRF token make no key, the input errors named
// next to their field.
func TestApiKeysPage_IsForAdminsOnlyAndRefusesBadInputNextToEachField(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	for _, role := range []voucher.Role{voucher.RoleMarketer, voucher.RoleOperator} {
		s := f.signIn(t, role)
		if rec := f.do(t, http.MethodGet, "/admin/api-keys", &s, nil, nil); rec.Code != http.StatusForbidden {
			t.Errorf("a %s opening the page: %d, want 403", role, rec.Code)
		}
		name := "by " + string(role) + " " + unique()
		if rec := f.do(t, http.MethodPost, "/admin/api-keys", &s, url.Values{"csrf": {s.csrf}, "name": {name}, "role": {"admin"}}, nil); rec.Code != http.StatusForbidden {
			t.Errorf("a %s making a key: %d, want 403", role, rec.Code)
		}
		if _, ok := keyNamed(t, f, name); ok {
			t.Errorf("a %s made a key", role)
		}
		if n := doc(t, f.do(t, http.MethodGet, "/admin/vouchers", &s, nil, nil)).Find(`[data-testid=nav-api-keys]`).Length(); n != 0 {
			t.Errorf("a %s sees the API keys link", role)
		}
	}
	a := f.signIn(t, voucher.RoleAdmin)
	if n := doc(t, f.do(t, http.MethodGet, "/admin/vouchers", &a, nil, nil)).Find(`[data-testid=nav-api-keys]`).Length(); n != 1 {
		t.Error("an admin does not see the API keys link")
	}
	name := "refused " + unique()
	past := time.Now().Add(-time.Hour).Format(components.DateTimeLocal)
	for _, tc := range []struct {
		form  url.Values
		field string
	}{
		{url.Values{"name": {""}, "role": {"admin"}}, "key-name"},
		{url.Values{"name": {strings.Repeat("n", 200)}, "role": {"admin"}}, "key-name"},
		{url.Values{"name": {name}, "role": {"marketer"}}, "key-role"},
		{url.Values{"name": {name}, "role": {"admin"}, "expiresAt": {past}}, "key-expiresAt"},
		{url.Values{"name": {name}, "role": {"admin"}, "expiresAt": {"tomorrow"}}, "key-expiresAt"},
		{url.Values{"name": {name}, "role": {"admin"}, "ratePerSecond": {"0"}}, "key-ratePerSecond"},
		{url.Values{"name": {name}, "role": {"admin"}, "ratePerSecond": {"five"}}, "key-ratePerSecond"},
		{url.Values{"name": {name}, "role": {"admin"}, "burst": {"3"}}, "key-burst"},
	} {
		tc.form.Set("csrf", a.csrf)
		rec := f.do(t, http.MethodPost, "/admin/api-keys", &a, tc.form, nil)
		d := doc(t, rec)
		if rec.Code != http.StatusUnprocessableEntity || d.Find(`[data-testid=error-`+tc.field+`]`).Length() != 1 || d.Find(`[data-testid=api-key-secret]`).Length() != 0 {
			t.Errorf("%v: %d, want 422 with the error on %s", tc.form, rec.Code, tc.field)
		}
	}
	if rec := f.do(t, http.MethodPost, "/admin/api-keys", &a, url.Values{"name": {name}, "role": {"admin"}}, nil); rec.Code != http.StatusForbidden {
		t.Errorf("without the CSRF token: %d, want 403", rec.Code)
	}
	if _, ok := keyNamed(t, f, name); ok {
		t.Error("a refused form made a key")
	}
}
