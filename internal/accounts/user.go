package accounts

import (
	"context"
	"crypto/sha256"
	"net/mail"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"voucherd/internal/voucher"
)

// HashCost is the bcrypt cost of every password hash this process makes:
// bcrypt's default (10) in the product, which never changes it. A test
// suite that starts many servers in its own process under the race
// detector lowers it to bcrypt.MinCost before its tests run (a hash at the
// default takes about a second there, and every server start makes one);
// what is checked, a hash's comparison, is the same at any cost.
var HashCost = bcrypt.DefaultCost

// Error codes of dashboard accounts. They never reach GraphQL or REST.
const (
	// UserExists: another user has the email.
	UserExists voucher.ErrorCode = "USER_EXISTS"
	// BadCredentials: unknown email or wrong password (the two look alike).
	BadCredentials voucher.ErrorCode = "BAD_CREDENTIALS"
	// TooManyAttempts: the email, or the client's address, failed to sign
	// in too often lately (Field says which: "email" or "address").
	TooManyAttempts voucher.ErrorCode = "TOO_MANY_ATTEMPTS"
	// SignedOut: no session, or an expired or unknown one.
	SignedOut voucher.ErrorCode = "SIGNED_OUT"
)

// DashboardRoles are the roles a dashboard user may have.
var DashboardRoles = []voucher.Role{voucher.RoleMarketer, voucher.RoleOperator, voucher.RoleAdmin}

// User is a person who signs in to the dashboard.
type User struct {
	ID           int64
	Email        string
	Name         string
	Role         voucher.Role
	PasswordHash []byte
	CreatedAt    time.Time
	// DisabledAt is when an admin disabled the user; nil while enabled.
	DisabledAt *time.Time
}

// Disabled reports whether an admin disabled the user.
func (u User) Disabled() bool { return u.DisabledAt != nil }

// Caller is the user as the service sees them in a request.
func (u User) Caller() voucher.Caller { return voucher.Caller{Role: u.Role, Name: u.Email} }

// NewUser is what `voucherd user add` gives.
type NewUser struct {
	Email    string
	Name     string
	Role     voucher.Role
	Password string
}

// MinPasswordLength is the shortest password a user may be given.
const MinPasswordLength = 10

// normalize trims the email and name and lowers the email: one person, one
// spelling.
func (n NewUser) normalize() NewUser {
	n.Email = strings.ToLower(strings.TrimSpace(n.Email))
	n.Name = strings.TrimSpace(n.Name)
	return n
}

// maxEmailLength is the longest email a user can have (the database's
// CHECK on dashboard_user.email).
const maxEmailLength = 254

// Validate returns INVALID_INPUT naming the first field at fault.
func (n NewUser) Validate() error {
	n = n.normalize()
	for _, f := range [...]struct{ field, text string }{{"email", n.Email}, {"name", n.Name}, {"password", n.Password}} {
		if err := voucher.ValidateText(f.field, f.text); err != nil {
			return err
		}
	}
	if a, err := mail.ParseAddress(n.Email); err != nil || a.Address != n.Email || len(n.Email) > maxEmailLength {
		return voucher.Invalid("email", "email must be an address such as name@example.com")
	}
	if utf8.RuneCountInString(n.Name) > 100 {
		return voucher.Invalid("name", "name must be at most 100 characters")
	}
	switch n.Role {
	case voucher.RoleMarketer, voucher.RoleOperator, voucher.RoleAdmin:
	default:
		return voucher.Invalid("role", "role must be marketer, operator or admin")
	}
	if utf8.RuneCountInString(n.Password) < MinPasswordLength {
		return voucher.Invalid("password", "password must be at least 10 characters")
	}
	if len(n.Password) > 72 {
		// bcrypt reads 72 bytes; a longer password would be cut silently.
		return voucher.Invalid("password", "password must be at most 72 bytes")
	}
	return nil
}

// Session is a signed-in browser. Only the token's SHA-256 is stored; the
// token itself lives in the cookie.
type Session struct {
	TokenHash []byte
	UserID    int64
	CSRFToken string
	ExpiresAt time.Time
}

// UserStore keeps dashboard users, sessions and failed sign-ins.
type UserStore interface {
	// CreateUser adds a user and records it: USER_EXISTS.
	CreateUser(ctx context.Context, u User, audit UserAuditEvent) (User, error)
	// UserByEmail: NOT_FOUND.
	UserByEmail(ctx context.Context, email string) (User, error)
	// CreateSession stores a session and forgets expired ones.
	CreateSession(ctx context.Context, s Session) error
	// SessionByTokenHash returns a live session and its user: NOT_FOUND.
	SessionByTokenHash(ctx context.Context, hash []byte) (Session, User, error)
	DeleteSession(ctx context.Context, hash []byte) error
	// TakeSignInAttempt reserves one password check for the email and the
	// address, atomically with every other attempt, before the password is
	// looked at: TOO_MANY_ATTEMPTS (Field "email" or "address") when either
	// already has its limit of failed or unfinished attempts within the
	// window. It returns the attempt's id for FinishSignInAttempt.
	TakeSignInAttempt(ctx context.Context, l SignInLimit) (int64, error)
	// FinishSignInAttempt records the outcome: a failure keeps counting, a
	// success is forgotten.
	FinishSignInAttempt(ctx context.Context, id int64, failed bool) error
	// LiftSignInLocks lifts the counted attempts of an email or an address
	// (either may be empty) and says how many were lifted.
	LiftSignInLocks(ctx context.Context, email, address string) (int, error)
	// SignInLockWait is how long until the oldest counted attempt of an
	// email or an address (either may be empty) leaves the window.
	SignInLockWait(ctx context.Context, email, address string, window time.Duration) (time.Duration, error)
	// SignInLocks lists up to max of the emails and addresses locked now
	// under the limits (Email and Address of l unused), newest first.
	SignInLocks(ctx context.Context, l SignInLimit, max int) ([]SignInLock, error)
}

// SignInLock is an email or a client address that may not sign in now: it
// has its limit of failed (or unfinished) sign-ins within the window.
type SignInLock struct {
	// Field is "email" or "address"; Key the email or the address.
	Field, Key string
	// Attempts is how many count against it; Latest the last of them.
	Attempts int
	Latest   time.Time
	// Until is when it may sign in again unless an admin lifts it first.
	Until time.Time
}

// MaxSignInLocks is how many locks the admin's list shows.
const MaxSignInLocks = 200

// SignInLimit is one sign-in attempt with the limits it must fit.
type SignInLimit struct {
	Email, Address             string
	MaxPerEmail, MaxPerAddress int
	Window                     time.Duration
}

// AccountsConfig tunes sign-in.
type AccountsConfig struct {
	// MaxFailures is how many failed sign-ins an email may have within
	// FailureWindow before it is refused, even with the right password;
	// default 5.
	MaxFailures int
	// MaxAddressFailures is the same for a client address, over all the
	// emails it tries; default 20.
	MaxAddressFailures int
	// FailureWindow is how far back failures count; default 15m.
	FailureWindow time.Duration
	// SessionTTL is how long a session lasts; default 12h.
	SessionTTL time.Duration
	// LinkTTL is how long a one-time password link can be used; default 24h.
	LinkTTL time.Duration
	// Barred are emails that may neither sign in nor use a session they
	// opened before, whatever their row in the store says: the development
	// account on a production server (an earlier development run against
	// the same database may have left it there, enabled).
	Barred []string
}

// Accounts signs dashboard users in and out.
type Accounts struct {
	store UserStore
	cfg   AccountsConfig
	// dummyHash is compared against when the email is unknown, so a wrong
	// email takes as long as a wrong password.
	dummyHash []byte
}

// New returns the accounts over a store.
func New(store UserStore, cfg AccountsConfig) *Accounts {
	if cfg.MaxFailures <= 0 {
		cfg.MaxFailures = 5
	}
	if cfg.MaxAddressFailures <= 0 {
		cfg.MaxAddressFailures = 20
	}
	if cfg.FailureWindow <= 0 {
		cfg.FailureWindow = 15 * time.Minute
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.LinkTTL <= 0 {
		cfg.LinkTTL = 24 * time.Hour
	}
	dummy, _ := bcrypt.GenerateFromPassword([]byte("not a password of anyone"), HashCost)
	return &Accounts{store: store, cfg: cfg, dummyHash: dummy}
}

// barred reports whether the user may not sign in whatever their row says
// (AccountsConfig.Barred).
func (a *Accounts) barred(u User) bool {
	for _, e := range a.cfg.Barred {
		if strings.EqualFold(strings.TrimSpace(e), u.Email) {
			return true
		}
	}
	return false
}

// AddUser creates a user with a bcrypt hash of the password.
// Errors: INVALID_INPUT, USER_EXISTS.
func (a *Accounts) AddUser(ctx context.Context, n NewUser) (User, error) {
	if err := n.Validate(); err != nil {
		return User{}, err
	}
	n = n.normalize()
	hash, err := bcrypt.GenerateFromPassword([]byte(n.Password), HashCost)
	if err != nil {
		return User{}, err
	}
	return a.store.CreateUser(ctx, User{Email: n.Email, Name: n.Name, Role: n.Role, PasswordHash: hash},
		userAuditOf(ctx, n.Email, AuditUserAdded, "added as "+string(n.Role)+" with a password"))
}

// EnsureUser creates the user unless one with the email exists; created
// says which. Errors: INVALID_INPUT.
func (a *Accounts) EnsureUser(ctx context.Context, n NewUser) (created bool, err error) {
	_, err = a.AddUser(ctx, n)
	switch voucher.ErrorCodeOf(err) {
	case "":
		return true, nil
	case UserExists:
		return false, nil
	}
	return false, err
}

// SignIn checks an email and password from a client address and opens a
// session; token goes into the cookie. Each check first takes a slot of the
// email's and of the address's limits (MaxFailures, MaxAddressFailures
// within FailureWindow) in the store, so however many attempts arrive at
// once, no more than the limits are checked; an email or an address at its
// limit is refused, even with the right password, until the window passes or
// an admin lifts the lock (LiftLocks). The email's lock is its own: other
// users behind the same address still sign in.
// A disabled user is refused (USER_DISABLED) even with the right password,
// as is a barred one (AccountsConfig.Barred).
// Errors: TOO_MANY_ATTEMPTS, BAD_CREDENTIALS, USER_DISABLED, UNAVAILABLE.
func (a *Accounts) SignIn(ctx context.Context, address, email, password string) (token string, s Session, u User, err error) {
	email = signInEmail(email)
	l := a.Limits()
	l.Email, l.Address = email, SignInAddress(address)
	attempt, err := a.store.TakeSignInAttempt(ctx, l)
	if err != nil {
		return "", Session{}, User{}, err
	}
	// The slot is taken: its outcome is recorded whatever the caller does
	// meanwhile (an unfinished attempt counts as a failure until the window
	// passes).
	finish := func(failed bool) error {
		return a.store.FinishSignInAttempt(context.WithoutCancel(ctx), attempt, failed)
	}
	u, err = a.store.UserByEmail(ctx, email)
	hash := u.PasswordHash
	if err != nil {
		if voucher.ErrorCodeOf(err) != voucher.NotFound {
			return "", Session{}, User{}, err
		}
		hash = a.dummyHash
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil || err != nil {
		if ferr := finish(true); ferr != nil {
			return "", Session{}, User{}, ferr
		}
		return "", Session{}, User{}, voucher.Errorf(BadCredentials, "the email or the password is wrong")
	}
	if err := finish(false); err != nil {
		return "", Session{}, User{}, err
	}
	if u.Disabled() || a.barred(u) {
		// Said only to whoever knows the password: it tells them why, and
		// tells nobody else that the email exists.
		return "", Session{}, User{}, voucher.Errorf(UserDisabled, "this account is disabled; ask an admin")
	}
	token, hashOfToken := newSessionToken()
	s = Session{TokenHash: hashOfToken, UserID: u.ID, CSRFToken: voucher.RandomToken(), ExpiresAt: time.Now().Add(a.cfg.SessionTTL)}
	if err := a.store.CreateSession(ctx, s); err != nil {
		return "", Session{}, User{}, err
	}
	return token, s, u, nil
}

// invalidSignInEmail stands for every typed email that no user can have
// (empty, not UTF-8, a NUL, too long): they are counted together, under a key the
// database can store.
const invalidSignInEmail = "(not an email)"

// signInEmail is the email a sign-in is counted and looked up under: what
// a user's email is stored as.
func signInEmail(email string) string {
	email = strings.ToLower(strings.TrimSpace(email))
	if email == "" || voucher.ValidateText("email", email) != nil || len(email) > maxEmailLength {
		return invalidSignInEmail
	}
	return email
}

// LiftLocks is an admin lifting the sign-in lock of an email, of a client
// address, or both (either may be empty): their failures so far stop
// counting. It says how many failed attempts were lifted.
// Errors: FORBIDDEN (a caller other than an admin), INVALID_INPUT.
func (a *Accounts) LiftLocks(ctx context.Context, email, address string) (int, error) {
	if err := voucher.Authorize(ctx, voucher.OpManageUsers); err != nil {
		return 0, err
	}
	if strings.TrimSpace(email) == "" && strings.TrimSpace(address) == "" {
		return 0, voucher.Invalid("email", "name an email or an address to unlock")
	}
	if strings.TrimSpace(email) != "" {
		email = signInEmail(email)
	}
	return a.store.LiftSignInLocks(ctx, email, SignInAddress(address))
}

// SignInAddress is the key a client address's sign-in attempts count under:
// an IPv4 address itself, an IPv6 address its /64 ("2001:db8:1:2::/64"),
// since one subscriber's network holds a /64 and could otherwise try from
// as many addresses as it likes. A /64 (as the locks list shows it) is its
// own key; anything else is kept as it is, trimmed.
func SignInAddress(address string) string {
	address = strings.TrimSpace(address)
	if p, err := netip.ParsePrefix(address); err == nil && p.Addr().Is6() && !p.Addr().Is4In6() && p.Bits() == 64 {
		return p.Masked().String()
	}
	a, err := netip.ParseAddr(address)
	if err != nil {
		return address
	}
	if a = a.Unmap().WithZone(""); a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// SignInLocks lists the emails and addresses locked now, newest first (at
// most MaxSignInLocks), for an admin to lift. Errors: FORBIDDEN.
func (a *Accounts) SignInLocks(ctx context.Context) ([]SignInLock, error) {
	if err := voucher.Authorize(ctx, voucher.OpManageUsers); err != nil {
		return nil, err
	}
	return a.store.SignInLocks(ctx, a.Limits(), MaxSignInLocks)
}

// Limits are the sign-in limits in force (Email and Address empty), which
// the admin's page states.
func (a *Accounts) Limits() SignInLimit {
	return SignInLimit{MaxPerEmail: a.cfg.MaxFailures, MaxPerAddress: a.cfg.MaxAddressFailures, Window: a.cfg.FailureWindow}
}

// LockWait says how long a refused sign-in (TOO_MANY_ATTEMPTS) waits: until
// the oldest failure counted against its email (field "email") or its
// address (field "address") leaves the window.
func (a *Accounts) LockWait(ctx context.Context, field, address, email string) (time.Duration, error) {
	if field == "email" {
		return a.store.SignInLockWait(ctx, signInEmail(email), "", a.cfg.FailureWindow)
	}
	return a.store.SignInLockWait(ctx, "", SignInAddress(address), a.cfg.FailureWindow)
}

// SessionUser returns the live session of a cookie's token and its user.
// Errors: SIGNED_OUT.
func (a *Accounts) SessionUser(ctx context.Context, token string) (Session, User, error) {
	if token == "" {
		return Session{}, User{}, voucher.Errorf(SignedOut, "not signed in")
	}
	s, u, err := a.store.SessionByTokenHash(ctx, hashToken(token))
	if voucher.ErrorCodeOf(err) == voucher.NotFound || (err == nil && a.barred(u)) {
		return Session{}, User{}, voucher.Errorf(SignedOut, "the session has ended; sign in again")
	}
	return s, u, err
}

// SignOut ends the session of a cookie's token.
func (a *Accounts) SignOut(ctx context.Context, token string) error {
	if token == "" {
		return nil
	}
	return a.store.DeleteSession(ctx, hashToken(token))
}

// SessionTTL is how long a session lasts, for the cookie's Max-Age.
func (a *Accounts) SessionTTL() time.Duration { return a.cfg.SessionTTL }

func newSessionToken() (token string, hash []byte) {
	token = voucher.RandomToken()
	return token, hashToken(token)
}

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}
