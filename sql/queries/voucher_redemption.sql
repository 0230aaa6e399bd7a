-- Taking a use writes, in every path, in one lock order: the order's row
-- (voucher_redemption), the customer's count (voucher_customer), the event
-- (reservation_event), then the voucher's hot row (voucher) last, so its
-- lock is held only for its update and the commit. A batch takes each set
-- in a fixed order, so two batches never wait on each other in a cycle.
-- The two writers, one per rule (internal/postgres/reserve.go): takeUses,
-- whose statements check the rules by the database's clock (a reserve, or a
-- batch of flash winners; no row back: refused), and recordUses, which
-- writes what the gate decided whatever the clock (the Kafka consumer's
-- events), the CHECK constraints still bounding every count. A batch
-- statement that cannot take every row it was given tells the caller, which
-- rolls back and writes those one by one, so every refusal gets its own
-- exact answer.

-- name: VoucherRedemptionGetByOrderID :one
SELECT * FROM voucher_redemption WHERE order_id = $1;

-- VoucherRedemptionConfirm confirms a live reservation that has not expired.
-- code is the one the reservation was made with: a campaign code, else the
-- voucher's own.
-- name: VoucherRedemptionConfirm :one
UPDATE voucher_redemption
SET status = 'CONFIRMED', confirmed_at = clock_timestamp()
WHERE order_id = $1 AND coalesce(campaign_code, voucher_code) = sqlc.arg(code)::text AND status = 'RESERVED' AND expires_at > now()
RETURNING *;

-- VoucherRedemptionRelease releases a live reservation; the status condition
-- makes a second release (or a racing expiry) change nothing.
-- name: VoucherRedemptionRelease :one
UPDATE voucher_redemption
SET status = 'RELEASED', released_at = clock_timestamp()
WHERE order_id = $1 AND coalesce(campaign_code, voucher_code) = sqlc.arg(code)::text AND status = 'RESERVED'
RETURNING *;

-- VoucherRedemptionRollBack ends a confirmed reservation (a refund, an
-- order cancelled after payment); the status condition makes a second
-- rollback change nothing. reason is NULL when none was given.
-- name: VoucherRedemptionRollBack :one
UPDATE voucher_redemption
SET status = 'ROLLED_BACK', rolled_back_at = clock_timestamp(), rollback_reason = sqlc.narg(reason)
WHERE order_id = $1 AND coalesce(campaign_code, voucher_code) = sqlc.arg(code)::text AND status = 'CONFIRMED'
RETURNING *;

-- VoucherRedemptionExpire releases a reservation only if it is still live and
-- past its deadline, so two sweeping instances never release it twice.
-- name: VoucherRedemptionExpire :one
UPDATE voucher_redemption
SET status = 'RELEASED', released_at = clock_timestamp()
WHERE order_id = $1 AND status = 'RESERVED' AND expires_at <= now()
RETURNING *;

-- VoucherRedemptionExpireDue releases up to n reservations past their
-- deadline at once (the expiry sweep of the database and sync paths). SKIP
-- LOCKED: rows another sweep, a confirm or a release holds are left to it,
-- so any number of instances sweep at once and each row is released once.
-- name: VoucherRedemptionExpireDue :many
WITH due AS (
    SELECT order_id FROM voucher_redemption
    WHERE status = 'RESERVED' AND expires_at <= now()
    ORDER BY expires_at
    LIMIT sqlc.arg(n)
    FOR UPDATE SKIP LOCKED
)
UPDATE voucher_redemption r
SET status = 'RELEASED', released_at = clock_timestamp()
FROM due
WHERE r.order_id = due.order_id AND r.status = 'RESERVED'
RETURNING r.*;

-- name: VoucherRedemptionListLive :many
SELECT order_id, customer_id, order_amount FROM voucher_redemption
WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED');

-- name: VoucherRedemptionListRecent :many
SELECT * FROM voucher_redemption
WHERE voucher_code = $1
ORDER BY created_at DESC
LIMIT $2;

-- VoucherRedemptionGetByOrderIDs reads the rows of several orders at once
-- (the coalesced lookups of Store.Reservation).
-- name: VoucherRedemptionGetByOrderIDs :many
SELECT * FROM voucher_redemption WHERE order_id = ANY(sqlc.arg(order_ids)::text[]);

-- VoucherRedemptionClaimEligible claims the orderIds the voucher's terms
-- admit by the database's clock (window, minimum) for a batch of reserves,
-- each with the discount the domain reckoned for it (Voucher.DiscountFor);
-- an order already held, or not eligible, gets no row back. created_ms[i]
-- is the reservation's createdAt (Unix ms) when the flash gate counted its
-- use in that moment's periods (period limits), so the database counts and
-- gives it back in the same period; 0: the database's now(). The rows are
-- numbered (position 0 until then) by VoucherUsesTake, which takes their
-- uses under the voucher row's lock.
-- name: VoucherRedemptionClaimEligible :many
INSERT INTO voucher_redemption (order_id, voucher_code, customer_id, order_amount, discount_amount, status, created_at, expires_at, position)
SELECT o.order_id, v.code, o.customer_id, o.order_amount, o.discount_amount, 'RESERVED', o.created_at,
       o.created_at + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond', 0
FROM (SELECT x.*, CASE WHEN x.created_ms > 0 THEN to_timestamp(x.created_ms::double precision / 1000) ELSE now() END AS created_at
      FROM (SELECT unnest(sqlc.arg(order_ids)::text[]) AS order_id,
                   unnest(sqlc.arg(customer_ids)::bigint[]) AS customer_id,
                   unnest(sqlc.arg(order_amounts)::bigint[]) AS order_amount,
                   unnest(sqlc.arg(discount_amounts)::bigint[]) AS discount_amount,
                   unnest(sqlc.arg(created_ms)::bigint[]) AS created_ms) AS x) AS o
JOIN voucher v ON v.code = sqlc.arg(code)
WHERE now() BETWEEN v.starts_at AND v.ends_at
  AND o.order_amount >= v.min_order_amount
ORDER BY o.order_id
ON CONFLICT (order_id) DO NOTHING
RETURNING *;

-- VoucherRedemptionInsertMany makes the rows of a batch of reserved events
-- (the consumer's batch) with the times the gate gave them, only for orders
-- the database does not hold; the events of the others are applied one by
-- one afterwards (they change nothing, or are refused). positions[i] is the
-- place the gate gave the order; 0 (an event published before the gate
-- kept them) leaves the row to VoucherUsesRecord to number.
-- name: VoucherRedemptionInsertMany :many
INSERT INTO voucher_redemption (order_id, voucher_code, customer_id, order_amount, discount_amount, status, created_at, expires_at, position)
SELECT o.order_id, sqlc.arg(code), o.customer_id, o.order_amount, o.discount_amount, 'RESERVED', o.created_at, o.expires_at, o.position
FROM (SELECT unnest(sqlc.arg(order_ids)::text[]) AS order_id,
             unnest(sqlc.arg(customer_ids)::bigint[]) AS customer_id,
             unnest(sqlc.arg(order_amounts)::bigint[]) AS order_amount,
             unnest(sqlc.arg(discount_amounts)::bigint[]) AS discount_amount,
             unnest(sqlc.arg(created_ats)::timestamptz[]) AS created_at,
             unnest(sqlc.arg(expires_ats)::timestamptz[]) AS expires_at,
             unnest(sqlc.arg(positions)::integer[]) AS position) AS o
ORDER BY o.order_id
ON CONFLICT (order_id) DO NOTHING
RETURNING order_id, customer_id, discount_amount, position;

-- The Kafka write path's consumer applies the gate's decisions to the
-- database (internal/postgres/events.go). The gate decided the window and
-- the expiry already, so none of these checks the clock; the CHECK
-- constraints still bound every count.

-- VoucherRedemptionGetForUpdate locks an order's row for the event that
-- applies to it.
-- name: VoucherRedemptionGetForUpdate :one
SELECT * FROM voucher_redemption WHERE order_id = $1 FOR UPDATE;

-- VoucherRedemptionConfirmDecided confirms a live reservation even past
-- expires_at: the gate confirmed it in time.
-- name: VoucherRedemptionConfirmDecided :one
UPDATE voucher_redemption
SET status = 'CONFIRMED', confirmed_at = sqlc.arg(decided_at)
WHERE order_id = $1 AND status = 'RESERVED'
RETURNING *;

-- name: VoucherRedemptionReleaseDecided :one
UPDATE voucher_redemption
SET status = 'RELEASED', released_at = sqlc.arg(decided_at)
WHERE order_id = $1 AND status = 'RESERVED'
RETURNING *;

-- VoucherRedemptionListDueWithFlash lists reservations past their deadline,
-- either those a flash voucher's gate decides first (gate_decides: a flash
-- voucher's own, not a flash campaign's) or the others.
-- name: VoucherRedemptionListDueWithFlash :many
SELECT sqlc.embed(voucher_redemption), v.flash
FROM voucher_redemption
JOIN voucher v ON v.code = voucher_redemption.voucher_code
WHERE voucher_redemption.status = 'RESERVED' AND voucher_redemption.expires_at <= now()
  AND (v.flash AND voucher_redemption.campaign_code IS NULL) = sqlc.arg(gate_decides)::boolean
ORDER BY voucher_redemption.expires_at
LIMIT sqlc.arg(n);

-- VoucherRedemptionListLiveWithTimes lists a voucher's live orders with
-- their states and times, which a gate in kafka mode holds.
-- name: VoucherRedemptionListLiveWithTimes :many
SELECT order_id, customer_id, order_amount, discount_amount, status, created_at, expires_at, position FROM voucher_redemption
WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED');

-- VoucherRedemptionListAllWithTimes lists every order of a voucher,
-- released ones too, with their states and times: a gate in kafka mode
-- answers retries, confirms and releases of all of them without reading the
-- database.
-- name: VoucherRedemptionListAllWithTimes :many
SELECT order_id, customer_id, order_amount, discount_amount, status, created_at, expires_at, position FROM voucher_redemption
WHERE voucher_code = $1;
