package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"voucherd/internal/voucher"
	"voucherd/sql/db"
)

var _ voucher.UserStore = (*Store)(nil)

// CreateUser adds a dashboard user. Errors: USER_EXISTS.
func (s *Store) CreateUser(ctx context.Context, u voucher.User) (voucher.User, error) {
	row, err := s.q.DashboardUserInsert(ctx, db.DashboardUserInsertParams{
		Email: u.Email, Name: u.Name, Role: string(u.Role), PasswordHash: string(u.PasswordHash),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return voucher.User{}, voucher.Errorf(voucher.UserExists, "a user with email %s exists", u.Email)
	}
	if err != nil {
		return voucher.User{}, mapError(err)
	}
	return toUser(row), nil
}

// UserByEmail reads a user. Errors: NOT_FOUND.
func (s *Store) UserByEmail(ctx context.Context, email string) (voucher.User, error) {
	row, err := s.q.DashboardUserGetByEmail(ctx, email)
	if errors.Is(err, pgx.ErrNoRows) {
		return voucher.User{}, voucher.Errorf(voucher.NotFound, "no user with email %s", email)
	}
	if err != nil {
		return voucher.User{}, mapError(err)
	}
	return toUser(row), nil
}

// CreateSession stores a session and forgets expired ones.
func (s *Store) CreateSession(ctx context.Context, sess voucher.Session) error {
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
func (s *Store) SessionByTokenHash(ctx context.Context, hash []byte) (voucher.Session, voucher.User, error) {
	row, err := s.q.DashboardSessionGet(ctx, hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return voucher.Session{}, voucher.User{}, voucher.Errorf(voucher.NotFound, "no live session")
	}
	if err != nil {
		return voucher.Session{}, voucher.User{}, mapError(err)
	}
	sess := voucher.Session{
		TokenHash: row.DashboardSession.TokenHash, UserID: row.DashboardSession.UserID,
		CSRFToken: row.DashboardSession.CsrfToken, ExpiresAt: row.DashboardSession.ExpiresAt,
	}
	return sess, toUser(row.DashboardUser), nil
}

// DeleteSession ends a session.
func (s *Store) DeleteSession(ctx context.Context, hash []byte) error {
	return mapError(s.q.DashboardSessionDelete(ctx, hash))
}

// RecordSignInFailure notes a failed sign-in of an address and forgets its
// failures older than window.
func (s *Store) RecordSignInFailure(ctx context.Context, address string, window time.Duration) error {
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		if err := q.DashboardSignInFailureDeleteOld(ctx, db.DashboardSignInFailureDeleteOldParams{Address: address, WindowSeconds: window.Seconds()}); err != nil {
			return err
		}
		return q.DashboardSignInFailureInsert(ctx, address)
	})
	return mapError(err)
}

// SignInFailures counts an address's failed sign-ins within window.
func (s *Store) SignInFailures(ctx context.Context, address string, window time.Duration) (int, error) {
	n, err := s.q.DashboardSignInFailureCount(ctx, db.DashboardSignInFailureCountParams{Address: address, WindowSeconds: window.Seconds()})
	if err != nil {
		return 0, mapError(err)
	}
	return int(n), nil // a row count (bigint): int is 64 bits on every platform this builds for
}

func toUser(r db.DashboardUser) voucher.User {
	return voucher.User{
		ID: r.ID, Email: r.Email, Name: r.Name, Role: voucher.Role(r.Role),
		PasswordHash: []byte(r.PasswordHash), CreatedAt: r.CreatedAt,
	}
}
