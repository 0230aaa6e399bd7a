// Package web is the dashboard at /admin: templ components (web/components),
// the handlers that call the voucher service and render them, and the static
// assets, embedded. Marketers create and change vouchers; operators watch
// quota and drift and run repairs.
package web

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"
	_ "time/tzdata" // time zones for the form's select, even where the OS has none

	"github.com/a-h/templ"

	"voucherd/internal/accounts"
	"voucherd/internal/clientaddr"
	"voucherd/internal/voucher"
	"voucherd/web/components"
)

// Accounts signs dashboard users in and out (accounts.Accounts).
type Accounts interface {
	SignIn(ctx context.Context, address, email, password string) (string, accounts.Session, accounts.User, error)
	SessionUser(ctx context.Context, token string) (accounts.Session, accounts.User, error)
	SignOut(ctx context.Context, token string) error
	SessionTTL() time.Duration
	// LockWait is how long a sign-in refused with TOO_MANY_ATTEMPTS waits.
	LockWait(ctx context.Context, field, address, email string) (time.Duration, error)
	LiftLocks(ctx context.Context, email, address string) (int, error)
	// SignInLocks lists the locks now; Limits are the limits in force.
	SignInLocks(ctx context.Context) ([]accounts.SignInLock, error)
	Limits() accounts.SignInLimit

	Users(ctx context.Context, q accounts.UserQuery) (accounts.UserPage, error)
	UserAudit(ctx context.Context) ([]accounts.UserAuditEvent, error)
	InviteUser(ctx context.Context, in accounts.Invite) (accounts.User, accounts.PasswordLink, error)
	ChangeRole(ctx context.Context, email string, role voucher.Role) (voucher.Role, error)
	DisableUser(ctx context.Context, email string) (accounts.User, error)
	EnableUser(ctx context.Context, email string) (accounts.User, error)
	ResetPassword(ctx context.Context, email string) (accounts.PasswordLink, error)
	// PasswordLinkUser and SetPassword serve a one-time link, without a
	// session.
	PasswordLinkUser(ctx context.Context, token string) (accounts.User, error)
	SetPassword(ctx context.Context, token, password string) (accounts.User, error)
}

// Vouchers is what the voucher pages call (voucher.Backoffice).
type Vouchers interface {
	ListVouchers(ctx context.Context, f voucher.VoucherFilter) ([]voucher.VoucherOverview, error)
	PageVouchers(ctx context.Context, f voucher.VoucherFilter) (voucher.VoucherPage, error)
	Voucher(ctx context.Context, code string) (voucher.VoucherOverview, error)
	Activity(ctx context.Context, code string) (voucher.VoucherActivity, error)
	Reservations(ctx context.Context, code string, f voucher.ReservationFilter) ([]voucher.Reservation, *voucher.ReservationCursor, error)
	ExportReservations(ctx context.Context, code string, f voucher.ReservationFilter, each func(voucher.Reservation) error) error
	CreateVoucher(ctx context.Context, n voucher.NewVoucher) (voucher.Voucher, error)
	UpdateVoucher(ctx context.Context, code string, c voucher.VoucherChange) (voucher.Voucher, error)
	EndVoucher(ctx context.Context, code string) (voucher.Voucher, error)
	ExtendVoucher(ctx context.Context, code string, x voucher.VoucherExtension) (voucher.Voucher, error)
	DuplicateVoucher(ctx context.Context, from string, n voucher.NewVoucher) (voucher.Voucher, error)
}

// Sales reads a voucher's sale as it happened (voucher.Service).
type Sales interface {
	Sale(ctx context.Context, code string) (voucher.SaleReport, error)
}

// Reservations finds a reservation by orderId (voucher.Service).
type Reservations interface {
	Reservation(ctx context.Context, orderID string) (voucher.Reservation, error)
}

// Drift is what the drift page calls (voucher.Backoffice: its repairs are
// audited).
type Drift interface {
	DriftReports(ctx context.Context) ([]voucher.DriftReport, error)
	Reconcile(ctx context.Context) ([]voucher.DriftReport, error)
	RebuildGate(ctx context.Context, code string) error
	OperationAudit(ctx context.Context) ([]voucher.AuditEvent, error)
}

// DeadLetterCounter counts dead-lettered events (the Kafka write path's).
type DeadLetterCounter interface {
	DeadLetterCount(ctx context.Context) (int, error)
}

// Deps are the dashboard's dependencies.
type Deps struct {
	Accounts     Accounts
	Vouchers     Vouchers
	Reservations Reservations
	Drift        Drift
	// DeadLetters counts the Kafka write path's dead letters; nil: not shown.
	DeadLetters DeadLetterCounter
	// DeadLetterDesk lists dead letters and acts on them; nil: no page.
	DeadLetterDesk DeadLetterDesk
	// Campaigns lists, creates and shows campaigns; nil: no pages.
	Campaigns Campaigns
	// ApiKeys creates, lists and revokes API keys; nil: no page.
	ApiKeys ApiKeys
	// Webhooks manages webhook endpoints and their deliveries; nil: no page.
	Webhooks Webhooks
	// Sales reads a voucher's sale as it happened; nil: not shown.
	Sales Sales
}

// Config tunes the dashboard.
type Config struct {
	// SecureCookies marks cookies Secure (HTTPS only): on everywhere but
	// development.
	SecureCookies bool
	Logger        *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// DefaultCurrency is the currency of a voucher created without one
	// (DEFAULT_CURRENCY), the form's amounts' when none is typed; default
	// USD, as the service's.
	DefaultCurrency string
	// ClientAddresses finds a request's client address (TRUSTED_PROXIES),
	// which sign-in failures count against; the zero value: the peer's.
	ClientAddresses clientaddr.Resolver
}

// dashboard holds the handlers' dependencies.
type dashboard struct {
	deps   Deps
	cfg    Config
	logger *slog.Logger
}

// New returns the dashboard's handler for /admin and everything under it.
func New(deps Deps, cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.DefaultCurrency = cmp.Or(cfg.DefaultCurrency, "USD")
	d := &dashboard{deps: deps, cfg: cfg, logger: cfg.Logger}
	mux := http.NewServeMux()
	d.routes(mux)
	var h http.Handler = mux
	h = http.NewCrossOriginProtection().Handler(h)
	h = limitForm(h) // first: no check reads a body before its size is known
	h = securityHeaders(h)
	h = cfg.ClientAddresses.Middleware(h)
	return h
}

// routes lists every dashboard route in one place. signedIn routes need a
// session; POSTs among them also need the session's CSRF token.
func (d *dashboard) routes(mux *http.ServeMux) {
	mux.Handle("GET /admin/static/", staticFiles())
	mux.Handle("GET /admin/sign-in", http.HandlerFunc(d.signInPage))
	mux.Handle("POST /admin/sign-in", http.HandlerFunc(d.signIn))
	mux.Handle("GET /admin/password/{token}", http.HandlerFunc(d.passwordPage))
	mux.Handle("POST /admin/password/{token}", http.HandlerFunc(d.setPassword))

	signedIn := func(pattern string, op voucher.Operation, h http.HandlerFunc) {
		mux.Handle(pattern, d.requireSession(op, h))
	}
	signedIn("GET /admin", voucher.OpRead, redirectTo("/admin/vouchers"))
	signedIn("GET /admin/{$}", voucher.OpRead, redirectTo("/admin/vouchers"))
	signedIn("POST /admin/sign-out", voucher.OpRead, d.signOut)

	signedIn("GET /admin/vouchers", voucher.OpRead, d.voucherList)
	signedIn("GET /admin/vouchers/rows", voucher.OpRead, d.voucherRows)
	signedIn("GET /admin/vouchers/new", voucher.OpManageVoucher, d.newVoucher)
	signedIn("GET /admin/vouchers/preview", voucher.OpManageVoucher, d.windowPreview)
	signedIn("POST /admin/vouchers", voucher.OpManageVoucher, d.createVoucher)
	signedIn("GET /admin/vouchers/{code}", voucher.OpRead, d.voucherPage)
	signedIn("GET /admin/vouchers/{code}/figures", voucher.OpRead, d.voucherFigures)
	signedIn("GET /admin/vouchers/{code}/reservations", voucher.OpRead, d.reservationList)
	signedIn("GET /admin/vouchers/{code}/reservations.csv", voucher.OpRead, d.reservationsCSV)
	signedIn("GET /admin/vouchers/{code}/sale.csv", voucher.OpReadSale, d.saleCSV)
	signedIn("GET /admin/vouchers/{code}/edit", voucher.OpManageVoucher, d.editVoucher)
	signedIn("POST /admin/vouchers/{code}", voucher.OpManageVoucher, d.updateVoucher)
	signedIn("GET /admin/vouchers/{code}/end", voucher.OpManageVoucher, d.confirmEndVoucher)
	signedIn("POST /admin/vouchers/{code}/end", voucher.OpManageVoucher, d.endVoucher)
	signedIn("GET /admin/vouchers/{code}/duplicate", voucher.OpManageVoucher, d.duplicateVoucher)
	signedIn("GET /admin/vouchers/{code}/extend", voucher.OpManageVoucher, d.extendForm)
	signedIn("POST /admin/vouchers/{code}/extend", voucher.OpManageVoucher, d.extendVoucher)
	signedIn("GET /admin/reservations", voucher.OpRead, d.reservationLookup)
	d.campaignRoutes(signedIn)

	signedIn("GET /admin/drift", voucher.OpOperate, d.driftPage)
	signedIn("GET /admin/drift/live", voucher.OpOperate, d.driftLive)
	signedIn("GET /admin/drift/reconcile", voucher.OpOperate, d.confirmReconcile)
	signedIn("POST /admin/drift/reconcile", voucher.OpOperate, d.reconcile)
	signedIn("GET /admin/drift/{code}/rebuild", voucher.OpOperate, d.confirmRebuild)
	signedIn("POST /admin/drift/{code}/rebuild", voucher.OpOperate, d.rebuild)

	signedIn("GET /admin/dead-letters", voucher.OpOperate, d.deadLettersPage)
	signedIn("GET /admin/dead-letters/{id}/apply", voucher.OpOperate, d.confirmApplyDeadLetter)
	signedIn("POST /admin/dead-letters/{id}/apply", voucher.OpOperate, d.applyDeadLetter)
	signedIn("GET /admin/dead-letters/{id}/discard", voucher.OpOperate, d.confirmDiscardDeadLetter)
	signedIn("POST /admin/dead-letters/{id}/discard", voucher.OpOperate, d.discardDeadLetter)

	signedIn("GET /admin/sign-in-locks", voucher.OpManageUsers, d.signInLocks)
	signedIn("POST /admin/sign-in-locks", voucher.OpManageUsers, d.liftSignInLock)
	signedIn("GET /admin/users", voucher.OpManageUsers, d.usersPage)
	signedIn("POST /admin/users", voucher.OpManageUsers, d.inviteUser)
	signedIn("POST /admin/users/role", voucher.OpManageUsers, d.changeRole)
	signedIn("GET /admin/users/disable", voucher.OpManageUsers, d.confirmDisable)
	signedIn("POST /admin/users/disable", voucher.OpManageUsers, d.disableUser)
	signedIn("POST /admin/users/enable", voucher.OpManageUsers, d.enableUser)
	signedIn("POST /admin/users/reset", voucher.OpManageUsers, d.resetPassword)
	if d.deps.ApiKeys != nil {
		signedIn("GET /admin/api-keys", voucher.OpManageKeys, d.apiKeysPage)
		signedIn("POST /admin/api-keys", voucher.OpManageKeys, d.createApiKey)
		signedIn("POST /admin/api-keys/{id}/revoke", voucher.OpManageKeys, d.revokeApiKey)
	}

	if d.deps.Webhooks != nil {
		signedIn("GET /admin/webhooks", voucher.OpManageWebhooks, d.webhooksPage)
		signedIn("POST /admin/webhooks", voucher.OpManageWebhooks, d.createWebhook)
		signedIn("GET /admin/webhooks/{id}", voucher.OpManageWebhooks, d.webhookPage)
		signedIn("POST /admin/webhooks/{id}/test", voucher.OpManageWebhooks, d.testWebhook)
		signedIn("POST /admin/webhooks/{id}/enabled", voucher.OpManageWebhooks, d.enableWebhook)
		signedIn("POST /admin/webhooks/{id}/rotate", voucher.OpManageWebhooks, d.rotateWebhook)
		signedIn("POST /admin/webhooks/{id}/delete", voucher.OpManageWebhooks, d.deleteWebhook)
		signedIn("POST /admin/webhooks/{id}/resend", voucher.OpManageWebhooks, d.resendWebhook)
	}

	mux.Handle("/admin/", d.requireSession(voucher.OpRead, func(w http.ResponseWriter, r *http.Request) {
		d.problem(w, r, http.StatusNotFound, "Not found", "There is no such page in the dashboard.")
	}))
}

func redirectTo(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, path, http.StatusSeeOther)
	}
}

// render writes a component with a status; a failure to render is logged
// (the header is gone by then).
func (d *dashboard) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := c.Render(r.Context(), w); err != nil {
		d.logger.ErrorContext(r.Context(), "rendering a dashboard page failed", "path", r.URL.Path, "err", err)
	}
}

// page is the layout's data for the signed-in user of the request.
func (d *dashboard) page(r *http.Request, title, active string) components.Page {
	s := sessionFrom(r.Context())
	return components.Page{
		Title:  title,
		User:   components.Viewer{Email: s.user.Email, Name: s.user.Name, Role: s.user.Role},
		CSRF:   s.session.CSRFToken,
		Active: active,
		Notice: notices[r.URL.Query().Get("notice")],
		Zone:   zoneOf(r),
		// The navigation shows the campaigns when the dashboard has them.
		Campaigns: d.deps.Campaigns != nil,
		ApiKeys:   d.deps.ApiKeys != nil,
		Webhooks:  d.deps.Webhooks != nil,
	}
}

// notices are the sentences a redirect after an action may show, by key, so
// a URL can never put words of its own on the page.
var notices = map[string]string{
	"created":          "Voucher created.",
	"updated":          "Voucher changed.",
	"ended":            "Voucher ended: no new reserve is taken; held reservations keep their rules.",
	"duplicated":       "Voucher created with the terms of the one it was duplicated from.",
	"extended":         "Voucher extended: the new end and total apply from now, and the change is in the audit log.",
	"reconciled":       "Reconciliation ran: the reports below are fresh.",
	"unlocked":         "Sign-in lock lifted: the failures so far stop counting, and they can sign in now.",
	"not-locked":       "Nothing was locked for that email or address.",
	"role-changed":     "Role changed: it takes effect on the user's next click.",
	"role-same":        "The user had that role already: nothing changed.",
	"disabled":         "User disabled: their sessions have ended and they cannot sign in.",
	"enabled":          "User enabled: they can sign in again with their password (reset it if they no longer know it).",
	"dl-applied":       "Applied again: the event is in the database now, and the dead letter is closed.",
	"dl-refused":       "Applying again was refused: the dead letter stays, with the new reason below.",
	"dl-discarded":     "Dead letter discarded: nothing was written.",
	"campaign-created": "Campaign created.",
	"key-revoked":      "API key revoked: every server refuses it within a second.",
	"hook-tested":      "Test event queued: it is delivered within a second or two; its delivery is listed below.",
	"hook-enabled":     "Endpoint enabled: its pending deliveries are attempted again.",
	"hook-disabled":    "Endpoint disabled: nothing is sent to it until it is enabled; new events are not queued for it meanwhile.",
	"hook-deleted":     "Endpoint deleted, with its pending deliveries.",
	"hook-resent":      "Event queued to be delivered again now.",
	"rebuilt":          "Gate rebuilt from the database, and a reconciliation pass ran right after: the reports below are from it.",
}

// problem renders an error page. For htmx requests it answers the status
// alone, so a failed poll leaves the page as it was.
func (d *dashboard) problem(w http.ResponseWriter, r *http.Request, status int, heading, message string) {
	if r.Header.Get("HX-Request") == "true" {
		w.WriteHeader(status)
		return
	}
	d.render(w, r, status, components.Problem(d.page(r, heading, ""), heading, message))
}

// fail maps a service error to a page: refusals by their code, anything
// else logged and shown as a generic internal error.
func (d *dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := voucher.AsError(err)
	switch e.Code {
	case voucher.Forbidden:
		d.problem(w, r, http.StatusForbidden, "Not allowed", "Your role may not do this. Ask an admin if you need it.")
	case voucher.NotFound:
		d.problem(w, r, http.StatusNotFound, "Not found", e.Message)
	case voucher.InvalidInput:
		// The request, not the state, is at fault: a 422 with the rule.
		d.problem(w, r, http.StatusUnprocessableEntity, "Not accepted", e.Message)
	case voucher.Unavailable:
		d.problem(w, r, http.StatusServiceUnavailable, "Unavailable", "A dependency did not answer; try again in a moment.")
	case voucher.Internal:
		d.logger.ErrorContext(r.Context(), "dashboard request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		d.problem(w, r, http.StatusInternalServerError, "Something went wrong", "The dashboard could not do this. It is logged; try again.")
	default:
		d.problem(w, r, http.StatusConflict, "Refused", e.Message)
	}
}

// zoneCookie holds the browser's time zone, set by dashboard.js, so times
// are shown in the reader's zone.
const zoneCookie = "voucherd_tz"

func zoneOf(r *http.Request) *time.Location {
	if c, err := r.Cookie(zoneCookie); err == nil {
		name, _ := url.QueryUnescape(c.Value) // the script encodes the "/"
		if loc, ok := loadZone(name); ok {
			return loc
		}
	}
	return time.UTC
}

// loadZone loads an IANA zone name; names that are not (or paths) fail.
func loadZone(name string) (*time.Location, bool) {
	if name == "" || name == "Local" || len(name) > 64 {
		return nil, false
	}
	loc, err := time.LoadLocation(name)
	return loc, err == nil
}

// securityHeaders keeps pages to their own origin: no inline script or
// style, no framing, no sniffing, nothing cached.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		if h.Get("Cache-Control") == "" {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// maxFormBytes bounds a dashboard request body: forms here are small.
const maxFormBytes = 64 << 10

// limitForm refuses a body over maxFormBytes with 413 before anything else
// runs: it reads the body up front, so the CSRF check (which reads the
// form) never sees a truncated one and answers 403 for what is too large.
func limitForm(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxFormBytes {
			formTooLarge(w)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFormBytes))
			var maxErr *http.MaxBytesError
			if errors.As(err, &maxErr) {
				formTooLarge(w)
				return
			}
			if err != nil {
				http.Error(w, "the request body could not be read", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

func formTooLarge(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	http.Error(w, "the form is larger than 64 KiB", http.StatusRequestEntityTooLarge)
}
