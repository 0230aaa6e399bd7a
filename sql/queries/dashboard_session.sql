-- name: DashboardSessionInsert :exec
INSERT INTO dashboard_session (token_hash, user_id, csrf_token, expires_at)
VALUES ($1, $2, $3, $4);

-- DashboardSessionGet reads a live session and its user; an expired one,
-- or one of a disabled user, reads as none.
-- name: DashboardSessionGet :one
SELECT sqlc.embed(dashboard_session), sqlc.embed(dashboard_user)
FROM dashboard_session
JOIN dashboard_user ON dashboard_user.id = dashboard_session.user_id
WHERE dashboard_session.token_hash = $1 AND dashboard_session.expires_at > now()
  AND dashboard_user.disabled_at IS NULL;

-- name: DashboardSessionDelete :exec
DELETE FROM dashboard_session WHERE token_hash = $1;

-- DashboardSessionDeleteExpired keeps the table to live sessions; run at
-- each sign-in, it uses the index on expires_at.
-- name: DashboardSessionDeleteExpired :exec
DELETE FROM dashboard_session WHERE expires_at <= now();

-- DashboardSessionDeleteByUser ends every session of a user (disabled, or
-- a new password set).
-- name: DashboardSessionDeleteByUser :exec
DELETE FROM dashboard_session WHERE user_id = $1;
