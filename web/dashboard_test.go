package web_test

import (
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"golang.org/x/crypto/bcrypt"

	"voucherd/internal/accounts"
	"voucherd/internal/postgres"
	"voucherd/internal/testdb"
	"voucherd/internal/testenv"
	"voucherd/internal/voucher"
	"voucherd/migrations"
	"voucherd/web"
)

// The handler tests run the dashboard over the real store on the test
// database (no mocks of storage); the service has no gate, so flash
// vouchers take the database path.
var (
	databaseURL = testenv.DatabaseURL()
	pool        *pgxpool.Pool
)

func TestMain(m *testing.M) {
	// Every fixture signs its users in; under the race detector a bcrypt
	// hash at the product's cost takes about a second, which made this
	// package minutes long. What these tests check (limits, locks, roles)
	// counts password checks, not their cost; the product never lowers it
	// (internal/accounts' TestHashCost_IsBcryptsDefaultInTheProduct).
	accounts.HashCost = bcrypt.MinCost
	ctx := context.Background()
	var err error
	pool, err = pgxpool.New(ctx, databaseURL)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "web tests need PostgreSQL at TEST_DATABASE_URL (%s): %v; `make test` sets it up\n", databaseURL, err)
		os.Exit(1)
	}
	if _, err := migrations.Up(ctx, stdlib.OpenDBFromPool(pool)); err != nil {
		fmt.Fprintf(os.Stderr, "migrations: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	pool.Close()
	os.Exit(code)
}

const password = "a long enough password"

// fixture is a dashboard over the real store with a user of each role.
type fixture struct {
	h        http.Handler
	accounts *accounts.Accounts
	svc      *voucher.Service
	keys     *voucher.ApiKeys
	users    map[voucher.Role]string // role -> email
}

func newFixture(t *testing.T, cfg web.Config) fixture {
	t.Helper()
	return newFixtureOn(t, cfg, pool)
}

// newOwnFixture is newFixture over a migrated database of the test's own
// (dropped at its end), for a test whose list of users must not be crowded
// out by every other test's users; it returns that database too.
func newOwnFixture(t *testing.T, cfg web.Config) (fixture, *pgxpool.Pool) {
	t.Helper()
	own := testdb.Migrated(t, databaseURL)
	return newFixtureOn(t, cfg, own), own
}

// newFixtureOn is newFixture over the database pool.
func newFixtureOn(t *testing.T, cfg web.Config, pool *pgxpool.Pool) fixture {
	t.Helper()
	store := postgres.New(pool)
	svc := voucher.NewService(voucher.Deps{Store: store}, voucher.Config{DefaultCurrency: cfg.DefaultCurrency}) // one DEFAULT_CURRENCY, as in voucherd
	accts := accounts.New(store, accounts.AccountsConfig{MaxFailures: 3, MaxAddressFailures: 6})
	bo := voucher.NewBackoffice(svc, store)
	keys := voucher.NewApiKeys(store, nil)
	f := fixture{
		h: web.New(web.Deps{
			Accounts: accts, Vouchers: bo, Reservations: svc, Drift: bo, Campaigns: bo, ApiKeys: keys, Sales: svc,
		}, cfg),
		accounts: accts, svc: svc, keys: keys, users: map[voucher.Role]string{},
	}
	for _, role := range accounts.DashboardRoles {
		email := fmt.Sprintf("%s-%s@example.com", role, unique())
		if _, err := accts.AddUser(context.Background(), accounts.NewUser{Email: email, Role: role, Password: password}); err != nil {
			t.Fatalf("adding a %s: %v", role, err)
		}
		f.users[role] = email
	}
	return f
}

func unique() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// uniqueAddress is a client address of its own, so sign-in limits of one
// test (or an earlier run) never touch another.
func uniqueAddress() string { return "198.51.100." + unique() + ":4711" }

// session signs a role in and returns its cookie and CSRF token.
type session struct {
	cookie *http.Cookie
	csrf   string
}

func (f fixture) signIn(t *testing.T, role voucher.Role) session {
	t.Helper()
	token, s, _, err := f.accounts.SignIn(context.Background(), unique(), f.users[role], password)
	if err != nil {
		t.Fatalf("signing in a %s: %v", role, err)
	}
	return session{cookie: &http.Cookie{Name: "voucherd_session", Value: token}, csrf: s.CSRFToken}
}

// do sends a request to the dashboard; form values make it a form POST.
func (f fixture) do(t *testing.T, method, target string, s *session, form url.Values, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	var req *http.Request
	if form != nil {
		req = httptest.NewRequest(method, target, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, target, nil)
	}
	req.RemoteAddr = uniqueAddress()
	if s != nil {
		req.AddCookie(s.cookie)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	return rec
}

func doc(t *testing.T, rec *httptest.ResponseRecorder) *goquery.Document {
	t.Helper()
	d, err := goquery.NewDocumentFromReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestAuth_NoSessionGetsTheSignInPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	for _, target := range []string{"/admin", "/admin/vouchers", "/admin/drift", "/admin/vouchers/new"} {
		rec := f.do(t, http.MethodGet, target, nil, nil, nil)
		if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/admin/sign-in?next=") {
			t.Errorf("GET %s signed out: %d to %q, want 303 to the sign-in page", target, rec.Code, rec.Header().Get("Location"))
		}
	}
	bad := &session{cookie: &http.Cookie{Name: "voucherd_session", Value: "forged"}}
	if rec := f.do(t, http.MethodGet, "/admin/vouchers", bad, nil, nil); rec.Code != http.StatusSeeOther {
		t.Errorf("an unknown session cookie got %d, want the sign-in page", rec.Code)
	}
	poll := f.do(t, http.MethodGet, "/admin/vouchers/rows", nil, nil, map[string]string{"HX-Request": "true"})
	if poll.Code != http.StatusUnauthorized || poll.Header().Get("HX-Redirect") == "" {
		t.Errorf("an htmx poll signed out got %d (HX-Redirect %q), want 401 telling htmx to go to sign-in", poll.Code, poll.Header().Get("HX-Redirect"))
	}
	page := f.do(t, http.MethodGet, "/admin/sign-in", nil, nil, nil)
	if page.Code != http.StatusOK || doc(t, page).Find(`[data-testid=sign-in-form] input[name=csrf]`).Length() != 1 {
		t.Errorf("the sign-in page: %d, want 200 with a form carrying a CSRF token", page.Code)
	}
}

// signInThroughTheForm does what a browser does: fetch the form (its token
// and cookie), post it back with the credentials.
func signInThroughTheForm(t *testing.T, f fixture, email, pass, address string) *httptest.ResponseRecorder {
	t.Helper()
	page := f.do(t, http.MethodGet, "/admin/sign-in?next=/admin/drift", nil, nil, nil)
	token, _ := doc(t, page).Find(`input[name=csrf]`).Attr("value")
	var cookie *http.Cookie
	for _, c := range page.Result().Cookies() {
		if c.Name == "voucherd_signin" {
			cookie = c
		}
	}
	if cookie == nil || token == "" {
		t.Fatal("the sign-in page set no CSRF cookie or token")
	}
	form := url.Values{"email": {email}, "password": {pass}, "csrf": {token}, "next": {"/admin/drift"}}
	req := httptest.NewRequest(http.MethodPost, "/admin/sign-in", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.RemoteAddr = address
	req.AddCookie(cookie)
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	return rec
}

func TestSignIn_SetsAnHttpOnlySameSiteSessionCookie(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc   string
		secure bool
	}{{"development", false}, {"production", true}} {
		f := newFixture(t, web.Config{SecureCookies: tc.secure})
		rec := signInThroughTheForm(t, f, f.users[voucher.RoleOperator], password, uniqueAddress())
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/admin/drift" {
			t.Fatalf("%s: sign-in answered %d to %q, want 303 to the page asked for", tc.desc, rec.Code, rec.Header().Get("Location"))
		}
		var c *http.Cookie
		for _, ck := range rec.Result().Cookies() {
			if ck.Name == "voucherd_session" {
				c = ck
			}
		}
		if c == nil || c.Value == "" {
			t.Fatalf("%s: no session cookie", tc.desc)
		}
		// Path "/": the campaign codes export (GET /campaigns/{id}/codes.csv)
		// takes the session too; the other routes outside /admin ignore it.
		if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Secure != tc.secure || c.Path != "/" {
			t.Errorf("%s: cookie HttpOnly=%v SameSite=%v Secure=%v Path=%q; want HttpOnly, Lax, Secure=%v, /",
				tc.desc, c.HttpOnly, c.SameSite, c.Secure, c.Path, tc.secure)
		}
		s := &session{cookie: &http.Cookie{Name: c.Name, Value: c.Value}}
		if rec := f.do(t, http.MethodGet, "/admin/drift", s, nil, nil); rec.Code != http.StatusOK {
			t.Errorf("%s: the new session opens the drift page with %d", tc.desc, rec.Code)
		}
	}
}

func TestSignIn_WithoutItsCSRFTokenIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	form := url.Values{"email": {f.users[voucher.RoleAdmin]}, "password": {password}}
	rec := f.do(t, http.MethodPost, "/admin/sign-in", nil, form, nil)
	if rec.Code != http.StatusForbidden {
		t.Errorf("sign-in without a CSRF token: %d, want 403", rec.Code)
	}
	for _, c := range rec.Result().Cookies() {
		if c.Name == "voucherd_session" && c.Value != "" {
			t.Error("a session was opened without the form's token")
		}
	}
}

func TestSignIn_FailuresLockTheEmailNotOthersBehindTheAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	email, address := f.users[voucher.RoleMarketer], uniqueAddress()
	for i := range 3 {
		if rec := signInThroughTheForm(t, f, email, "wrong password", address); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong password #%d: %d, want 401", i+1, rec.Code)
		}
	}
	rec := signInThroughTheForm(t, f, email, password, address)
	if rec.Code != http.StatusTooManyRequests {
		t.Errorf("the right password after 3 failures of the email: %d, want 429", rec.Code)
	}
	if msg := doc(t, rec).Find(`[data-testid=sign-in-error]`).Text(); !strings.Contains(msg, "Too many failed sign-ins for this email") || !strings.Contains(msg, "Try again in 15 minutes") {
		t.Errorf("the refusal says %q, want why and how long the wait is (the oldest failure leaves the 15-minute window)", msg)
	}
	// The wait is until the oldest failure leaves the window: just under it.
	if secs, err := strconv.Atoi(rec.Header().Get("Retry-After")); err != nil || secs <= 14*60 || secs > 15*60 {
		t.Errorf("Retry-After = %q, want the seconds until the oldest failure leaves the window (under 900)", rec.Header().Get("Retry-After"))
	}
	if rec := signInThroughTheForm(t, f, strings.ToUpper(email), password, uniqueAddress()); rec.Code != http.StatusTooManyRequests {
		t.Errorf("the locked email (in capitals) from another address: %d, want 429 (the lock is the email's)", rec.Code)
	}
	if rec := signInThroughTheForm(t, f, f.users[voucher.RoleOperator], password, address); rec.Code != http.StatusSeeOther {
		t.Errorf("another user behind the same address: %d, want 303 (only the email is locked)", rec.Code)
	}
	if n, err := f.accounts.LiftLocks(context.Background(), email, ""); err != nil || n != 3 {
		t.Errorf("LiftLocks(email) = %d, %v; want its 3 failures lifted", n, err)
	}
	if rec := signInThroughTheForm(t, f, email, password, address); rec.Code != http.StatusSeeOther {
		t.Errorf("the right password once the lock is lifted: %d, want 303", rec.Code)
	}
}

func TestSignIn_FailuresAreLimitedPerAddressAcrossEmails(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	address := uniqueAddress()
	for i := range 6 {
		if rec := signInThroughTheForm(t, f, fmt.Sprintf("guess-%d-%s@example.com", i, unique()), "wrong password", address); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong password #%d: %d, want 401", i+1, rec.Code)
		}
	}
	rec := signInThroughTheForm(t, f, f.users[voucher.RoleAdmin], password, address)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a right password from an address at its limit: %d (Retry-After %q), want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	if !strings.Contains(doc(t, rec).Find(`[data-testid=sign-in-error]`).Text(), "from your address") {
		t.Error("the refusal does not say why")
	}
	if rec := signInThroughTheForm(t, f, f.users[voucher.RoleAdmin], password, uniqueAddress()); rec.Code != http.StatusSeeOther {
		t.Errorf("the same user from another address: %d, want 303", rec.Code)
	}
	host, _, _ := strings.Cut(address, ":")
	if n, err := f.accounts.LiftLocks(context.Background(), "", host); err != nil || n != 6 {
		t.Errorf("LiftLocks(address) = %d, %v; want its 6 failures lifted", n, err)
	}
	if rec := signInThroughTheForm(t, f, f.users[voucher.RoleAdmin], password, address); rec.Code != http.StatusSeeOther {
		t.Errorf("the right password once the address is unlocked: %d, want 303", rec.Code)
	}
}

func TestAuth_MarketerCannotReachOperatorActions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	for _, tc := range []struct{ method, target string }{
		{http.MethodGet, "/admin/drift"},
		{http.MethodGet, "/admin/drift/reconcile"},
		{http.MethodPost, "/admin/drift/reconcile"},
		{http.MethodGet, "/admin/drift/ANY/rebuild"},
		{http.MethodPost, "/admin/drift/ANY/rebuild"},
	} {
		var form url.Values
		if tc.method == http.MethodPost {
			form = url.Values{"csrf": {m.csrf}, "confirm": {"yes"}}
		}
		if rec := f.do(t, tc.method, tc.target, &m, form, nil); rec.Code != http.StatusForbidden {
			t.Errorf("marketer %s %s: %d, want 403", tc.method, tc.target, rec.Code)
		}
	}
	if d := doc(t, f.do(t, http.MethodGet, "/admin/vouchers", &m, nil, nil)); d.Find(`[data-testid=nav-drift]`).Length() != 0 {
		t.Error("a marketer is shown the drift link")
	}
	op := f.signIn(t, voucher.RoleOperator)
	if rec := f.do(t, http.MethodGet, "/admin/drift", &op, nil, nil); rec.Code != http.StatusOK {
		t.Errorf("operator GET /admin/drift: %d, want 200", rec.Code)
	}
	form := url.Values{"csrf": {op.csrf}, "code": {"OP-" + unique()}}
	if rec := f.do(t, http.MethodPost, "/admin/vouchers", &op, form, nil); rec.Code != http.StatusForbidden {
		t.Errorf("operator creating a voucher: %d, want 403", rec.Code)
	}
}

// voucherForm is a valid create form for a voucher starting in start.
func voucherForm(code, csrf string, start time.Duration) url.Values {
	now := time.Now().UTC()
	return url.Values{
		"csrf": {csrf}, "code": {code}, "discountAmount": {"10"}, "minOrderAmount": {"0"},
		"totalLimit": {"10"}, "perUserLimit": {"1"}, "tz": {"UTC"},
		"startsAt": {now.Add(start).Format("2006-01-02T15:04")}, "endsAt": {now.Add(start + 2*time.Hour).Format("2006-01-02T15:04")},
	}
}

func TestCSRF_FormWithoutItsTokenIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	code := "CSRF-" + unique()
	admin := voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleAdmin, Name: "test"})
	for _, tc := range []struct {
		desc string
		csrf string
	}{{"no token", ""}, {"another token", "not-the-session-token"}} {
		rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, voucherForm(code, tc.csrf, 24*time.Hour), nil)
		if rec.Code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tc.desc, rec.Code)
		}
		if _, err := f.svc.Voucher(admin, code); voucher.ErrorCodeOf(err) != voucher.NotFound {
			t.Fatalf("%s: the voucher was created anyway (%v)", tc.desc, err)
		}
	}
	if rec := f.do(t, http.MethodPost, "/admin/sign-out", &m, url.Values{}, nil); rec.Code != http.StatusForbidden {
		t.Errorf("sign-out without a token: %d, want 403", rec.Code)
	}
	cross := f.do(t, http.MethodPost, "/admin/vouchers", &m, voucherForm(code, m.csrf, 24*time.Hour), map[string]string{"Sec-Fetch-Site": "cross-site"})
	if cross.Code != http.StatusForbidden {
		t.Errorf("a cross-site POST with the token: %d, want 403", cross.Code)
	}
	ok := f.do(t, http.MethodPost, "/admin/vouchers", &m, voucherForm(code, m.csrf, 24*time.Hour), nil)
	if ok.Code != http.StatusSeeOther {
		t.Fatalf("with its token: %d, want 303: %s", ok.Code, ok.Body)
	}
	htmx := f.do(t, http.MethodPost, "/admin/sign-out", &m, url.Values{}, map[string]string{"X-CSRF-Token": m.csrf})
	if htmx.Code != http.StatusSeeOther {
		t.Errorf("the token in htmx's header: %d, want 303", htmx.Code)
	}
	if rec := f.do(t, http.MethodGet, "/admin/vouchers", &m, nil, nil); rec.Code != http.StatusSeeOther {
		t.Errorf("after sign-out the session still opens pages (%d)", rec.Code)
	}
}

func TestCreateVoucher_ShowsTheContractsValidationNextToEachField(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	form := url.Values{"csrf": {m.csrf}, "code": {"no spaces allowed"}, "discountAmount": {"0"}, "totalLimit": {"x"}, "tz": {"UTC"},
		"startsAt": {"2026-12-01T10:00"}, "endsAt": {"2026-12-01T09:00"}}
	rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, form, nil)
	if rec.Code != http.StatusUnprocessableEntity {
		t.Fatalf("invalid form: %d, want 422", rec.Code)
	}
	d := doc(t, rec)
	for _, apiName := range []string{"discountAmount", "totalLimit", "startsAt", "endsAt"} {
		if html := d.Find(`.voucher-form .error`).Text(); strings.Contains(html, apiName) {
			t.Errorf("a field's message names the API field %s instead of its label: %q", apiName, html)
		}
	}
	for field, want := range map[string]string{
		"code":           "1-32 characters",
		"discountAmount": "Discount must be greater than 0",
		"totalLimit":     "at least 1",
		"endsAt":         "End must be after start",
	} {
		if got := d.Find(`[data-testid=error-` + field + `]`).Text(); !strings.Contains(got, want) {
			t.Errorf("message next to %s = %q, want it to say %q", field, got, want)
		}
	}
	code := "DUP-" + unique()
	if rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, voucherForm(code, m.csrf, time.Hour), nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("creating %s: %d", code, rec.Code)
	}
	dup := f.do(t, http.MethodPost, "/admin/vouchers", &m, voucherForm(code, m.csrf, time.Hour), nil)
	if got := doc(t, dup).Find(`[data-testid=error-code]`).Text(); dup.Code != http.StatusUnprocessableEntity || !strings.Contains(got, "exists") {
		t.Errorf("a taken code: %d %q, want 422 with the message next to the code", dup.Code, got)
	}
}

func TestChangeVoucher_BeforeItStartsIsAuditedAfterwardsOnlyEnding(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	code := "EDIT-" + unique()
	if rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, voucherForm(code, m.csrf, 24*time.Hour), nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("creating: %d", rec.Code)
	}
	edit := voucherForm(code, m.csrf, 48*time.Hour)
	edit.Set("totalLimit", "25")
	rec := f.do(t, http.MethodPost, "/admin/vouchers/"+code, &m, edit, nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("changing a scheduled voucher: %d: %s", rec.Code, rec.Body)
	}
	page := doc(t, f.do(t, http.MethodGet, "/admin/vouchers/"+code, &m, nil, nil))
	audit := page.Find(`[data-testid=audit]`).Text()
	for _, want := range []string{f.users[voucher.RoleMarketer], "updated", "totalLimit 10 → 25", "created"} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit log %q lacks %q", audit, want)
		}
	}

	live := "LIVE-" + unique()
	if rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, voucherForm(live, m.csrf, -time.Hour), nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("creating a live voucher: %d", rec.Code)
	}
	if rec := f.do(t, http.MethodGet, "/admin/vouchers/"+live+"/edit", &m, nil, nil); rec.Code != http.StatusConflict {
		t.Errorf("editing a live voucher: %d, want 409", rec.Code)
	}
	late := voucherForm(live, m.csrf, -time.Hour)
	late.Set("totalLimit", "99")
	refused := f.do(t, http.MethodPost, "/admin/vouchers/"+live, &m, late, nil)
	if got := doc(t, refused).Find(`[data-testid=form-error]`).Text(); !strings.Contains(got, "has started") {
		t.Errorf("changing a live voucher: %d %q, want the form to say it has started", refused.Code, got)
	}
	confirm := doc(t, f.do(t, http.MethodGet, "/admin/vouchers/"+live+"/end", &m, nil, nil))
	if confirm.Find(`[data-testid=confirm]`).Length() != 1 {
		t.Fatal("ending has no confirmation step")
	}
	if rec := f.do(t, http.MethodPost, "/admin/vouchers/"+live+"/end", &m, url.Values{"csrf": {m.csrf}}, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("ending a live voucher: %d", rec.Code)
	}
	ended := doc(t, f.do(t, http.MethodGet, "/admin/vouchers/"+live, &m, nil, nil))
	if got := ended.Find(`[data-testid=figures] [data-testid=state]`).Text(); got != "ended" {
		t.Errorf("state after ending = %q", got)
	}
	if a := ended.Find(`[data-testid=audit]`).Text(); !strings.Contains(a, "ended") || !strings.Contains(a, f.users[voucher.RoleMarketer]) {
		t.Errorf("audit log after ending = %q", a)
	}
}

func TestVoucherList_SearchesByCodeAndFiltersByState(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	tag := strings.ToUpper(unique())
	for _, v := range []struct {
		code  string
		start time.Duration
	}{{"SOON_" + tag, 24 * time.Hour}, {"NOW_" + tag, -time.Hour}} {
		if rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, voucherForm(v.code, m.csrf, v.start), nil); rec.Code != http.StatusSeeOther {
			t.Fatalf("creating %s: %d", v.code, rec.Code)
		}
	}
	codes := func(target string) []string {
		var out []string
		body := f.do(t, http.MethodGet, target, &m, nil, nil).Body.String()
		d, err := goquery.NewDocumentFromReader(strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(target, "/rows") {
			// The polled fragment: each row's figures, swapped out of band
			// (or, asked without the rows shown, the rows themselves).
			d.Find(`[id^="state-"]`).Each(func(_ int, s *goquery.Selection) {
				id, _ := s.Attr("id")
				out = append(out, strings.TrimPrefix(id, "state-"))
			})
			return out
		}
		d.Find(`[data-testid=voucher-row]`).Each(func(_ int, s *goquery.Selection) {
			c, _ := s.Attr("data-code")
			out = append(out, c)
		})
		return out
	}
	if got := codes("/admin/vouchers?q=" + strings.ToLower(tag)); len(got) != 2 {
		t.Errorf("search by a piece of the code, any case: %v, want both", got)
	}
	if got := codes("/admin/vouchers?q=" + tag + "&state=scheduled"); len(got) != 1 || got[0] != "SOON_"+tag {
		t.Errorf("scheduled only: %v", got)
	}
	if got := codes("/admin/vouchers/rows?q=" + tag + "&state=live"); len(got) != 1 || got[0] != "NOW_"+tag {
		t.Errorf("the polled fragment, live only: %v", got)
	}
	if got := codes("/admin/vouchers?q=_" + tag[:3]); len(got) != 2 {
		t.Errorf("an underscore in the search is a character, not a wildcard: %v", got)
	}
	if got := codes("/admin/vouchers?q=%25" + tag); len(got) != 0 {
		t.Errorf("a %% in the search is a character, not a wildcard: %v", got)
	}
}

// The list pages through every match with a total, live vouchers first by
// default, and sorts by start, state and usage.
func TestVoucherList_PagesWithATotalLiveFirstAndSorts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	ctx := voucher.WithCaller(context.Background(), voucher.Caller{Name: "test", Role: voucher.RoleAdmin})
	tag := strings.ToUpper(unique())
	now := time.Now().UTC()
	// 203 scheduled vouchers, created before the one live voucher: newest
	// first would put the live one first anyway, so it is created first.
	live := "LIVE_" + tag
	create := func(code string, start time.Duration, total int) {
		t.Helper()
		if _, err := f.svc.CreateVoucher(ctx, voucher.NewVoucher{Code: code, DiscountAmount: 100, TotalLimit: total, PerUserLimit: 1,
			StartsAt: now.Add(start), EndsAt: now.Add(start + 48*time.Hour)}); err != nil {
			t.Fatalf("creating %s: %v", code, err)
		}
	}
	create(live, -time.Hour, 10)
	for i := range 203 {
		create(fmt.Sprintf("S%03d_%s", i, tag), time.Duration(i+1)*time.Hour, 10)
	}
	page := func(target string) (codes []string, total string, next bool) {
		t.Helper()
		rec := f.do(t, http.MethodGet, target, &m, nil, nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", target, rec.Code)
		}
		d := doc(t, rec)
		d.Find(`[data-testid=voucher-row]`).Each(func(_ int, s *goquery.Selection) {
			c, _ := s.Attr("data-code")
			codes = append(codes, c)
		})
		return codes, d.Find(`[data-testid=list-total]`).Text(), d.Find(`[data-testid=page-next]`).Length() == 1
	}
	q := "/admin/vouchers?q=" + strings.ToLower(tag)
	first, total, next := page(q)
	if len(first) != 100 || first[0] != live || !next {
		t.Errorf("page 1: %d rows, first %q, next link %t; want 100, the live voucher first, a next page", len(first), first[0], next)
	}
	if total != "1–100 of 204 vouchers, live first." {
		t.Errorf("total = %q", total)
	}
	seen := map[string]bool{}
	for p := 1; p <= 3; p++ {
		codes, _, _ := page(fmt.Sprintf("%s&page=%d", q, p))
		for _, c := range codes {
			if seen[c] {
				t.Errorf("%s on two pages", c)
			}
			seen[c] = true
		}
	}
	if len(seen) != 204 {
		t.Errorf("3 pages show %d vouchers, want all 204", len(seen))
	}
	last, total, next := page(q + "&page=3")
	if len(last) != 4 || next || total != "201–204 of 204 vouchers, live first." {
		t.Errorf("page 3: %d rows, next %t, total %q", len(last), next, total)
	}
	if byStart, _, _ := page(q + "&sort=start&desc=1"); byStart[0] != "S202_"+tag {
		t.Errorf("latest start first begins with %s", byStart[0])
	}
	if byStart, _, _ := page(q + "&sort=start"); byStart[0] != live || byStart[1] != "S000_"+tag {
		t.Errorf("earliest start first begins with %v", byStart[:2])
	}
	if byState, _, _ := page(q + "&sort=state&desc=1"); byState[0] != live {
		t.Errorf("state descending (ended, sold out, live, scheduled) begins with %s, want the live one", byState[0])
	}
	// Usage: the live voucher with a use is the most used.
	if _, err := f.svc.Reserve(ctx, voucher.ReserveRequest{Code: live, CustomerID: 1, OrderID: "o-" + tag, OrderAmount: 1000}); err != nil {
		t.Fatalf("reserving: %v", err)
	}
	if byUsage, _, _ := page(q + "&sort=usage&desc=1"); byUsage[0] != live {
		t.Errorf("most used first begins with %s", byUsage[0])
	}
	if byUsage, _, _ := page(q + "&sort=usage"); byUsage[0] == live {
		t.Error("least used first begins with the only voucher in use")
	}
	// A page or a sort typed by hand never errors.
	if codes, _, _ := page(q + "&page=-3&sort=drop+table"); len(codes) != 100 || codes[0] != live {
		t.Errorf("a bad page and sort: %d rows, want the first page in the default order", len(codes))
	}
}

// Reconcile now and Rebuild gate are audited with who ran them, and a
// voucher created with the admin token is audited as the token's.
func TestRepairs_AreAuditedWithWhoRanThem(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	op := f.signIn(t, voucher.RoleOperator)
	code := "AUD_" + strings.ToUpper(unique())
	admin := voucher.WithCaller(context.Background(), voucher.Caller{Name: "token", Role: voucher.RoleAdmin})
	if _, err := f.svc.CreateVoucher(admin, voucher.NewVoucher{Code: code, DiscountAmount: 100, TotalLimit: 5, PerUserLimit: 1,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour), Flash: true}); err != nil {
		t.Fatal(err)
	}
	confirm := url.Values{"csrf": {op.csrf}, "confirm": {"yes"}}
	if rec := f.do(t, http.MethodPost, "/admin/drift/reconcile", &op, confirm, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("reconcile: %d", rec.Code)
	}
	// Without a gate, a rebuild is refused: nothing is recorded for it.
	f.do(t, http.MethodPost, "/admin/drift/"+code+"/rebuild", &op, confirm, nil)
	d := doc(t, f.do(t, http.MethodGet, "/admin/drift/live", &op, nil, nil))
	var rows []string
	d.Find(`[data-testid=operation]`).Each(func(_ int, s *goquery.Selection) { rows = append(rows, s.Text()) })
	found := false
	for _, r := range rows {
		if strings.Contains(r, f.users[voucher.RoleOperator]) && strings.Contains(r, "reconciled every flash voucher") {
			found = true
		}
	}
	if !found {
		t.Errorf("the drift page's repairs %q lack the operator's reconciliation", rows)
	}
}

// A voucher's reservations: paged, filtered by status and customer, and
// exported as CSV streamed in batches (more rows than one batch).
func TestReservations_PagedFilteredAndExportedAsCSV(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	ctx := voucher.WithCaller(context.Background(), voucher.Caller{Name: "test", Role: voucher.RoleAdmin})
	code := "RES_" + strings.ToUpper(unique())
	if _, err := f.svc.CreateVoucher(ctx, voucher.NewVoucher{Code: code, DiscountAmount: 100, TotalLimit: 2000, PerUserLimit: 1,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	const n = 1050 // past one export batch of 1000
	for i := range n {
		order := fmt.Sprintf("%s-%04d", code, i)
		if i == 7 {
			order = "=HYPERLINK(" + code + ")" // a storefront's orderId a spreadsheet would run
		}
		if _, err := f.svc.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: int64(1000 + i), OrderID: order, OrderAmount: 500}); err != nil {
			t.Fatalf("reserve %d: %v", i, err)
		}
		if i%10 == 0 {
			if _, err := f.svc.Confirm(ctx, code, order); err != nil {
				t.Fatalf("confirm %d: %v", i, err)
			}
		}
	}
	list := func(target string) (orders []string, next string, status int) {
		t.Helper()
		rec := f.do(t, http.MethodGet, target, &m, nil, nil)
		d := doc(t, rec)
		d.Find(`[data-testid=reservation] td:first-child`).Each(func(_ int, s *goquery.Selection) { orders = append(orders, s.Text()) })
		next, _ = d.Find(`[data-testid=reservations-next]`).Attr("href")
		return orders, next, rec.Code
	}
	base := "/admin/vouchers/" + code + "/reservations"
	seen := map[string]bool{}
	target, pages := base, 0
	for target != "" {
		orders, next, status := list(target)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d", target, status)
		}
		for _, o := range orders {
			if seen[o] {
				t.Fatalf("%s on two pages", o)
			}
			seen[o] = true
		}
		target, pages = next, pages+1
	}
	if len(seen) != n || pages != 11 {
		t.Errorf("paging showed %d reservations over %d pages, want %d over 11", len(seen), pages, n)
	}
	if confirmed, next, _ := list(base + "?status=confirmed"); len(confirmed) != 100 || next == "" {
		t.Errorf("confirmed only: %d on the first page (next %q), want 100 of 105 and a next page", len(confirmed), next)
	}
	if one, _, _ := list(base + "?customer=1003"); len(one) != 1 || one[0] != code+"-0003" {
		t.Errorf("customer 1003: %v", one)
	}
	if _, _, status := list(base + "?customer=abc"); status != http.StatusUnprocessableEntity {
		t.Errorf("a customer that is not a number: %d, want 422", status)
	}
	if _, _, status := list(base + "?status=LOST"); status != http.StatusUnprocessableEntity {
		t.Errorf("an unknown status: %d, want 422", status)
	}

	rec := f.do(t, http.MethodGet, base+".csv", &m, nil, nil)
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/csv") {
		t.Fatalf("export: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	records, err := csv.NewReader(rec.Body).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != n+1 || strings.Join(records[0], ",") != "orderId,customerId,status,orderAmount,discountAmount,createdAt,expiresAt,confirmedAt,releasedAt,position,rolledBackAt,rollbackReason" {
		t.Fatalf("export has %d lines (header %v), want a header and %d rows", len(records), records[0], n)
	}
	ids := map[string]bool{}
	positions := map[string]bool{}
	confirmedRows := 0
	for _, r := range records[1:] {
		ids[r[0]] = true
		positions[r[9]] = true
		if r[2] == "CONFIRMED" {
			confirmedRows++
			if r[7] == "" {
				t.Errorf("a confirmed row without confirmedAt: %v", r)
			}
		}
	}
	if len(ids) != n || confirmedRows != 105 {
		t.Errorf("export: %d distinct orders, %d confirmed; want %d and 105", len(ids), confirmedRows, n)
	}
	if len(positions) != n || !positions["1"] || !positions[strconv.Itoa(n)] {
		t.Errorf("export: %d distinct positions, want %d (1..%d)", len(positions), n, n)
	}
	if !ids["'=HYPERLINK("+code+")"] {
		t.Error("an orderId starting with = is not kept from being a formula")
	}
	rec = f.do(t, http.MethodGet, base+".csv?status=CONFIRMED&customer=1010", &m, nil, nil)
	if records, err := csv.NewReader(rec.Body).ReadAll(); err != nil || len(records) != 2 || records[1][1] != "1010" {
		t.Errorf("a filtered export: %v %v, want the header and customer 1010's row", records, err)
	}
	if rec := f.do(t, http.MethodGet, "/admin/vouchers/NOPE_"+unique()+"/reservations.csv", &m, nil, nil); rec.Code != http.StatusNotFound {
		t.Errorf("the export of an unknown voucher: %d, want 404", rec.Code)
	}
}

// An admin lifts an email's sign-in lock from the dashboard; other roles
// may not.
func TestSignInLocks_AnAdminLiftsALockFromTheDashboard(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	email, address := f.users[voucher.RoleMarketer], uniqueAddress()
	for range 3 {
		signInThroughTheForm(t, f, email, "wrong password", address)
	}
	if rec := signInThroughTheForm(t, f, email, password, address); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("the locked email: %d, want 429", rec.Code)
	}
	op := f.signIn(t, voucher.RoleOperator)
	if rec := f.do(t, http.MethodPost, "/admin/sign-in-locks", &op, url.Values{"csrf": {op.csrf}, "email": {email}}, nil); rec.Code != http.StatusForbidden {
		t.Errorf("an operator lifting a lock: %d, want 403", rec.Code)
	}
	admin := f.signIn(t, voucher.RoleAdmin)
	if rec := f.do(t, http.MethodPost, "/admin/sign-in-locks", &admin, url.Values{"csrf": {admin.csrf}, "address": {"not an address"}}, nil); rec.Code != http.StatusUnprocessableEntity {
		t.Errorf("a malformed address: %d, want 422", rec.Code)
	}
	rec := f.do(t, http.MethodPost, "/admin/sign-in-locks", &admin, url.Values{"csrf": {admin.csrf}, "email": {email}}, nil)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/admin/sign-in-locks?notice=unlocked" {
		t.Fatalf("an admin lifting the lock: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	if rec := signInThroughTheForm(t, f, email, password, address); rec.Code != http.StatusSeeOther {
		t.Errorf("the right password once an admin lifted the lock: %d, want 303", rec.Code)
	}
	if rec := f.do(t, http.MethodPost, "/admin/sign-in-locks", &admin, url.Values{"csrf": {admin.csrf}, "email": {email}}, nil); rec.Header().Get("Location") != "/admin/sign-in-locks?notice=not-locked" {
		t.Errorf("lifting what is not locked: %s, want it said", rec.Header().Get("Location"))
	}
}

func TestCreateVoucher_TakesPercentCapCurrencyAndBudgetAndShowsThemInTheCurrencysUnits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	code := "PCT-" + unique()
	form := voucherForm(code, m.csrf, time.Hour)
	form.Set("discountType", "PERCENT")
	form.Set("discountAmount", "")
	form.Set("discountPercent", "15")
	form.Set("maxDiscountAmount", "7")
	form.Set("currency", "EUR")
	form.Set("budgetAmount", "5 000")
	if rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, form, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("creating a PERCENT voucher: %d: %s", rec.Code, rec.Body)
	}
	page := doc(t, f.do(t, http.MethodGet, "/admin/vouchers/"+code, &m, nil, nil))
	if got := page.Find(`[data-testid=fig-discount]`).Text(); got != "15 % off, at most 7.00 EUR" {
		t.Errorf("discount shown as %q", got)
	}
	if got := page.Find(`[data-testid=fig-budget]`).Text(); got != "0.00 EUR of 5,000.00 EUR" {
		t.Errorf("budget shown as %q", got)
	}
	jpy := "JPY-" + unique()
	form = voucherForm(jpy, m.csrf, time.Hour)
	form.Set("currency", "JPY")
	form.Set("discountAmount", "500")
	if rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, form, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("creating a JPY voucher: %d: %s", rec.Code, rec.Body)
	}
	page = doc(t, f.do(t, http.MethodGet, "/admin/vouchers/"+jpy, &m, nil, nil))
	if got := page.Find(`[data-testid=fig-discount]`).Text(); got != "500 JPY off" {
		t.Errorf("a yen discount shown as %q, want 500 JPY off (no minor unit)", got)
	}
	bad := voucherForm("BAD-"+unique(), m.csrf, time.Hour)
	bad.Set("discountType", "PERCENT")
	bad.Set("discountAmount", "")
	bad.Set("discountPercent", "101")
	rec := f.do(t, http.MethodPost, "/admin/vouchers", &m, bad, nil)
	if got := doc(t, rec).Find(`[data-testid=error-discountPercent]`).Text(); rec.Code != http.StatusUnprocessableEntity || !strings.Contains(got, "1-100") {
		t.Errorf("a percent of 101: %d %q, want 422 with the message next to the percent", rec.Code, got)
	}
}

// A flash campaign's drift row names its gate ~C<id>: the rebuild's confirm
// page names the campaign instead of answering "no voucher with that code".
func TestRebuildConfirm_NamesACampaignsGate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	op := f.signIn(t, voucher.RoleOperator)
	rec := f.do(t, http.MethodGet, "/admin/drift/"+url.PathEscape(voucher.CampaignGateCode(42))+"/rebuild", &op, nil, nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("confirm page of a campaign's gate: HTTP %d", rec.Code)
	}
	d := doc(t, rec)
	if got := d.Find("h1, h2").Text(); !strings.Contains(got, "campaign 42") {
		t.Errorf("confirm page title %q, want it to name campaign 42", got)
	}
	if rec := f.do(t, http.MethodGet, "/admin/drift/"+url.PathEscape("no such code!")+"/rebuild", &op, nil, nil); rec.Code != http.StatusNotFound {
		t.Errorf("confirm page of a malformed code: HTTP %d, want 404", rec.Code)
	}
}

// The order lookup shows a reservation's position among its voucher's
// admitted reserves, of the voucher's total limit (issue 29), and the
// voucher's reservation rows show it too; a released reservation keeps it.
func TestReservationLookup_ShowsThePositionOfTheTotal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	ctx := voucher.WithCaller(context.Background(), voucher.Caller{Name: "test", Role: voucher.RoleAdmin})
	code := "POS_" + strings.ToUpper(unique())
	if _, err := f.svc.CreateVoucher(ctx, voucher.NewVoucher{Code: code, DiscountAmount: 100, TotalLimit: 1500, PerUserLimit: 1,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := f.svc.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: int64(1 + i), OrderID: fmt.Sprintf("%s-%d", code, i), OrderAmount: 500}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.svc.Release(ctx, code, code+"-2"); err != nil {
		t.Fatal(err)
	}
	rec := f.do(t, http.MethodGet, "/admin/reservations?orderId="+code+"-2", &m, nil, nil)
	if got := strings.TrimSpace(doc(t, rec).Find(`[data-testid=lookup-position]`).Text()); got != "#3 of 1,500" {
		t.Errorf("the lookup's position = %q, want #3 of 1,500", got)
	}
	rec = f.do(t, http.MethodGet, "/admin/vouchers/"+code, &m, nil, nil)
	var rows []string
	doc(t, rec).Find(`[data-testid=reservation-position]`).Each(func(_ int, s *goquery.Selection) { rows = append(rows, s.Text()) })
	if fmt.Sprint(rows) != "[#3 #2 #1]" {
		t.Errorf("the voucher page's reservation rows show positions %v, want [#3 #2 #1] (newest first)", rows)
	}
}

// A rolled-back reservation's lookup shows its state, when and why; the
// voucher's page counts it as rolled back and its audit log names the
// reason.
func TestReservationLookup_ShowsARollbackWithItsTimeAndReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	m := f.signIn(t, voucher.RoleMarketer)
	ctx := voucher.WithCaller(context.Background(), voucher.Caller{Name: "shop", Role: voucher.RoleStorefront})
	admin := voucher.WithCaller(context.Background(), voucher.Caller{Name: "test", Role: voucher.RoleAdmin})
	code := "RB_" + strings.ToUpper(unique())
	if _, err := f.svc.CreateVoucher(admin, voucher.NewVoucher{Code: code, DiscountAmount: 100, TotalLimit: 5, PerUserLimit: 1,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	order := code + "-1"
	if _, err := f.svc.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: 1, OrderID: order, OrderAmount: 500}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Confirm(ctx, code, order); err != nil {
		t.Fatal(err)
	}
	reason := "refunded <b>in full</b>"
	if _, err := f.svc.Rollback(ctx, code, order, &reason); err != nil {
		t.Fatal(err)
	}

	d := doc(t, f.do(t, http.MethodGet, "/admin/reservations?orderId="+order, &m, nil, nil))
	if got := strings.TrimSpace(d.Find(`[data-testid=lookup-status]`).Text()); got != "ROLLED_BACK" {
		t.Errorf("the lookup's status = %q, want ROLLED_BACK", got)
	}
	if d.Find(`[data-testid=lookup-status] .badge.status-ROLLED_BACK`).Length() != 1 {
		t.Error("the lookup's status has no ROLLED_BACK badge")
	}
	if got := strings.TrimSpace(d.Find(`[data-testid=lookup-rolled-back]`).Text()); got == "" {
		t.Error("the lookup shows no rolledBackAt")
	}
	if got := strings.TrimSpace(d.Find(`[data-testid=lookup-rollback-reason]`).Text()); got != reason {
		t.Errorf("the lookup's reason = %q, want %q (as text)", got, reason)
	}

	d = doc(t, f.do(t, http.MethodGet, "/admin/vouchers/"+code, &m, nil, nil))
	if got := strings.TrimSpace(d.Find(`[data-testid=fig-rolled-back]`).Text()); got != "1" {
		t.Errorf("the voucher page's rolled back figure = %q, want 1", got)
	}
	if got := strings.TrimSpace(d.Find(`[data-testid=fig-confirmed]`).Text()); got != "0" {
		t.Errorf("the voucher page's confirmed figure = %q, want 0", got)
	}
	var audited bool
	d.Find(`[data-testid=audit-event]`).Each(func(_ int, s *goquery.Selection) {
		audited = audited || strings.Contains(s.Text(), "rolled-back") && strings.Contains(s.Text(), reason) && strings.Contains(s.Text(), "storefront")
	})
	if !audited {
		t.Error("the voucher page's audit log does not show the rollback with its reason and who asked")
	}

	rec := f.do(t, http.MethodGet, "/admin/vouchers/"+code+"/reservations?status=ROLLED_BACK", &m, nil, nil)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), order) {
		t.Errorf("the reservations filtered by ROLLED_BACK: HTTP %d, listing the order: %t", rec.Code, strings.Contains(rec.Body.String(), order))
	}
}
