package accounts

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"voucherd/internal/voucher"
)

// Error codes of managing dashboard users.
const (
	// LastAdmin: the change would leave no admin who can sign in.
	LastAdmin voucher.ErrorCode = "LAST_ADMIN"
	// UserDisabled: the user was disabled by an admin.
	UserDisabled voucher.ErrorCode = "USER_DISABLED"
	// LinkInvalid: a password link that was used, replaced, expired, or
	// never was.
	LinkInvalid voucher.ErrorCode = "LINK_INVALID"
)

// The actions of the user audit log.
const (
	AuditUserAdded    = "added"
	AuditRoleChanged  = "role-changed"
	AuditUserDisabled = "disabled"
	AuditUserEnabled  = "enabled"
	AuditPasswordLink = "password-link" // a one-time link was made
	AuditPasswordSet  = "password-set"  // a link was used
)

// UserAuditEvent is one change of a dashboard user, with who made it.
type UserAuditEvent struct {
	UserEmail string
	Actor     string
	ActorRole voucher.Role
	Action    string
	Detail    string
	At        time.Time
}

// PasswordLink is a one-time link that sets a user's password: for an
// invited user, or one whose password an admin reset. Token is shown once
// (only its hash is stored); the admin passes the link on.
type PasswordLink struct {
	Token     string
	Email     string
	ExpiresAt time.Time
}

// Path is the link's path on the dashboard.
func (l PasswordLink) Path() string { return "/admin/password/" + l.Token }

// Invite is an admin adding a user who sets their own password with a link.
type Invite struct {
	Email string
	Name  string
	Role  voucher.Role
}

// UserAdminStore is what managing users needs beyond UserStore. Each change
// is one transaction with its audit event.
type UserAdminStore interface {
	// ListUsers lists limit users from offset of those whose email
	// contains search (any case), enabled admins first, then by email.
	ListUsers(ctx context.Context, search string, limit, offset int) ([]User, error)
	// InviteUser adds a user with an unusable password and a password
	// link: USER_EXISTS.
	InviteUser(ctx context.Context, u User, linkHash []byte, expiresAt time.Time, audit UserAuditEvent) (User, error)
	// SetRole changes a user's role and says what it was: NOT_FOUND,
	// LAST_ADMIN (no enabled admin would be left; nothing changes).
	SetRole(ctx context.Context, email string, role voucher.Role, audit UserAuditEvent) (before voucher.Role, err error)
	// DisableUser disables a user, ends their sessions and drops their
	// password links: NOT_FOUND, LAST_ADMIN.
	DisableUser(ctx context.Context, email string, audit UserAuditEvent) (User, error)
	// EnableUser enables a disabled user again, recording it only when it
	// was disabled: NOT_FOUND.
	EnableUser(ctx context.Context, email string, audit UserAuditEvent) (User, error)
	// CreatePasswordLink replaces a user's password links with a new one:
	// NOT_FOUND, USER_DISABLED.
	CreatePasswordLink(ctx context.Context, email string, linkHash []byte, expiresAt time.Time, audit UserAuditEvent) (User, error)
	// PasswordLinkUser returns the user of a link that can still be used:
	// NOT_FOUND.
	PasswordLinkUser(ctx context.Context, linkHash []byte) (User, error)
	// UsePasswordLink uses a link once: sets the user's password hash, ends
	// their sessions and records it: NOT_FOUND (used, replaced, expired or
	// the user disabled).
	UsePasswordLink(ctx context.Context, linkHash []byte, passwordHash []byte) (User, error)
	// UserAudit returns the latest changes of users, newest first.
	UserAudit(ctx context.Context, limit int) ([]UserAuditEvent, error)
}

// How many users and audit lines the users page shows.
const (
	UserPageSize   = 100
	UserAuditLimit = 50
	// MaxUserPage keeps an offset typed into a URL far from overflowing.
	MaxUserPage = 100_000
)

// UserQuery is a page of the users list: the users whose email contains
// Search (any case; empty: every user), page Page (from 1) of UserPageSize.
type UserQuery struct {
	Search string
	Page   int
}

// UserPage is one page of users, and whether a next one has more.
type UserPage struct {
	Users []User
	More  bool
}

// userAdmin is the store's user management, when it has it.
func (a *Accounts) userAdmin() (UserAdminStore, error) {
	s, ok := a.store.(UserAdminStore)
	if !ok {
		return nil, voucher.Errorf(voucher.Internal, "this store cannot manage users")
	}
	return s, nil
}

// Users lists a page of the dashboard's users. Errors: FORBIDDEN,
// INVALID_INPUT (search: longer than an email, or not UTF-8; page).
func (a *Accounts) Users(ctx context.Context, q UserQuery) (UserPage, error) {
	s, err := a.manage(ctx)
	if err != nil {
		return UserPage{}, err
	}
	if err := voucher.ValidateText("search", q.Search); err != nil {
		return UserPage{}, err
	}
	if len(q.Search) > maxEmailLength {
		return UserPage{}, voucher.Invalid("search", fmt.Sprintf("search for at most %d characters (an email's length)", maxEmailLength))
	}
	if q.Page < 1 || q.Page > MaxUserPage {
		return UserPage{}, voucher.Invalid("page", fmt.Sprintf("page must be a whole number from 1 to %d", MaxUserPage))
	}
	// One row more than a page says whether there is a next one.
	users, err := s.ListUsers(ctx, q.Search, UserPageSize+1, (q.Page-1)*UserPageSize)
	if err != nil {
		return UserPage{}, err
	}
	page := UserPage{Users: users}
	if len(users) > UserPageSize {
		page.Users, page.More = users[:UserPageSize], true
	}
	return page, nil
}

// UserAudit lists the latest changes of users. Errors: FORBIDDEN.
func (a *Accounts) UserAudit(ctx context.Context) ([]UserAuditEvent, error) {
	s, err := a.manage(ctx)
	if err != nil {
		return nil, err
	}
	return s.UserAudit(ctx, UserAuditLimit)
}

func (a *Accounts) manage(ctx context.Context) (UserAdminStore, error) {
	if err := voucher.Authorize(ctx, voucher.OpManageUsers); err != nil {
		return nil, err
	}
	return a.userAdmin()
}

// InviteUser adds a user without a password and returns the one-time link
// with which they set it (no mail is sent: the admin passes it on).
// Errors: FORBIDDEN, INVALID_INPUT, USER_EXISTS.
func (a *Accounts) InviteUser(ctx context.Context, in Invite) (User, PasswordLink, error) {
	s, err := a.manage(ctx)
	if err != nil {
		return User{}, PasswordLink{}, err
	}
	// Validated as a user with a placeholder password: the same rules for
	// the email, the name and the role.
	n := NewUser{Email: in.Email, Name: in.Name, Role: in.Role, Password: "placeholder-password"}
	if err := n.Validate(); err != nil {
		return User{}, PasswordLink{}, err
	}
	n = n.normalize()
	// Nobody knows this password: the user has none until they use the link.
	unusable, err := bcrypt.GenerateFromPassword([]byte(voucher.RandomToken()[:40]), HashCost)
	if err != nil {
		return User{}, PasswordLink{}, err
	}
	link, hash := a.newLink(n.Email)
	u, err := s.InviteUser(ctx, User{Email: n.Email, Name: n.Name, Role: n.Role, PasswordHash: unusable}, hash, link.ExpiresAt,
		userAuditOf(ctx, n.Email, AuditUserAdded, "invited as "+string(n.Role)+"; a one-time link to set the password was made"))
	if err != nil {
		return User{}, PasswordLink{}, err
	}
	return u, link, nil
}

// ChangeRole gives a user another role; it takes effect on their next
// request (sessions read the role each time). No change leaves the
// dashboard without an enabled admin. Errors: FORBIDDEN, INVALID_INPUT,
// NOT_FOUND, LAST_ADMIN.
func (a *Accounts) ChangeRole(ctx context.Context, email string, role voucher.Role) (before voucher.Role, err error) {
	s, err := a.manage(ctx)
	if err != nil {
		return "", err
	}
	switch role {
	case voucher.RoleMarketer, voucher.RoleOperator, voucher.RoleAdmin:
	default:
		return "", voucher.Invalid("role", "role must be marketer, operator or admin")
	}
	email = signInEmail(email)
	return s.SetRole(ctx, email, role, userAuditOf(ctx, email, AuditRoleChanged, ""))
}

// DisableUser disables a user: their sessions end at once and sign-in is
// refused. The last enabled admin cannot be disabled (not even by
// themselves). Errors: FORBIDDEN, NOT_FOUND, LAST_ADMIN.
func (a *Accounts) DisableUser(ctx context.Context, email string) (User, error) {
	s, err := a.manage(ctx)
	if err != nil {
		return User{}, err
	}
	email = signInEmail(email)
	return s.DisableUser(ctx, email, userAuditOf(ctx, email, AuditUserDisabled, "sessions ended; sign-in refused"))
}

// EnableUser lets a disabled user sign in again, with the role and the
// password they had (their sessions and password links ended with the
// disable; an admin resets the password if it is not known any more).
// Enabling a user who is not disabled changes and records nothing.
// Errors: FORBIDDEN, NOT_FOUND.
func (a *Accounts) EnableUser(ctx context.Context, email string) (User, error) {
	s, err := a.manage(ctx)
	if err != nil {
		return User{}, err
	}
	email = signInEmail(email)
	return s.EnableUser(ctx, email, userAuditOf(ctx, email, AuditUserEnabled, "sign-in allowed again"))
}

// ResetPassword makes a one-time link with which the user sets a new
// password; it replaces any earlier link of theirs. The current password
// keeps working until the link is used. Errors: FORBIDDEN, NOT_FOUND,
// USER_DISABLED.
func (a *Accounts) ResetPassword(ctx context.Context, email string) (PasswordLink, error) {
	s, err := a.manage(ctx)
	if err != nil {
		return PasswordLink{}, err
	}
	email = signInEmail(email)
	link, hash := a.newLink(email)
	detail := "a one-time link to set a new password was made, valid until " + link.ExpiresAt.UTC().Format(time.RFC3339)
	if _, err := s.CreatePasswordLink(ctx, email, hash, link.ExpiresAt, userAuditOf(ctx, email, AuditPasswordLink, detail)); err != nil {
		return PasswordLink{}, err
	}
	return link, nil
}

func (a *Accounts) newLink(email string) (PasswordLink, []byte) {
	token, hash := newSessionToken()
	return PasswordLink{Token: token, Email: email, ExpiresAt: time.Now().Add(a.cfg.LinkTTL)}, hash
}

// PasswordLinkUser returns the user whose password a link sets, while it
// can be used. Errors: LINK_INVALID.
func (a *Accounts) PasswordLinkUser(ctx context.Context, token string) (User, error) {
	s, err := a.userAdmin()
	if err != nil {
		return User{}, err
	}
	if !plausibleToken(token) {
		return User{}, linkInvalid()
	}
	u, err := s.PasswordLinkUser(ctx, hashToken(token))
	if voucher.ErrorCodeOf(err) == voucher.NotFound {
		return User{}, linkInvalid()
	}
	return u, err
}

// SetPassword uses a link once to set its user's password; their sessions
// end (whoever had them must sign in with the new one).
// Errors: INVALID_INPUT (field password), LINK_INVALID.
func (a *Accounts) SetPassword(ctx context.Context, token, password string) (User, error) {
	s, err := a.userAdmin()
	if err != nil {
		return User{}, err
	}
	if !plausibleToken(token) {
		return User{}, linkInvalid()
	}
	if err := voucher.ValidateText("password", password); err != nil {
		return User{}, err
	}
	if utf8.RuneCountInString(password) < MinPasswordLength {
		return User{}, voucher.Invalid("password", "password must be at least 10 characters")
	}
	if len(password) > 72 {
		return User{}, voucher.Invalid("password", "password must be at most 72 bytes")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), HashCost)
	if err != nil {
		return User{}, err
	}
	u, err := s.UsePasswordLink(ctx, hashToken(token), hash)
	if voucher.ErrorCodeOf(err) == voucher.NotFound {
		return User{}, linkInvalid()
	}
	return u, err
}

func linkInvalid() error {
	return voucher.Errorf(LinkInvalid, "this link was used already, replaced by a newer one, or has expired; ask an admin for a new one")
}

// plausibleToken keeps what cannot be a token (voucher.RandomToken: 43
// URL-safe characters) from reaching the store.
func plausibleToken(t string) bool {
	if len(t) != 43 {
		return false
	}
	for _, c := range t {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// userAuditOf names the context's caller as the actor of a user change; a
// context without one is the service itself.
func userAuditOf(ctx context.Context, email, action, detail string) UserAuditEvent {
	actor, role := voucher.Actor(ctx)
	return UserAuditEvent{UserEmail: email, Actor: actor, ActorRole: role, Action: action, Detail: detail}
}
