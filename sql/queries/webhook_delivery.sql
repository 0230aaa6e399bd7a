-- WebhookDeliveryClaim takes up to max_deliveries due deliveries of enabled
-- endpoints and moves each past lease_seconds (its attempt's timeout and
-- more): the worker that took it attempts it; should that worker die, the
-- delivery is due again when the lease ends. Instances claiming at once
-- take disjoint rows (SKIP LOCKED).
-- name: WebhookDeliveryClaim :many
WITH due AS (
    SELECT d.id FROM webhook_delivery d
    JOIN webhook_endpoint w ON w.id = d.endpoint_id AND w.enabled
    WHERE d.status = 'PENDING' AND d.next_attempt_at <= now()
    ORDER BY d.next_attempt_at
    LIMIT sqlc.arg(max_deliveries)
    FOR UPDATE OF d SKIP LOCKED
)
UPDATE webhook_delivery d
SET attempts = d.attempts + 1,
    first_attempt_at = coalesce(d.first_attempt_at, now()),
    next_attempt_at = now() + make_interval(secs => sqlc.arg(lease_seconds)::float8)
FROM due, webhook_event e, webhook_endpoint w
WHERE d.id = due.id AND e.id = d.event_id AND w.id = d.endpoint_id
RETURNING d.id, d.attempts, d.created_at, coalesce(d.first_attempt_at, now())::timestamptz AS first_attempt_at, now()::timestamptz AS claimed_at,
          e.id AS event_id, e.voucher_code, e.sequence, e.type, e.data, e.created_at AS event_created_at,
          w.id AS endpoint_id, w.url, w.secret, w.previous_secret, w.previous_secret_until;

-- WebhookDeliveryFinish records an attempt's outcome: DELIVERED, PENDING
-- with its next attempt, or FAILED (retries spent).
-- name: WebhookDeliveryFinish :exec
UPDATE webhook_delivery
SET status = sqlc.arg(status), last_status_code = sqlc.narg(last_status_code), last_error = sqlc.narg(last_error),
    last_attempt_at = sqlc.arg(attempted_at), next_attempt_at = sqlc.arg(next_attempt_at)
WHERE id = sqlc.arg(id);

-- WebhookDeliveryResend makes one event's delivery to one endpoint due now,
-- with a new retry window; a delivery it never had is made.
-- name: WebhookDeliveryResend :one
INSERT INTO webhook_delivery (endpoint_id, event_id)
VALUES (sqlc.arg(endpoint_id), sqlc.arg(event_id))
ON CONFLICT (endpoint_id, event_id) DO UPDATE
SET status = 'PENDING', next_attempt_at = clock_timestamp(), created_at = clock_timestamp()
RETURNING *;

-- WebhookDeliveryPage lists an endpoint's deliveries newest first, after
-- the delivery id after (0: from the newest).
-- name: WebhookDeliveryPage :many
SELECT d.*, e.type AS event_type
FROM webhook_delivery d JOIN webhook_event e ON e.id = d.event_id
WHERE d.endpoint_id = sqlc.arg(endpoint_id) AND (sqlc.arg(after)::bigint = 0 OR d.id < sqlc.arg(after)::bigint)
ORDER BY d.id DESC
LIMIT sqlc.arg(max_rows);

-- name: WebhookDeliveryGet :one
SELECT d.*, e.type AS event_type
FROM webhook_delivery d JOIN webhook_event e ON e.id = d.event_id
WHERE d.id = $1;

-- WebhookDeliveryBacklog is the metrics' view: deliveries pending and the
-- age of the oldest, endpoints disabled by the server.
-- name: WebhookDeliveryBacklog :one
SELECT (SELECT count(*) FROM webhook_delivery WHERE status = 'PENDING')::bigint AS pending,
       coalesce((SELECT extract(epoch FROM clock_timestamp() - min(created_at)) FROM webhook_delivery WHERE status = 'PENDING'), 0)::float8 AS oldest_seconds,
       (SELECT count(*) FROM webhook_endpoint WHERE NOT enabled AND disabled_reason IS NOT NULL)::bigint AS disabled;
