// Package accounts holds the dashboard's sign-in accounts: its users, their
// sessions, sign-in locks and one-time password links, and an admin's
// management of them. It is apart from package voucher because a dashboard
// account is no voucher: it only borrows the domain's roles, callers and
// errors (voucher.Role, voucher.Caller, voucher.Error).
package accounts
