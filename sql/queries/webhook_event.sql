-- WebhookEventDispatch numbers up to max_events committed events that have
-- no sequence yet, in id order, each voucher code's from its last number
-- (webhook_sequence, locked in code order), and makes a delivery of each to
-- every enabled endpoint that takes its type. Instances dispatching at once
-- take disjoint events (SKIP LOCKED) and queue on the codes' counters, so a
-- code's numbers have no gap and no repeat. Test events (sequence 0) are
-- never here.
-- name: WebhookEventDispatch :one
WITH pending AS MATERIALIZED (
    SELECT id, voucher_code FROM webhook_event
    WHERE sequence IS NULL
    ORDER BY id
    LIMIT sqlc.arg(max_events)
    FOR UPDATE SKIP LOCKED
), ranked AS (
    SELECT id, voucher_code,
           row_number() OVER (PARTITION BY voucher_code ORDER BY id) AS n,
           count(*) OVER (PARTITION BY voucher_code) AS total
    FROM pending
), counted AS (
    SELECT DISTINCT voucher_code, total FROM ranked
), bumped AS (
    INSERT INTO webhook_sequence AS s (voucher_code, last_sequence)
    SELECT voucher_code, total FROM counted ORDER BY voucher_code
    ON CONFLICT (voucher_code) DO UPDATE SET last_sequence = s.last_sequence + EXCLUDED.last_sequence
    RETURNING voucher_code, last_sequence
), numbered AS (
    UPDATE webhook_event e
    SET sequence = b.last_sequence - r.total + r.n
    FROM ranked r JOIN bumped b ON b.voucher_code = r.voucher_code
    WHERE e.id = r.id
    RETURNING e.id, e.type
), fanned AS (
    INSERT INTO webhook_delivery (endpoint_id, event_id)
    SELECT w.id, n.id
    FROM numbered n JOIN webhook_endpoint w ON w.enabled AND (n.type = ANY (w.events) OR '*' = ANY (w.events))
    ORDER BY n.id, w.id
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM numbered)::bigint AS events,
       (SELECT count(*) FROM fanned)::bigint AS deliveries;

-- WebhookEventInsertTest records a test event for one endpoint: no voucher,
-- sequence 0 (the dispatcher leaves it alone), and its delivery.
-- name: WebhookEventInsertTest :one
WITH ev AS (
    INSERT INTO webhook_event (voucher_code, sequence, type, data)
    VALUES (NULL, 0, 'webhook.test', jsonb_build_object('endpointId', sqlc.arg(endpoint_id)::bigint::text))
    RETURNING id
)
INSERT INTO webhook_delivery (endpoint_id, event_id)
SELECT sqlc.arg(endpoint_id)::bigint, ev.id FROM ev
RETURNING *;

-- name: WebhookEventListByVoucher :many
SELECT * FROM webhook_event
WHERE voucher_code = $1
ORDER BY id;

-- name: WebhookEventGet :one
SELECT * FROM webhook_event WHERE id = $1;
