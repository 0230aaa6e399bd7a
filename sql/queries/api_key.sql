-- name: ApiKeyInsert :one
INSERT INTO api_key (name, role, prefix, secret_hash, expires_at, rate_per_second, burst, created_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING *;

-- name: ApiKeyRevoke :one
-- Revokes a key once: a key revoked already keeps its first revokedAt.
UPDATE api_key SET revoked_at = clock_timestamp()
WHERE id = $1 AND revoked_at IS NULL
RETURNING *;

-- name: ApiKeyGet :one
SELECT * FROM api_key WHERE id = $1;

-- name: ApiKeyList :many
SELECT * FROM api_key ORDER BY id DESC LIMIT $1;

-- name: ApiKeyListUsable :many
-- The keys a server may accept: not revoked, not expired by the
-- database's clock (the server checks expiry again on each request).
SELECT * FROM api_key
WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > clock_timestamp())
ORDER BY id;

-- name: ApiKeyTouch :exec
-- lastUsedAt, at most once a minute per key whatever the servers' number.
UPDATE api_key SET last_used_at = clock_timestamp()
WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < clock_timestamp() - interval '1 minute');

-- name: ApiKeyAuditInsert :exec
INSERT INTO api_key_audit (key_id, key_name, actor, actor_role, action, detail)
VALUES ($1, $2, $3, $4, $5, $6);

-- name: ApiKeyAuditListLatest :many
SELECT * FROM api_key_audit ORDER BY id DESC LIMIT $1;
