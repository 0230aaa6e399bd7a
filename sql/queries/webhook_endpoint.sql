-- name: WebhookEndpointInsert :one
INSERT INTO webhook_endpoint (url, events, description, secret)
VALUES ($1, $2, $3, $4)
RETURNING *;

-- name: WebhookEndpointGet :one
SELECT * FROM webhook_endpoint WHERE id = $1;

-- name: WebhookEndpointList :many
SELECT * FROM webhook_endpoint ORDER BY id DESC LIMIT $1;

-- WebhookEndpointUpdate changes what is given; enabling clears the
-- server's reason and the failing streak.
-- name: WebhookEndpointUpdate :one
UPDATE webhook_endpoint
SET url = coalesce(sqlc.narg(url), url),
    events = coalesce(sqlc.narg(events)::text[], events),
    description = coalesce(sqlc.narg(description), description),
    enabled = coalesce(sqlc.narg(enabled), enabled),
    disabled_reason = CASE WHEN sqlc.narg(enabled)::boolean IS NOT NULL THEN NULL ELSE disabled_reason END,
    failing_since = CASE WHEN sqlc.narg(enabled)::boolean THEN NULL ELSE failing_since END
WHERE id = sqlc.arg(id)
RETURNING *;

-- WebhookEndpointRotate signs with a new secret, and with the old one too
-- until until.
-- name: WebhookEndpointRotate :one
UPDATE webhook_endpoint
SET previous_secret = secret, previous_secret_until = sqlc.arg(until), secret = sqlc.arg(secret)
WHERE id = sqlc.arg(id)
RETURNING *;

-- name: WebhookEndpointDelete :one
DELETE FROM webhook_endpoint WHERE id = $1 RETURNING *;

-- WebhookEndpointSucceeded ends an endpoint's failing streak.
-- name: WebhookEndpointSucceeded :exec
UPDATE webhook_endpoint SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL;

-- WebhookEndpointFailed records a failed attempt claimed at claimed_at
-- (the database's clock): the streak begins then unless it began before.
-- The endpoint is disabled with reason (over) when it has failed since
-- more than window_seconds, or when the attempt was a delivery's last
-- (spent_since: its first claim; its retry window is over) and the streak
-- began at or before that first claim (no success since). just_disabled:
-- this call disabled it.
-- name: WebhookEndpointFailed :one
UPDATE webhook_endpoint w
SET failing_since = old.streak,
    enabled = w.enabled AND NOT old.over,
    disabled_reason = CASE WHEN w.enabled AND old.over THEN sqlc.arg(reason)::text ELSE w.disabled_reason END
FROM (
    SELECT old_id, was_enabled, streak,
           streak <= now() - make_interval(secs => sqlc.arg(window_seconds)::float8)
               OR coalesce(streak <= sqlc.narg(spent_since)::timestamptz, false) AS over
    FROM (SELECT o.id AS old_id, o.enabled AS was_enabled, coalesce(o.failing_since, sqlc.arg(claimed_at)::timestamptz) AS streak
          FROM webhook_endpoint o WHERE o.id = sqlc.arg(endpoint_id) FOR UPDATE) locked
) old
WHERE w.id = old.old_id
RETURNING w.id, w.url, (old.was_enabled AND NOT w.enabled)::boolean AS just_disabled;
