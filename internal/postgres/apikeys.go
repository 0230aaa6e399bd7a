package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"voucherd/internal/voucher"
	"voucherd/sql/db"
)

var _ voucher.ApiKeyStore = (*Store)(nil)

// CreateApiKey stores a key and its audit event in one transaction.
func (s *Store) CreateApiKey(ctx context.Context, k voucher.ApiKey, audit func(voucher.ApiKey) voucher.ApiKeyAuditEvent) (voucher.ApiKey, error) {
	var out voucher.ApiKey
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		row, err := q.ApiKeyInsert(ctx, db.ApiKeyInsertParams{
			Name: k.Name, Role: string(k.Role), Prefix: k.Prefix, SecretHash: k.Hash,
			ExpiresAt: k.ExpiresAt, RatePerSecond: int32Ptr(k.RatePerSecond), Burst: int32Ptr(k.Burst),
			CreatedBy: k.CreatedBy,
		})
		if err != nil {
			return err
		}
		out = toApiKey(row)
		return q.ApiKeyAuditInsert(ctx, apiKeyAudit(audit(out)))
	})
	if err != nil {
		return voucher.ApiKey{}, mapError(err)
	}
	return out, nil
}

// RevokeApiKey revokes a key and records it in one transaction; a key
// revoked already is read and returned unchanged. Errors: NOT_FOUND.
func (s *Store) RevokeApiKey(ctx context.Context, id int64, audit func(voucher.ApiKey) voucher.ApiKeyAuditEvent) (voucher.ApiKey, error) {
	var out voucher.ApiKey
	err := s.withTx(ctx, pgx.TxOptions{}, func(q *db.Queries) error {
		row, err := q.ApiKeyRevoke(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			row, err = q.ApiKeyGet(ctx, id)
			if errors.Is(err, pgx.ErrNoRows) {
				return voucher.Errorf(voucher.NotFound, "no API key with id %d", id)
			}
			out = toApiKey(row)
			return err
		}
		if err != nil {
			return err
		}
		out = toApiKey(row)
		return q.ApiKeyAuditInsert(ctx, apiKeyAudit(audit(out)))
	})
	if err != nil {
		return voucher.ApiKey{}, mapError(err)
	}
	return out, nil
}

// ApiKeys lists up to limit keys, newest first.
func (s *Store) ApiKeys(ctx context.Context, limit int) ([]voucher.ApiKey, error) {
	rows, err := s.q.ApiKeyList(ctx, limit32(limit))
	if err != nil {
		return nil, mapError(err)
	}
	return toApiKeys(rows), nil
}

// UsableApiKeys lists the keys neither revoked nor expired.
func (s *Store) UsableApiKeys(ctx context.Context) ([]voucher.ApiKey, error) {
	rows, err := s.q.ApiKeyListUsable(ctx)
	if err != nil {
		return nil, mapError(err)
	}
	return toApiKeys(rows), nil
}

// TouchApiKey sets lastUsedAt unless it was set within the last minute.
func (s *Store) TouchApiKey(ctx context.Context, id int64) error {
	return mapError(s.q.ApiKeyTouch(ctx, id))
}

// ApiKeyAudit returns the latest creations and revocations, newest first.
func (s *Store) ApiKeyAudit(ctx context.Context, limit int) ([]voucher.ApiKeyAuditEvent, error) {
	rows, err := s.q.ApiKeyAuditListLatest(ctx, limit32(limit))
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]voucher.ApiKeyAuditEvent, len(rows))
	for i, r := range rows {
		out[i] = voucher.ApiKeyAuditEvent{
			KeyID: r.KeyID, KeyName: r.KeyName, Actor: r.Actor, ActorRole: voucher.Role(r.ActorRole),
			Action: r.Action, Detail: r.Detail, At: r.OccurredAt,
		}
	}
	return out, nil
}

func apiKeyAudit(e voucher.ApiKeyAuditEvent) db.ApiKeyAuditInsertParams {
	return db.ApiKeyAuditInsertParams{
		KeyID: e.KeyID, KeyName: e.KeyName, Actor: e.Actor, ActorRole: string(e.ActorRole),
		Action: e.Action, Detail: e.Detail,
	}
}

func toApiKeys(rows []db.ApiKey) []voucher.ApiKey {
	out := make([]voucher.ApiKey, len(rows))
	for i, r := range rows {
		out[i] = toApiKey(r)
	}
	return out
}

func toApiKey(r db.ApiKey) voucher.ApiKey {
	return voucher.ApiKey{
		ID: r.ID, Name: r.Name, Role: voucher.Role(r.Role), Prefix: r.Prefix, Hash: r.SecretHash,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, RevokedAt: r.RevokedAt, LastUsedAt: r.LastUsedAt,
		RatePerSecond: intPtr(r.RatePerSecond), Burst: intPtr(r.Burst), CreatedBy: r.CreatedBy,
	}
}

// int32Ptr narrows a rate or burst, bounded by NewApiKey.Validate.
func int32Ptr(n *int) *int32 {
	if n == nil {
		return nil
	}
	v := limit32(*n)
	return &v
}

func intPtr(n *int32) *int {
	if n == nil {
		return nil
	}
	v := int(*n)
	return &v
}
