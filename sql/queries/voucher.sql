-- name: VoucherInsert :one
INSERT INTO voucher (code, discount_type, discount_amount, discount_percent, max_discount_amount, currency,
                     budget_amount, min_order_amount, total_limit, per_user_limit, starts_at, ends_at, flash,
                     time_zone, period_limits, eligible_segments, applies_to_skus, applies_to_categories)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
ON CONFLICT (code) DO NOTHING
RETURNING *;

-- name: VoucherGetByCode :one
SELECT * FROM voucher WHERE code = $1;

-- The lists leave out campaigns' voucher rows (code '~C<id>'): a campaign
-- is listed by the campaigns query.
-- name: VoucherListFirst :many
SELECT * FROM voucher
WHERE code NOT LIKE '~%'
ORDER BY created_at DESC, code DESC
LIMIT $1;

-- name: VoucherListAfter :many
SELECT * FROM voucher
WHERE (created_at, code) < (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_code)::text)
  AND code NOT LIKE '~%'
ORDER BY created_at DESC, code DESC
LIMIT $1;

-- name: VoucherListFlash :many
SELECT * FROM voucher WHERE flash ORDER BY code;

-- VoucherUsesTake holds n uses (a reserve, or a batch of them) with the sum
-- of their discounts if that many are left, the sum keeps budget_used within
-- max_money (voucher.MaxMoney), the budget (if any) covers it and the window
-- is open by the database's clock. No row back means not: sold out, too
-- large a sum, over budget or outside the window (a batch is then written
-- one by one, so the uses left go to some of it and the others hear their
-- refusal). The sums are compared as differences, which cannot overflow
-- bigint whatever a row stored before the bound holds. The same statement
-- numbers the orders' rows (order_ids, n of them, claimed before in this
-- transaction) in the order given, after the last number the voucher gave:
-- under the row's lock, so concurrent writers get consecutive numbers and
-- never the same one. It returns the last number given.
-- name: VoucherUsesTake :one
WITH taken AS (
    UPDATE voucher
    SET used_count = used_count + sqlc.arg(n)::integer, reserved_count = reserved_count + sqlc.arg(n)::integer,
        budget_used = budget_used + sqlc.arg(discount)::bigint,
        admitted_count = admitted_count + sqlc.arg(n)::integer
    WHERE code = sqlc.arg(code)
      AND used_count + sqlc.arg(n)::integer <= total_limit
      AND sqlc.arg(discount)::bigint <= sqlc.arg(max_money)::bigint - budget_used
      AND (budget_amount IS NULL OR sqlc.arg(discount)::bigint <= budget_amount - budget_used)
      AND now() BETWEEN starts_at AND ends_at
    RETURNING admitted_count
), numbered AS (
    UPDATE voucher_redemption r
    SET position = taken.admitted_count - sqlc.arg(n)::integer + o.ord::integer
    FROM taken, unnest(sqlc.arg(order_ids)::text[]) WITH ORDINALITY AS o(order_id, ord)
    WHERE r.order_id = o.order_id
)
SELECT admitted_count FROM taken;

-- VoucherUsesRecord counts n uses held that the gate already took (the
-- Kafka consumer's event or batch), whatever the clock; past the total
-- limit the CHECK voucher_used_within_limit fires. No row back: the
-- discounts would take budget_used past max_money (voucher.MaxMoney), which
-- the gate refuses first; the consumer treats it as a refusal, never as a
-- fault to retry. The rows came with the places the gate gave them;
-- admitted_count is raised to at least the highest (a reloaded gate
-- continues from it), and the rows that came without one (unnumbered, in
-- that order) are numbered after it. It returns the last number given.
-- name: VoucherUsesRecord :one
WITH counted AS (
    UPDATE voucher
    SET used_count = used_count + sqlc.arg(n)::integer, reserved_count = reserved_count + sqlc.arg(n)::integer,
        budget_used = budget_used + sqlc.arg(discount)::bigint,
        admitted_count = greatest(admitted_count, sqlc.arg(highest)::integer) + coalesce(cardinality(sqlc.arg(unnumbered)::text[]), 0)
    WHERE code = sqlc.arg(code)
      AND sqlc.arg(discount)::bigint <= sqlc.arg(max_money)::bigint - budget_used
    RETURNING admitted_count
), numbered AS (
    UPDATE voucher_redemption r
    SET position = counted.admitted_count - coalesce(cardinality(sqlc.arg(unnumbered)::text[]), 0) + o.ord::integer
    FROM counted, unnest(sqlc.arg(unnumbered)::text[]) WITH ORDINALITY AS o(order_id, ord)
    WHERE r.order_id = o.order_id
)
SELECT admitted_count FROM counted;

-- VoucherUsesGiveBack gives uses back at once with the sum of their
-- discounts: released reserved ones (released, expired) and rolled-back
-- confirmed ones, which are counted as rolled back.
-- name: VoucherUsesGiveBack :exec
UPDATE voucher
SET used_count = used_count - sqlc.arg(released)::integer - sqlc.arg(rolled_back)::integer,
    reserved_count = reserved_count - sqlc.arg(released)::integer,
    confirmed_count = confirmed_count - sqlc.arg(rolled_back)::integer,
    rolled_back_count = rolled_back_count + sqlc.arg(rolled_back)::integer,
    budget_used = budget_used - sqlc.arg(discount)::bigint
WHERE code = sqlc.arg(code);

-- name: VoucherUseConfirm :exec
UPDATE voucher
SET reserved_count = reserved_count - 1, confirmed_count = confirmed_count + 1
WHERE code = $1;

-- VoucherGetForReserve reads a voucher with the database's clock, which
-- decides the window and stamps the reservation.
-- name: VoucherGetForReserve :one
SELECT sqlc.embed(voucher), now()::timestamptz AS db_now
FROM voucher WHERE code = $1;

-- VoucherClock reads the database's clock (the transaction's start): a gate
-- in kafka mode decides the window on its own clock shifted by the offset
-- between the two, measured at each load.
-- name: VoucherClock :one
SELECT now()::timestamptz AS now;
