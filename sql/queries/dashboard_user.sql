-- DashboardUserInsert adds a user; no row back means the email is taken.
-- name: DashboardUserInsert :one
INSERT INTO dashboard_user (email, name, role, password_hash)
VALUES ($1, $2, $3, $4)
ON CONFLICT (email) DO NOTHING
RETURNING *;

-- name: DashboardUserGetByEmail :one
SELECT * FROM dashboard_user WHERE email = $1;

-- name: DashboardUserGetByID :one
SELECT * FROM dashboard_user WHERE id = $1;

-- DashboardUserList lists a page of the users whose email contains search
-- (any case; '' matches every one): enabled first, admins first, then by
-- email, which is unique, so the pages never overlap.
-- name: DashboardUserList :many
SELECT * FROM dashboard_user
WHERE strpos(lower(email), lower(sqlc.arg(search)::text)) > 0
ORDER BY disabled_at IS NOT NULL, role = 'admin' DESC, email
LIMIT sqlc.arg(row_limit) OFFSET sqlc.arg(row_offset);

-- DashboardUserLockAdmins serializes the changes that could leave no admin
-- (a role change, a disable) until the transaction ends.
-- name: DashboardUserLockAdmins :exec
SELECT pg_advisory_xact_lock(hashtextextended('dashboard_user admins', 0));

-- DashboardUserCountAdmins counts the admins who can still sign in.
-- name: DashboardUserCountAdmins :one
SELECT count(*) FROM dashboard_user WHERE role = 'admin' AND disabled_at IS NULL;

-- DashboardUserSetRole changes a user's role and says what it was.
-- name: DashboardUserSetRole :one
UPDATE dashboard_user SET role = sqlc.arg(role)
FROM (SELECT u.id, u.role AS old_role FROM dashboard_user AS u WHERE u.email = sqlc.arg(email) FOR UPDATE) AS before
WHERE dashboard_user.id = before.id
RETURNING dashboard_user.id, dashboard_user.email, before.old_role;

-- DashboardUserDisable disables a user; no row back means no such user
-- (one disabled already is returned as it is).
-- name: DashboardUserDisable :one
UPDATE dashboard_user SET disabled_at = coalesce(disabled_at, clock_timestamp())
WHERE email = $1
RETURNING *;

-- name: DashboardUserSetPassword :exec
UPDATE dashboard_user SET password_hash = $2 WHERE id = $1;

-- DashboardUserEnable enables a disabled user again; no row back means no
-- such user. was_disabled says whether it changed anything.
-- name: DashboardUserEnable :one
UPDATE dashboard_user SET disabled_at = NULL
FROM (SELECT u.id, (u.disabled_at IS NOT NULL)::boolean AS was_disabled FROM dashboard_user AS u WHERE u.email = sqlc.arg(email) FOR UPDATE) AS before
WHERE dashboard_user.id = before.id
RETURNING dashboard_user.id, before.was_disabled::boolean AS was_disabled;
