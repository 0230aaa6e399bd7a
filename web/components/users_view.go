package components

import (
	"net/url"
	"strconv"
	"time"

	"voucherd/internal/accounts"
	"voucherd/internal/voucher"
)

// UsersView is what the users page shows.
type UsersView struct {
	// Query is the search and page shown; More says a next page has more.
	Query  accounts.UserQuery
	More   bool
	Users  []accounts.User
	Audit  []accounts.UserAuditEvent
	Invite InviteForm
	// Link is a one-time password link just made, shown once.
	Link *ShownLink
	// Refusal says why the last change was refused (the last admin).
	Refusal string
}

// usersURL is the users page at a search and page.
func usersURL(search string, page int) string {
	q := url.Values{}
	if search != "" {
		q.Set("q", search)
	}
	if page > 1 {
		q.Set("page", strconv.Itoa(page))
	}
	if len(q) == 0 {
		return "/admin/users"
	}
	return "/admin/users?" + q.Encode()
}

// InviteForm is the add-a-user form as typed, with its field messages
// (keyed invite-email, invite-name, invite-role).
type InviteForm struct {
	Email, Name, Role string
	Errors            map[string]string
}

// ShownLink is a one-time password link with the whole URL to pass on.
type ShownLink struct {
	Heading   string
	Email     string
	URL       string
	ExpiresAt time.Time
}

// PasswordView is the page a one-time link leads to.
type PasswordView struct {
	Token, Email, CSRF string
	Message            string // why the last try was refused
	Invalid            bool   // the link no longer works
	Done               bool   // the password was set
}

func queryEscape(s string) string { return url.QueryEscape(s) }

// DeadLettersView is what the dead letters page shows.
type DeadLettersView struct {
	Open []voucher.DeadLetter
	// Actions are the latest actions on dead letters, with who took them.
	Actions []voucher.AuditEvent
	// Applies says whether this server applies events (the Kafka write
	// path); without it "apply again" cannot run here.
	Applies bool
}

// SignInLocksView is what the sign-in locks page shows: the locks now (More
// when there are more than listed), the limits in force, and the lift form
// as sent with its refusal if any.
type SignInLocksView struct {
	Locks          []accounts.SignInLock
	More           bool
	Limits         accounts.SignInLimit
	Email, Address string
	Message        string
}

// minutes says a window in whole minutes ("15 minutes"), or seconds under
// one.
func minutes(d time.Duration) string {
	if d < time.Minute {
		return strconv.Itoa(int(d.Seconds())) + " seconds"
	}
	if m := int(d.Minutes()); m != 1 {
		return strconv.Itoa(m) + " minutes"
	}
	return "1 minute"
}
