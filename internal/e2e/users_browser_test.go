package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestUsers_AdminManagesUsersEndToEnd walks the users page in Chromium as
// the only admin, with a second person on their own session: a user added
// sets their password with the one-time link, which then works no more; a
// role change takes effect on their next request; a password reset link
// works once and ends their sessions; disabling them ends their session and
// refuses their sign-in; the last admin can neither demote nor disable
// themselves; every change is in the audit log with who made it. The pages
// have no serious axe-core violation and fit 390 px.
func TestUsers_AdminManagesUsersEndToEnd(t *testing.T) {
	dbURL, _ := ownDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL})
	const adminPassword = "ada's long password"
	addUser(t, map[string]string{"DATABASE_URL": dbURL}, "ada@example.com", "Ada Admin", "admin", adminPassword)
	b := newTab(t, s, "users")
	b.signIn("ada@example.com", adminPassword)

	b.step("open the users page", chromedp.Click(chromedp.CSS(`[data-testid=nav-users]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=users-table]`)))
	b.axe("the users page")

	// Add a user: a one-time link, shown once.
	b.step("add mo as a marketer",
		chromedp.SendKeys(chromedp.CSS(`#invite-email`), "Mo@Example.com"),
		chromedp.SendKeys(chromedp.CSS(`#invite-name`), "Mo Marketer"),
		chromedp.Click(chromedp.CSS(`[data-testid=invite-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=password-link]`)),
	)
	invite := b.eval(`document.querySelector("[data-testid=password-link]").value`)
	if !strings.HasPrefix(invite, s.URL+"/admin/password/") {
		t.Fatalf("the invitation link is %q", invite)
	}
	if got := b.text(`[data-testid=user-row][data-email="mo@example.com"] [data-testid=user-status]`); got != "active" {
		t.Errorf("mo's status = %q, want active", got)
	}
	b.axe("the users page with a link")
	b.shots.take(b.ctx, "users-invited")
	b.phone("users-390", `[data-testid=user-row][data-email="mo@example.com"] [data-testid=disable-user]`, `[data-testid=invite-submit]`)

	mo := newDashboardClient(s)
	if st := mo.signIn(t, "mo@example.com", "anything at all"); st != http.StatusUnauthorized {
		t.Errorf("an invited user signed in before setting a password: %d", st)
	}
	const moPassword = "mo's first password"
	b.step("mo opens the link", chromedp.Navigate(invite), chromedp.WaitVisible(chromedp.CSS(`[data-testid=password-form]`)))
	b.axe("the set-password page")
	b.phone("users-390-password", `[data-testid=password-submit]`)
	b.step("a too short password is refused",
		chromedp.SendKeys(chromedp.CSS(`#new-password`), "short"),
		chromedp.Click(chromedp.CSS(`[data-testid=password-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=password-error]`)),
	)
	b.step("mo sets a password",
		chromedp.SendKeys(chromedp.CSS(`#new-password`), moPassword),
		chromedp.Click(chromedp.CSS(`[data-testid=password-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=password-set]`)),
	)
	b.step("the link again", chromedp.Navigate(invite), chromedp.WaitVisible(chromedp.CSS(`[data-testid=link-invalid]`)))
	b.axe("a used link")
	if st, _ := newDashboardClient(s).postForm(t, "/admin/sign-in", strings.TrimPrefix(invite, s.URL), url.Values{"password": {"a second password"}}); st != http.StatusGone {
		t.Errorf("posting a used link answered %d, want 410", st)
	}
	if st := mo.signIn(t, "mo@example.com", moPassword); st != http.StatusSeeOther {
		t.Fatalf("mo signs in with the password set by the link: %d", st)
	}
	if st := mo.status(t, "/admin/drift"); st != http.StatusForbidden {
		t.Errorf("a marketer opened the drift page: %d", st)
	}

	// A role change takes effect on mo's next request, in the same session.
	b.open("/admin/users", `[data-testid=users-table]`)
	row := `[data-testid=user-row][data-email="mo@example.com"]`
	b.step("make mo an operator",
		chromedp.SetValue(chromedp.CSS(row+` [data-testid=role-select]`), "operator"),
		chromedp.Click(chromedp.CSS(row+` [data-testid=role-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=notice]`)),
	)
	if st := mo.status(t, "/admin/drift"); st != http.StatusOK {
		t.Errorf("after the role change mo's drift page answered %d, want 200", st)
	}
	if st := mo.status(t, "/admin/vouchers/new"); st != http.StatusForbidden {
		t.Errorf("an operator opened the voucher form: %d", st)
	}

	// A reset link: shown once, works once, ends mo's sessions; the old
	// password stops working.
	b.step("reset mo's password", chromedp.Click(chromedp.CSS(row+` [data-testid=reset-password]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=password-link]`)))
	reset := b.eval(`document.querySelector("[data-testid=password-link]").value`)
	if reset == invite {
		t.Fatal("the reset link is the invitation's")
	}
	if st := mo.status(t, "/admin/vouchers"); st != http.StatusOK {
		t.Errorf("making a reset link ended mo's session already: %d", st)
	}
	const moNewPassword = "mo's second password"
	other := newDashboardClient(s)
	if st, _ := other.postForm(t, strings.TrimPrefix(reset, s.URL), strings.TrimPrefix(reset, s.URL), url.Values{"password": {moNewPassword}}); st != http.StatusOK {
		t.Fatalf("setting a password with the reset link answered %d", st)
	}
	if st, _ := other.get(t, strings.TrimPrefix(reset, s.URL)); st != http.StatusGone {
		t.Errorf("the reset link after its use answered %d, want 410", st)
	}
	if st := mo.status(t, "/admin/vouchers"); st != http.StatusSeeOther {
		t.Errorf("mo's session before the reset still works: %d", st)
	}
	if st := newDashboardClient(s).signIn(t, "mo@example.com", moPassword); st != http.StatusUnauthorized {
		t.Errorf("the old password still signs in: %d", st)
	}
	if st := mo.signIn(t, "mo@example.com", moNewPassword); st != http.StatusSeeOther {
		t.Fatalf("the new password does not sign in: %d", st)
	}

	// Disable: a confirmation first; then mo's session ends and sign-in is
	// refused even with the right password.
	b.open("/admin/users", `[data-testid=users-table]`)
	b.step("ask to disable mo", chromedp.Click(chromedp.CSS(row+` [data-testid=disable-user]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=confirm]`)))
	b.axe("the disable confirmation")
	if st := mo.status(t, "/admin/vouchers"); st != http.StatusOK {
		t.Errorf("the confirmation step alone ended mo's session: %d", st)
	}
	b.step("confirm", chromedp.Click(chromedp.CSS(`[data-testid=confirm-submit]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=notice]`)))
	if got := b.text(row + ` [data-testid=user-status]`); !strings.HasPrefix(got, "disabled") {
		t.Errorf("mo's status after disabling = %q", got)
	}
	if st := mo.status(t, "/admin/vouchers"); st != http.StatusSeeOther {
		t.Errorf("a disabled user's session still works: %d", st)
	}
	st, body := newDashboardClient(s).postForm(t, "/admin/sign-in", "/admin/sign-in", url.Values{"email": {"mo@example.com"}, "password": {moNewPassword}})
	if st != http.StatusForbidden || !strings.Contains(body, "disabled") {
		t.Errorf("a disabled user signing in with the right password: %d", st)
	}

	// The last admin cannot demote or disable themselves (the development
	// admin that serve makes outside production is disabled first).
	dev := `[data-testid=user-row][data-email="dev@localhost"]`
	b.step("disable the development admin",
		chromedp.Click(chromedp.CSS(dev+` [data-testid=disable-user]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=confirm]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=confirm-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=notice]`)),
	)
	self := `[data-testid=user-row][data-email="ada@example.com"]`
	b.step("ada tries to make herself a marketer",
		chromedp.SetValue(chromedp.CSS(self+` [data-testid=role-select]`), "marketer"),
		chromedp.Click(chromedp.CSS(self+` [data-testid=role-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=users-error]`)),
	)
	if got := b.text(`[data-testid=users-error]`); !strings.Contains(got, "no admin") {
		t.Errorf("demoting the last admin: %q", got)
	}
	b.step("ada tries to disable herself",
		chromedp.Navigate(s.URL+"/admin/users/disable?email=ada@example.com"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=confirm]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=confirm-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=users-error]`)),
	)
	if got := b.text(self + ` [data-testid=user-status]`); got != "active" {
		t.Errorf("the last admin's status = %q", got)
	}
	if st := newDashboardClient(s).signIn(t, "ada@example.com", adminPassword); st != http.StatusSeeOther {
		t.Errorf("the last admin can no longer sign in: %d", st)
	}

	// The audit log names who did what.
	b.open("/admin/users", `[data-testid=user-audit]`)
	for _, want := range []struct{ action, who string }{
		{"added", "ada@example.com"},
		{"password-set", "mo@example.com"},
		{"role-changed", "ada@example.com"},
		{"password-link", "ada@example.com"},
		{"disabled", "ada@example.com"},
	} {
		got := b.text(`[data-testid=user-audit-row][data-email="mo@example.com"][data-action="` + want.action + `"] td:nth-child(2)`)
		if !strings.Contains(got, want.who) {
			t.Errorf("the audit of mo's %s names %q, want %s", want.action, got, want.who)
		}
	}
	if got := b.text(`[data-testid=user-audit-row][data-action=role-changed] td:nth-child(4)`); !strings.Contains(got, "marketer → operator") {
		t.Errorf("the role change's audit detail = %q", got)
	}
	b.shots.take(b.ctx, "users-audit")
}
