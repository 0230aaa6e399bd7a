-- name: WebhookAuditInsert :exec
INSERT INTO webhook_audit (endpoint_id, url, actor, actor_role, action, detail)
VALUES ($1, $2, $3, $4, $5, $6);

-- name: WebhookAuditList :many
SELECT * FROM webhook_audit ORDER BY id DESC LIMIT $1;
