package web

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"

	"voucherd/internal/accounts"
	"voucherd/internal/voucher"
	"voucherd/web/components"
)

// passwordCookie holds the CSRF token of a password link's form: like the
// sign-in form, it is used before any session exists.
const passwordCookie = "voucherd_password"

// usersPage is the admin's page of users and roles.
func (d *dashboard) usersPage(w http.ResponseWriter, r *http.Request) {
	d.renderUsers(w, r, http.StatusOK, components.UsersView{Invite: components.InviteForm{Role: string(voucher.RoleMarketer)}})
}

// renderUsers reads the page of users the URL names (?q= searches the
// emails, ?page= pages) and their latest changes into v and shows the page.
func (d *dashboard) renderUsers(w http.ResponseWriter, r *http.Request, status int, v components.UsersView) {
	q := r.URL.Query()
	v.Query = accounts.UserQuery{Search: strings.TrimSpace(q.Get("q")), Page: pageParam(q, accounts.MaxUserPage)}
	page, err := d.deps.Accounts.Users(r.Context(), v.Query)
	if e := voucher.AsError(err); err != nil && e.Code == voucher.InvalidInput {
		d.problem(w, r, http.StatusUnprocessableEntity, "Search not accepted", e.Message)
		return
	} else if err != nil {
		d.fail(w, r, err)
		return
	}
	v.Users, v.More = page.Users, page.More
	if v.Audit, err = d.deps.Accounts.UserAudit(r.Context()); err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, status, components.UsersPage(d.page(r, "Users and roles", "users"), v))
}

// inviteUser adds a user and shows the one-time link they set their
// password with.
func (d *dashboard) inviteUser(w http.ResponseWriter, r *http.Request) {
	f := components.InviteForm{
		Email: strings.TrimSpace(r.PostFormValue("email")), Name: strings.TrimSpace(r.PostFormValue("name")),
		Role: r.PostFormValue("role"), Errors: map[string]string{},
	}
	u, link, err := d.deps.Accounts.InviteUser(r.Context(), accounts.Invite{Email: f.Email, Name: f.Name, Role: voucher.Role(f.Role)})
	switch e := voucher.AsError(err); {
	case err == nil:
	case e.Code == voucher.InvalidInput:
		f.Errors["invite-"+e.Field] = inviteMessages[e.Field]
		d.renderUsers(w, r, http.StatusUnprocessableEntity, components.UsersView{Invite: f})
		return
	case e.Code == accounts.UserExists:
		f.Errors["invite-email"] = "A user with this email exists already."
		d.renderUsers(w, r, http.StatusConflict, components.UsersView{Invite: f})
		return
	default:
		d.fail(w, r, err)
		return
	}
	d.renderUsers(w, r, http.StatusCreated, components.UsersView{
		Invite: components.InviteForm{Role: string(voucher.RoleMarketer)},
		Link:   d.shownLink(r, "User "+u.Email+" added as "+string(u.Role), link),
	})
}

// inviteMessages are the form's words for the fields the domain refuses.
var inviteMessages = map[string]string{
	"email": "Type an email address, such as name@example.com.",
	"name":  "A name is at most 100 characters of text.",
	"role":  "Pick marketer, operator or admin.",
}

// shownLink is a link with the whole URL, on the host the admin reached.
func (d *dashboard) shownLink(r *http.Request, heading string, l accounts.PasswordLink) *components.ShownLink {
	scheme := "http"
	if r.TLS != nil || d.cfg.SecureCookies {
		scheme = "https"
	}
	return &components.ShownLink{Heading: heading, Email: l.Email, URL: scheme + "://" + r.Host + l.Path(), ExpiresAt: l.ExpiresAt}
}

// changeRole gives a user another role.
func (d *dashboard) changeRole(w http.ResponseWriter, r *http.Request) {
	before, err := d.deps.Accounts.ChangeRole(r.Context(), r.PostFormValue("email"), voucher.Role(r.PostFormValue("role")))
	if d.refusedUserChange(w, r, err) {
		return
	}
	notice := "role-changed"
	if before == voucher.Role(r.PostFormValue("role")) {
		notice = "role-same"
	}
	http.Redirect(w, r, "/admin/users?notice="+notice, http.StatusSeeOther)
}

// refusedUserChange answers a refused change on the users page; false when
// err is nil.
func (d *dashboard) refusedUserChange(w http.ResponseWriter, r *http.Request, err error) bool {
	switch voucher.ErrorCodeOf(err) {
	case "":
		return false
	case accounts.LastAdmin, accounts.UserDisabled, voucher.InvalidInput:
		status := http.StatusConflict
		if voucher.ErrorCodeOf(err) == voucher.InvalidInput {
			status = http.StatusUnprocessableEntity // the request is at fault, not the users' state
		}
		d.renderUsers(w, r, status, components.UsersView{
			Invite: components.InviteForm{Role: string(voucher.RoleMarketer)}, Refusal: voucher.AsError(err).Message,
		})
	default:
		d.fail(w, r, err)
	}
	return true
}

// confirmDisable asks before a user is disabled.
func (d *dashboard) confirmDisable(w http.ResponseWriter, r *http.Request) {
	email := strings.TrimSpace(r.URL.Query().Get("email"))
	if email == "" || len(email) > 254 {
		d.problem(w, r, http.StatusNotFound, "Not found", "There is no user with that email.")
		return
	}
	effects := []string{
		"Every session of " + email + " ends now; their next click goes to the sign-in page.",
		"Signing in as " + email + " is refused, even with the right password.",
		"Their unused password links stop working. The change is recorded with your name.",
	}
	if email == sessionFrom(r.Context()).user.Email {
		effects = append(effects, "This is you: you are signed out at once.")
	}
	d.render(w, r, http.StatusOK, components.Confirm(d.page(r, "Disable "+email, "users"), components.ConfirmAction{
		Title:    "Disable " + email + "?",
		Question: "A disabled user keeps their name in the audit logs but can no longer use the dashboard.",
		Effects:  effects,
		Action:   "/admin/users/disable?email=" + url.QueryEscape(email),
		Button:   "Disable user",
		Cancel:   "/admin/users",
		Danger:   true,
	}))
}

// disableUser disables a user (after the confirmation step).
func (d *dashboard) disableUser(w http.ResponseWriter, r *http.Request) {
	if r.PostFormValue("confirm") != "yes" {
		http.Redirect(w, r, "/admin/users/disable?email="+url.QueryEscape(r.URL.Query().Get("email")), http.StatusSeeOther)
		return
	}
	u, err := d.deps.Accounts.DisableUser(r.Context(), r.URL.Query().Get("email"))
	if d.refusedUserChange(w, r, err) {
		return
	}
	if u.ID == sessionFrom(r.Context()).user.ID {
		http.Redirect(w, r, "/admin/sign-in", http.StatusSeeOther) // their own session is gone
		return
	}
	http.Redirect(w, r, "/admin/users?notice=disabled", http.StatusSeeOther)
}

// resetPassword makes a one-time link for a user to set a new password and
// shows it once.
func (d *dashboard) resetPassword(w http.ResponseWriter, r *http.Request) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	link, err := d.deps.Accounts.ResetPassword(r.Context(), email)
	if d.refusedUserChange(w, r, err) {
		return
	}
	d.renderUsers(w, r, http.StatusOK, components.UsersView{
		Invite: components.InviteForm{Role: string(voucher.RoleMarketer)},
		Link:   d.shownLink(r, "Password reset link for "+link.Email, link),
	})
}

// passwordPage is where a one-time link leads, with or without a session.
func (d *dashboard) passwordPage(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	u, err := d.deps.Accounts.PasswordLinkUser(r.Context(), token)
	if err != nil {
		d.passwordRefused(w, r, err)
		return
	}
	d.renderPassword(w, r, http.StatusOK, components.PasswordView{Token: token, Email: u.Email})
}

// renderPassword shows the link's form with a fresh CSRF token, also set in
// a cookie the form must match.
func (d *dashboard) renderPassword(w http.ResponseWriter, r *http.Request, status int, v components.PasswordView) {
	v.CSRF = voucher.RandomToken()
	http.SetCookie(w, &http.Cookie{
		Name: passwordCookie, Value: v.CSRF, Path: "/admin/password", MaxAge: 3600,
		HttpOnly: true, Secure: d.cfg.SecureCookies, SameSite: http.SameSiteStrictMode,
	})
	d.render(w, r, status, components.PasswordPage(v))
}

func (d *dashboard) passwordRefused(w http.ResponseWriter, r *http.Request, err error) {
	if voucher.ErrorCodeOf(err) == accounts.LinkInvalid {
		d.render(w, r, http.StatusGone, components.PasswordPage(components.PasswordView{Invalid: true}))
		return
	}
	d.logger.ErrorContext(r.Context(), "a password link failed", "err", err)
	http.Error(w, "the password could not be set; try again", http.StatusServiceUnavailable)
}

// setPassword uses a one-time link: once it worked, it never works again.
func (d *dashboard) setPassword(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	c, err := r.Cookie(passwordCookie)
	form := r.PostFormValue("csrf")
	if err != nil || form == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(form)) != 1 {
		u, err := d.deps.Accounts.PasswordLinkUser(r.Context(), token)
		if err != nil {
			d.passwordRefused(w, r, err)
			return
		}
		d.renderPassword(w, r, http.StatusForbidden, components.PasswordView{Token: token, Email: u.Email, Message: "The form expired. Please type the password again."})
		return
	}
	u, err := d.deps.Accounts.SetPassword(r.Context(), token, r.PostFormValue("password"))
	if e := voucher.AsError(err); err != nil && e.Code == voucher.InvalidInput {
		lu, lerr := d.deps.Accounts.PasswordLinkUser(r.Context(), token)
		if lerr != nil {
			d.passwordRefused(w, r, lerr)
			return
		}
		d.renderPassword(w, r, http.StatusUnprocessableEntity, components.PasswordView{Token: token, Email: lu.Email, Message: passwordMessage(e.Message)})
		return
	}
	if err != nil {
		d.passwordRefused(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: passwordCookie, Value: "", Path: "/admin/password", MaxAge: -1, HttpOnly: true, Secure: d.cfg.SecureCookies, SameSite: http.SameSiteStrictMode})
	d.render(w, r, http.StatusOK, components.PasswordPage(components.PasswordView{Done: true, Email: u.Email}))
}

// passwordMessage puts the domain's rule in the form's words.
func passwordMessage(m string) string {
	switch {
	case strings.Contains(m, "at least"):
		return "The password must be at least 10 characters."
	case strings.Contains(m, "at most"):
		return "The password must be at most 72 bytes."
	}
	return "The password must be text without control characters."
}

// enableUser lets a disabled user sign in again; nothing is lost by it, so
// it takes no confirmation step.
func (d *dashboard) enableUser(w http.ResponseWriter, r *http.Request) {
	_, err := d.deps.Accounts.EnableUser(r.Context(), r.PostFormValue("email"))
	if d.refusedUserChange(w, r, err) {
		return
	}
	http.Redirect(w, r, "/admin/users?notice=enabled", http.StatusSeeOther)
}
