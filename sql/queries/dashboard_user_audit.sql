-- name: DashboardUserAuditInsert :exec
INSERT INTO dashboard_user_audit (user_email, actor, actor_role, action, detail)
VALUES ($1, $2, $3, $4, $5);

-- name: DashboardUserAuditListLatest :many
SELECT * FROM dashboard_user_audit
ORDER BY id DESC
LIMIT $1;
