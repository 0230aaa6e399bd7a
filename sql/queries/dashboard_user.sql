-- DashboardUserInsert adds a user; no row back means the email is taken.
-- name: DashboardUserInsert :one
INSERT INTO dashboard_user (email, name, role, password_hash)
VALUES ($1, $2, $3, $4)
ON CONFLICT (email) DO NOTHING
RETURNING *;

-- name: DashboardUserGetByEmail :one
SELECT * FROM dashboard_user WHERE email = $1;
