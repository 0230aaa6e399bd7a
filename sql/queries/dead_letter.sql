-- name: DeadLetterInsert :exec
INSERT INTO dead_letter (event_id, topic, "partition", "offset", voucher_code, order_id, kind, reason, payload)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT ON CONSTRAINT dead_letter_once DO NOTHING;

-- name: DeadLetterListLatest :many
SELECT * FROM dead_letter
ORDER BY id DESC
LIMIT $1;


-- DeadLetterListOpen lists the dead letters no operator has applied again
-- or discarded, newest first.
-- name: DeadLetterListOpen :many
SELECT * FROM dead_letter
WHERE resolution IS NULL
ORDER BY id DESC
LIMIT $1;

-- name: DeadLetterCountOpen :one
SELECT count(*) FROM dead_letter WHERE resolution IS NULL;

-- name: DeadLetterGet :one
SELECT * FROM dead_letter WHERE id = $1;

-- DeadLetterResolve closes an open dead letter; no row back means it was
-- closed already (or there is none).
-- name: DeadLetterResolve :one
UPDATE dead_letter SET resolution = $2, resolved_at = clock_timestamp(), resolved_by = $3
WHERE id = $1 AND resolution IS NULL
RETURNING *;

-- DeadLetterRefusedAgain keeps an open dead letter with the reason its
-- latest "apply again" was refused for.
-- name: DeadLetterRefusedAgain :one
UPDATE dead_letter SET reason = $2, retries = retries + 1
WHERE id = $1 AND resolution IS NULL
RETURNING *;
