-- name: DashboardPasswordLinkInsert :exec
INSERT INTO dashboard_password_link (token_hash, user_id, created_by, expires_at)
VALUES ($1, $2, $3, $4);

-- DashboardPasswordLinkDeleteOfUser drops a user's other links: only the
-- newest one works.
-- name: DashboardPasswordLinkDeleteOfUser :exec
DELETE FROM dashboard_password_link WHERE user_id = $1;

-- DashboardPasswordLinkGet reads a link that can still be used, with its
-- user (to show whose password it sets).
-- name: DashboardPasswordLinkGet :one
SELECT sqlc.embed(dashboard_user)
FROM dashboard_password_link
JOIN dashboard_user ON dashboard_user.id = dashboard_password_link.user_id
WHERE dashboard_password_link.token_hash = $1 AND dashboard_password_link.used_at IS NULL
  AND dashboard_password_link.expires_at > now() AND dashboard_user.disabled_at IS NULL;

-- DashboardPasswordLinkUse uses a link once: of two uses at the same
-- moment, one gets the row.
-- name: DashboardPasswordLinkUse :one
UPDATE dashboard_password_link SET used_at = clock_timestamp()
WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()
RETURNING user_id;
