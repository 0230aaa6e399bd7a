package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"voucherd/internal/accounts"
	"voucherd/internal/voucher"
	"voucherd/sql/db"
)

var _ accounts.UserAdminStore = (*Store)(nil)

// ListUsers lists a page of users, enabled admins first, then by email.
func (s *Store) ListUsers(ctx context.Context, search string, limit, offset int) ([]accounts.User, error) {
	rows, err := s.q.DashboardUserList(ctx, db.DashboardUserListParams{
		Search: search, RowLimit: limit32(limit), RowOffset: limit32(offset),
	})
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]accounts.User, len(rows))
	for i, r := range rows {
		out[i] = toUser(r)
	}
	return out, nil
}

// InviteUser adds a user, their password link and the audit event in one
// transaction. Errors: USER_EXISTS.
func (s *Store) InviteUser(ctx context.Context, u accounts.User, linkHash []byte, expiresAt time.Time, audit accounts.UserAuditEvent) (accounts.User, error) {
	var row db.DashboardUser
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		var err error
		if row, err = insertUser(ctx, q, u); err != nil {
			return err
		}
		if err := q.DashboardPasswordLinkInsert(ctx, db.DashboardPasswordLinkInsertParams{
			TokenHash: linkHash, UserID: row.ID, CreatedBy: audit.Actor, ExpiresAt: expiresAt,
		}); err != nil {
			return err
		}
		return q.DashboardUserAuditInsert(ctx, userAudit(audit, ""))
	})
	if err != nil {
		return accounts.User{}, mapError(err)
	}
	return toUser(row), nil
}

// SetRole changes a user's role under the admins' lock, then counts the
// enabled admins left (a statement of its own after the lock, so it sees
// every change committed before): none is LAST_ADMIN, and the transaction
// is rolled back. Errors: NOT_FOUND, LAST_ADMIN.
func (s *Store) SetRole(ctx context.Context, email string, role voucher.Role, audit accounts.UserAuditEvent) (voucher.Role, error) {
	var before voucher.Role
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		if err := q.DashboardUserLockAdmins(ctx); err != nil {
			return err
		}
		row, err := q.DashboardUserSetRole(ctx, db.DashboardUserSetRoleParams{Email: email, Role: string(role)})
		if errors.Is(err, pgx.ErrNoRows) {
			return voucher.Errorf(voucher.NotFound, "no user with email %s", email)
		}
		if err != nil {
			return err
		}
		before = voucher.Role(row.OldRole)
		if before == role {
			return nil // nothing changed: nothing to record
		}
		if err := adminLeft(ctx, q); err != nil {
			return err
		}
		return q.DashboardUserAuditInsert(ctx, userAudit(audit, "role "+row.OldRole+" → "+string(role)))
	})
	return before, mapError(err)
}

// DisableUser disables a user under the admins' lock (none may be left
// otherwise), ends their sessions and drops their password links.
// Errors: NOT_FOUND, LAST_ADMIN.
func (s *Store) DisableUser(ctx context.Context, email string, audit accounts.UserAuditEvent) (accounts.User, error) {
	var row db.DashboardUser
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		if err := q.DashboardUserLockAdmins(ctx); err != nil {
			return err
		}
		var err error
		row, err = q.DashboardUserDisable(ctx, email)
		if errors.Is(err, pgx.ErrNoRows) {
			return voucher.Errorf(voucher.NotFound, "no user with email %s", email)
		}
		if err != nil {
			return err
		}
		if err := adminLeft(ctx, q); err != nil {
			return err
		}
		if err := q.DashboardSessionDeleteByUser(ctx, row.ID); err != nil {
			return err
		}
		if err := q.DashboardPasswordLinkDeleteOfUser(ctx, row.ID); err != nil {
			return err
		}
		return q.DashboardUserAuditInsert(ctx, userAudit(audit, ""))
	})
	if err != nil {
		return accounts.User{}, mapError(err)
	}
	return toUser(row), nil
}

// EnableUser enables a disabled user again with its audit row, in one
// transaction; one not disabled is returned unchanged and unrecorded.
// Errors: NOT_FOUND.
func (s *Store) EnableUser(ctx context.Context, email string, audit accounts.UserAuditEvent) (accounts.User, error) {
	var row db.DashboardUser
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		changed, err := q.DashboardUserEnable(ctx, email)
		if errors.Is(err, pgx.ErrNoRows) {
			return voucher.Errorf(voucher.NotFound, "no user with email %s", email)
		}
		if err != nil {
			return err
		}
		if row, err = q.DashboardUserGetByEmail(ctx, email); err != nil {
			return err
		}
		if !changed.WasDisabled {
			return nil
		}
		return q.DashboardUserAuditInsert(ctx, userAudit(audit, ""))
	})
	if err != nil {
		return accounts.User{}, mapError(err)
	}
	return toUser(row), nil
}

// adminLeft refuses a change after which no enabled admin is left.
func adminLeft(ctx context.Context, q *db.Queries) error {
	n, err := q.DashboardUserCountAdmins(ctx)
	if err != nil {
		return err
	}
	if n == 0 {
		return voucher.Errorf(accounts.LastAdmin, "this would leave no admin who can sign in: make another user admin first")
	}
	return nil
}

// CreatePasswordLink replaces a user's password links with a new one and
// records it. Errors: NOT_FOUND, USER_DISABLED.
func (s *Store) CreatePasswordLink(ctx context.Context, email string, linkHash []byte, expiresAt time.Time, audit accounts.UserAuditEvent) (accounts.User, error) {
	var row db.DashboardUser
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		var err error
		row, err = q.DashboardUserGetByEmail(ctx, email)
		if errors.Is(err, pgx.ErrNoRows) {
			return voucher.Errorf(voucher.NotFound, "no user with email %s", email)
		}
		if err != nil {
			return err
		}
		if row.DisabledAt != nil {
			return voucher.Errorf(accounts.UserDisabled, "%s is disabled: a disabled user gets no password link", email)
		}
		if err := q.DashboardPasswordLinkDeleteOfUser(ctx, row.ID); err != nil {
			return err
		}
		if err := q.DashboardPasswordLinkInsert(ctx, db.DashboardPasswordLinkInsertParams{
			TokenHash: linkHash, UserID: row.ID, CreatedBy: audit.Actor, ExpiresAt: expiresAt,
		}); err != nil {
			return err
		}
		return q.DashboardUserAuditInsert(ctx, userAudit(audit, ""))
	})
	if err != nil {
		return accounts.User{}, mapError(err)
	}
	return toUser(row), nil
}

// PasswordLinkUser reads the user of a link that can still be used.
// Errors: NOT_FOUND.
func (s *Store) PasswordLinkUser(ctx context.Context, linkHash []byte) (accounts.User, error) {
	row, err := s.q.DashboardPasswordLinkGet(ctx, linkHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return accounts.User{}, voucher.Errorf(voucher.NotFound, "no such link")
	}
	if err != nil {
		return accounts.User{}, mapError(err)
	}
	return toUser(row.DashboardUser), nil
}

// UsePasswordLink uses a link (the conditional update lets one of two uses
// at once through), sets the password, ends the user's sessions and records
// it, in one transaction. Errors: NOT_FOUND.
func (s *Store) UsePasswordLink(ctx context.Context, linkHash []byte, passwordHash []byte) (accounts.User, error) {
	var row db.DashboardUser
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		id, err := q.DashboardPasswordLinkUse(ctx, linkHash)
		if errors.Is(err, pgx.ErrNoRows) {
			return voucher.Errorf(voucher.NotFound, "no such link")
		}
		if err != nil {
			return err
		}
		if row, err = q.DashboardUserGetByID(ctx, id); err != nil {
			return err
		}
		if row.DisabledAt != nil {
			return voucher.Errorf(voucher.NotFound, "no such link") // rolled back: disabling drops links anyway
		}
		if err := q.DashboardUserSetPassword(ctx, db.DashboardUserSetPasswordParams{ID: id, PasswordHash: string(passwordHash)}); err != nil {
			return err
		}
		if err := q.DashboardSessionDeleteByUser(ctx, id); err != nil {
			return err
		}
		return q.DashboardUserAuditInsert(ctx, db.DashboardUserAuditInsertParams{
			UserEmail: row.Email, Actor: row.Email, ActorRole: row.Role, Action: accounts.AuditPasswordSet,
			Detail: "the password was set with a one-time link; other sessions ended",
		})
	})
	if err != nil {
		return accounts.User{}, mapError(err)
	}
	return toUser(row), nil
}

// UserAudit returns the latest changes of users, newest first.
func (s *Store) UserAudit(ctx context.Context, limit int) ([]accounts.UserAuditEvent, error) {
	rows, err := s.q.DashboardUserAuditListLatest(ctx, limit32(limit))
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]accounts.UserAuditEvent, len(rows))
	for i, r := range rows {
		out[i] = accounts.UserAuditEvent{
			UserEmail: r.UserEmail, Actor: r.Actor, ActorRole: voucher.Role(r.ActorRole),
			Action: r.Action, Detail: r.Detail, At: r.OccurredAt,
		}
	}
	return out, nil
}

// userAudit is the audit row of an event; detail, when given, replaces the
// event's (the store knows what changed).
func userAudit(e accounts.UserAuditEvent, detail string) db.DashboardUserAuditInsertParams {
	if detail == "" {
		detail = e.Detail
	}
	return db.DashboardUserAuditInsertParams{
		UserEmail: e.UserEmail, Actor: e.Actor, ActorRole: string(e.ActorRole), Action: e.Action, Detail: detail,
	}
}
