package web

import (
	"context"
	"crypto/subtle"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"voucherd/internal/accounts"
	"voucherd/internal/clientaddr"
	"voucherd/internal/voucher"
	"voucherd/web/components"
)

// The dashboard's cookies. The session cookie holds a random token whose
// hash the database keeps; the sign-in cookie holds the CSRF token of the
// sign-in form, before any session exists.
const (
	sessionCookie = "voucherd_session"
	signInCookie  = "voucherd_signin"
)

type sessionKey struct{}

// signedIn is the request's user and session.
type signedIn struct {
	user    accounts.User
	session accounts.Session
	token   string
}

func sessionFrom(ctx context.Context) signedIn {
	s, _ := ctx.Value(sessionKey{}).(signedIn)
	return s
}

// requireSession lets a request through with its user as the service's
// caller only when it has a live session, the role for op and, for anything
// but GET, the session's CSRF token. Without a session a page goes to the
// sign-in page; an htmx request is told to go there.
func (d *dashboard) requireSession(op voucher.Operation, next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var token string
		if c, err := r.Cookie(sessionCookie); err == nil {
			token = c.Value
		}
		sess, user, err := d.deps.Accounts.SessionUser(r.Context(), token)
		if err != nil {
			if voucher.ErrorCodeOf(err) == voucher.Unavailable {
				http.Error(w, "the dashboard cannot read your session for a moment; try again", http.StatusServiceUnavailable)
				return
			}
			if voucher.ErrorCodeOf(err) != accounts.SignedOut {
				d.logger.ErrorContext(r.Context(), "reading a dashboard session failed", "err", err)
				http.Error(w, "the dashboard could not read your session; try again", http.StatusInternalServerError)
				return
			}
			d.toSignIn(w, r)
			return
		}
		ctx := context.WithValue(r.Context(), sessionKey{}, signedIn{user: user, session: sess, token: token})
		ctx = voucher.WithCaller(ctx, user.Caller())
		r = r.WithContext(ctx)
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !validCSRF(r, sess.CSRFToken) {
			d.problem(w, r, http.StatusForbidden, "This form has expired",
				"The form did not carry this session's security token (it may be from before you signed in again). Go back, reload the page and try again.")
			return
		}
		if !user.Caller().Can(op) {
			d.problem(w, r, http.StatusForbidden, "Not allowed", "Your role ("+string(user.Role)+") may not do this. Ask an admin if you need it.")
			return
		}
		next(w, r)
	})
}

// SessionCaller reads a request's dashboard session cookie and returns its
// user as the service's caller, for a route outside /admin that a signed-in
// user may open (the campaign codes export, a GET: no CSRF token). ok is
// false without a live session; err is a failure to read it.
func SessionCaller(a Accounts) func(r *http.Request) (voucher.Caller, bool, error) {
	return func(r *http.Request) (voucher.Caller, bool, error) {
		c, err := r.Cookie(sessionCookie)
		if err != nil || c.Value == "" {
			return voucher.Caller{}, false, nil
		}
		_, user, err := a.SessionUser(r.Context(), c.Value)
		if voucher.ErrorCodeOf(err) == accounts.SignedOut {
			return voucher.Caller{}, false, nil
		}
		if err != nil {
			return voucher.Caller{}, false, err
		}
		return user.Caller(), true, nil
	}
}

// validCSRF compares the form's or the htmx header's token with want in
// constant time.
func validCSRF(r *http.Request, want string) bool {
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (d *dashboard) toSignIn(w http.ResponseWriter, r *http.Request) {
	target := "/admin/sign-in"
	if r.Method == http.MethodGet && r.URL.Path != "/admin/sign-in" {
		target += "?next=" + url.QueryEscape(r.URL.RequestURI())
	}
	if r.Header.Get("HX-Request") == "true" {
		w.Header().Set("HX-Redirect", target)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// signInPage shows the form with a fresh CSRF token, also set in a cookie
// the form must match (there is no session to hold it yet).
func (d *dashboard) signInPage(w http.ResponseWriter, r *http.Request) {
	d.renderSignIn(w, r, http.StatusOK, "", "")
}

func (d *dashboard) renderSignIn(w http.ResponseWriter, r *http.Request, status int, email, message string) {
	token := voucher.RandomToken()
	http.SetCookie(w, &http.Cookie{
		Name: signInCookie, Value: token, Path: "/admin/sign-in", MaxAge: 3600,
		HttpOnly: true, Secure: d.cfg.SecureCookies, SameSite: http.SameSiteStrictMode,
	})
	d.render(w, r, status, components.SignIn(email, message, token, safeNext(r.FormValue("next"))))
}

// signIn checks the form's CSRF token against its cookie, then the email
// and password; failures count against the email and the client's address.
func (d *dashboard) signIn(w http.ResponseWriter, r *http.Request) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	c, err := r.Cookie(signInCookie)
	form := r.PostFormValue("csrf")
	if err != nil || form == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(form)) != 1 {
		d.renderSignIn(w, r, http.StatusForbidden, email, "The sign-in form expired. Please try again.")
		return
	}
	token, sess, _, err := d.deps.Accounts.SignIn(r.Context(), clientaddr.Of(r), email, r.PostFormValue("password"))
	switch e := voucher.AsError(err); {
	case err == nil:
	case e.Code == accounts.BadCredentials:
		d.renderSignIn(w, r, http.StatusUnauthorized, email, "The email or the password is wrong.")
		return
	case e.Code == accounts.TooManyAttempts:
		wait, werr := d.deps.Accounts.LockWait(r.Context(), e.Field, clientaddr.Of(r), email)
		if werr != nil {
			d.logger.WarnContext(r.Context(), "reading a sign-in lock's wait failed", "err", werr)
			wait = 15 * time.Minute // the longest it can be
		}
		secs := max(1, int(math.Ceil(wait.Seconds())))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		message := "Too many failed sign-ins from your address. Try again in " + components.Wait(wait) + ", or ask an admin to unlock your address."
		if e.Field == "email" {
			message = "Too many failed sign-ins for this email. Try again in " + components.Wait(wait) + ", or ask an admin to unlock it."
		}
		d.renderSignIn(w, r, http.StatusTooManyRequests, email, message)
		return
	case e.Code == accounts.UserDisabled:
		d.renderSignIn(w, r, http.StatusForbidden, email, "This account is disabled. Ask an admin if you need it again.")
		return
	case e.Code == voucher.Unavailable:
		d.logger.WarnContext(r.Context(), "sign-in unavailable", "err", err)
		d.renderSignIn(w, r, http.StatusServiceUnavailable, email, "Signing in is unavailable for a moment; try again.")
		return
	default:
		d.logger.ErrorContext(r.Context(), "sign-in failed", "err", err)
		d.renderSignIn(w, r, http.StatusInternalServerError, email, "Signing in failed on our side; try again.")
		return
	}
	// Path "/": the campaign codes export (GET /campaigns/{id}/codes.csv)
	// is a download a signed-in user opens outside /admin.
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: token, Path: "/", Expires: sess.ExpiresAt,
		MaxAge:   int(d.deps.Accounts.SessionTTL().Seconds()),
		HttpOnly: true, Secure: d.cfg.SecureCookies, SameSite: http.SameSiteLaxMode,
	})
	http.SetCookie(w, &http.Cookie{Name: signInCookie, Value: "", Path: "/admin/sign-in", MaxAge: -1, HttpOnly: true, Secure: d.cfg.SecureCookies, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

// signOut ends the session and clears its cookie.
func (d *dashboard) signOut(w http.ResponseWriter, r *http.Request) {
	if err := d.deps.Accounts.SignOut(r.Context(), sessionFrom(r.Context()).token); err != nil {
		d.fail(w, r, err)
		return
	}
	// Both paths: sessions signed in before the cookie moved to "/" have it at /admin.
	for _, p := range []string{"/", "/admin"} {
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: p, MaxAge: -1, HttpOnly: true, Secure: d.cfg.SecureCookies, SameSite: http.SameSiteLaxMode})
	}
	http.Redirect(w, r, "/admin/sign-in", http.StatusSeeOther)
}

// safeNext keeps a post-sign-in redirect inside the dashboard.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/admin") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") ||
		strings.HasPrefix(next, "/admin/sign-in") {
		return "/admin/vouchers"
	}
	return next
}

// signInLocks is the admin's page of the sign-in locks now, to lift them.
func (d *dashboard) signInLocks(w http.ResponseWriter, r *http.Request) {
	d.renderLocks(w, r, http.StatusOK, components.SignInLocksView{})
}

// renderLocks shows the locks now with v's form.
func (d *dashboard) renderLocks(w http.ResponseWriter, r *http.Request, status int, v components.SignInLocksView) {
	locks, err := d.deps.Accounts.SignInLocks(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	v.Locks, v.More, v.Limits = locks, len(locks) >= accounts.MaxSignInLocks, d.deps.Accounts.Limits()
	d.render(w, r, status, components.SignInLocks(d.page(r, "Sign-in locks", "locks"), v))
}

// liftSignInLock lifts the lock of an email or an address (as `voucherd
// user unlock` does).
func (d *dashboard) liftSignInLock(w http.ResponseWriter, r *http.Request) {
	email, address := strings.TrimSpace(r.PostFormValue("email")), strings.TrimSpace(r.PostFormValue("address"))
	if _, perr := netip.ParsePrefix(address); address != "" && net.ParseIP(address) == nil && perr != nil {
		d.renderLocks(w, r, http.StatusUnprocessableEntity, components.SignInLocksView{Email: email, Address: address, Message: "An address is an IP address, like 203.0.113.7, or an IPv6 network, like 2001:db8:1:2::/64."})
		return
	}
	n, err := d.deps.Accounts.LiftLocks(r.Context(), email, address)
	if voucher.ErrorCodeOf(err) == voucher.InvalidInput {
		d.renderLocks(w, r, http.StatusUnprocessableEntity, components.SignInLocksView{Email: email, Address: address, Message: "Name an email or an address to unlock."})
		return
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	notice := "unlocked"
	if n == 0 {
		notice = "not-locked"
	}
	http.Redirect(w, r, "/admin/sign-in-locks?notice="+notice, http.StatusSeeOther)
}
