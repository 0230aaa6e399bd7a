-- name: DeadLetterInsert :exec
INSERT INTO dead_letter (event_id, topic, "partition", "offset", voucher_code, order_id, kind, reason, payload)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT ON CONSTRAINT dead_letter_once DO NOTHING;

-- name: DeadLetterListLatest :many
SELECT * FROM dead_letter
ORDER BY id DESC
LIMIT $1;

-- name: DeadLetterCount :one
SELECT count(*) FROM dead_letter;
