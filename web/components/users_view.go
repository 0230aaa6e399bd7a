package components

import (
	"net/url"
	"time"

	"voucherd/internal/voucher"
)

// UsersView is what the users page shows.
type UsersView struct {
	Users  []voucher.User
	Audit  []voucher.UserAuditEvent
	Invite InviteForm
	// Link is a one-time password link just made, shown once.
	Link *ShownLink
	// Refusal says why the last change was refused (the last admin).
	Refusal string
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
