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

var _ accounts.UserStore = (*Store)(nil)

// CreateUser adds a dashboard user and records it. Errors: USER_EXISTS.
func (s *Store) CreateUser(ctx context.Context, u accounts.User, audit accounts.UserAuditEvent) (accounts.User, error) {
	var row db.DashboardUser
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		var err error
		if row, err = insertUser(ctx, q, u); err != nil {
			return err
		}
		return q.DashboardUserAuditInsert(ctx, userAudit(audit, ""))
	})
	if err != nil {
		return accounts.User{}, mapError(err)
	}
	return toUser(row), nil
}

func insertUser(ctx context.Context, q *db.Queries, u accounts.User) (db.DashboardUser, error) {
	row, err := q.DashboardUserInsert(ctx, db.DashboardUserInsertParams{
		Email: u.Email, Name: u.Name, Role: string(u.Role), PasswordHash: string(u.PasswordHash),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return row, voucher.Errorf(accounts.UserExists, "a user with email %s exists", u.Email)
	}
	return row, err
}

// UserByEmail reads a user. Errors: NOT_FOUND.
func (s *Store) UserByEmail(ctx context.Context, email string) (accounts.User, error) {
	row, err := s.q.DashboardUserGetByEmail(ctx, email)
	if errors.Is(err, pgx.ErrNoRows) {
		return accounts.User{}, voucher.Errorf(voucher.NotFound, "no user with email %s", email)
	}
	if err != nil {
		return accounts.User{}, mapError(err)
	}
	return toUser(row), nil
}

// CreateSession stores a session and forgets expired ones.
func (s *Store) CreateSession(ctx context.Context, sess accounts.Session) error {
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		if err := q.DashboardSessionDeleteExpired(ctx); err != nil {
			return err
		}
		return q.DashboardSessionInsert(ctx, db.DashboardSessionInsertParams{
			TokenHash: sess.TokenHash, UserID: sess.UserID, CsrfToken: sess.CSRFToken, ExpiresAt: sess.ExpiresAt,
		})
	})
	return mapError(err)
}

// SessionByTokenHash reads a live session and its user. Errors: NOT_FOUND.
func (s *Store) SessionByTokenHash(ctx context.Context, hash []byte) (accounts.Session, accounts.User, error) {
	row, err := s.q.DashboardSessionGet(ctx, hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return accounts.Session{}, accounts.User{}, voucher.Errorf(voucher.NotFound, "no live session")
	}
	if err != nil {
		return accounts.Session{}, accounts.User{}, mapError(err)
	}
	sess := accounts.Session{
		TokenHash: row.DashboardSession.TokenHash, UserID: row.DashboardSession.UserID,
		CSRFToken: row.DashboardSession.CsrfToken, ExpiresAt: row.DashboardSession.ExpiresAt,
	}
	return sess, toUser(row.DashboardUser), nil
}

// DeleteSession ends a session.
func (s *Store) DeleteSession(ctx context.Context, hash []byte) error {
	return mapError(s.q.DashboardSessionDelete(ctx, hash))
}

// TakeSignInAttempt reserves a password check for the email and the address
// in one transaction: it locks the email's and then the address's attempts
// (advisory locks, held to the commit), so concurrent attempts count one at
// a time, and inserts a pending attempt only while both are under their
// limits. Errors: TOO_MANY_ATTEMPTS (Field "email" or "address").
func (s *Store) TakeSignInAttempt(ctx context.Context, l accounts.SignInLimit) (int64, error) {
	var id int64
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		for _, key := range []string{"email " + l.Email, "address " + l.Address} {
			if err := q.DashboardSignInAttemptLock(ctx, key); err != nil {
				return err
			}
		}
		window := l.Window.Seconds()
		if err := q.DashboardSignInAttemptDeleteOld(ctx, db.DashboardSignInAttemptDeleteOldParams{Email: l.Email, Address: l.Address, WindowSeconds: window}); err != nil {
			return err
		}
		// Counted after the locks, in a statement of its own: its snapshot
		// sees every attempt committed by whoever held them before.
		n, err := q.DashboardSignInAttemptCount(ctx, db.DashboardSignInAttemptCountParams{Email: l.Email, Address: l.Address, WindowSeconds: window})
		if err != nil {
			return err
		}
		if n.EmailAttempts >= int64(l.MaxPerEmail) {
			return &voucher.Error{Code: accounts.TooManyAttempts, Field: "email", Message: "too many failed sign-ins for this email lately"}
		}
		if n.AddressAttempts >= int64(l.MaxPerAddress) {
			return &voucher.Error{Code: accounts.TooManyAttempts, Field: "address", Message: "too many failed sign-ins from this address lately"}
		}
		id, err = q.DashboardSignInAttemptInsert(ctx, db.DashboardSignInAttemptInsertParams{Email: l.Email, Address: l.Address})
		return err
	})
	return id, mapError(err)
}

// FinishSignInAttempt marks an attempt failed, or forgets a successful one.
func (s *Store) FinishSignInAttempt(ctx context.Context, id int64, failed bool) error {
	if failed {
		return mapError(s.q.DashboardSignInAttemptFail(ctx, id))
	}
	return mapError(s.q.DashboardSignInAttemptDelete(ctx, id))
}

// LiftSignInLocks lifts the counted attempts of an email or an address.
func (s *Store) LiftSignInLocks(ctx context.Context, email, address string) (int, error) {
	n, err := s.q.DashboardSignInAttemptLift(ctx, db.DashboardSignInAttemptLiftParams{Email: email, Address: address})
	return int(n), mapError(err) // a row count (bigint): int is 64 bits on every platform this builds for
}

// SignInLockWait is how long until the oldest counted attempt of an email or
// an address leaves the window.
func (s *Store) SignInLockWait(ctx context.Context, email, address string, window time.Duration) (time.Duration, error) {
	secs, err := s.q.DashboardSignInAttemptWait(ctx, db.DashboardSignInAttemptWaitParams{Email: email, Address: address, WindowSeconds: window.Seconds()})
	if err != nil {
		return 0, mapError(err)
	}
	return max(0, time.Duration(secs*float64(time.Second))), nil
}

// SignInLocks lists up to limit of the emails and addresses locked now
// under l, newest first.
func (s *Store) SignInLocks(ctx context.Context, l accounts.SignInLimit, limit int) ([]accounts.SignInLock, error) {
	rows, err := s.q.DashboardSignInLocksList(ctx, db.DashboardSignInLocksListParams{
		WindowSeconds: l.Window.Seconds(), MaxPerEmail: int64(l.MaxPerEmail), MaxPerAddress: int64(l.MaxPerAddress), MaxRows: limit32(limit),
	})
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]accounts.SignInLock, len(rows))
	for i, r := range rows {
		out[i] = accounts.SignInLock{Field: r.Kind, Key: r.Key, Attempts: int(r.Attempts), Latest: r.Latest, Until: r.Until}
	}
	return out, nil
}

func toUser(r db.DashboardUser) accounts.User {
	return accounts.User{
		ID: r.ID, Email: r.Email, Name: r.Name, Role: voucher.Role(r.Role),
		PasswordHash: []byte(r.PasswordHash), CreatedAt: r.CreatedAt, DisabledAt: r.DisabledAt,
	}
}
