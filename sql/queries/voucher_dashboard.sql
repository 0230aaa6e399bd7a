-- VoucherSearch (the dashboard's list) lists a page of vouchers filtered by
-- a piece of the code (lower case, LIKE-escaped by the caller), a state and
-- flash, in one of the list's orders: "live" (live first, then sold out,
-- scheduled, ended; the default), "start", "state" (in the order a sale goes
-- through them) or "usage" (the share of the total used), each ascending or
-- descending; newest first among equals.
-- name: VoucherSearch :many
SELECT * FROM voucher
WHERE code NOT LIKE '~%' -- a campaign's voucher row: the campaign is listed instead
  AND (sqlc.arg(search)::text = '' OR lower(code) LIKE '%' || sqlc.arg(search)::text || '%')
  AND (sqlc.arg(state)::text = '' OR voucher_state(starts_at, ends_at, used_count, total_limit) = sqlc.arg(state)::text)
  AND (NOT sqlc.arg(flash_only)::boolean OR flash)
ORDER BY
  CASE WHEN sqlc.arg(sort)::text = 'live' THEN
    array_position(ARRAY['live', 'sold-out', 'scheduled', 'ended'], voucher_state(starts_at, ends_at, used_count, total_limit)) END,
  CASE WHEN sqlc.arg(sort)::text = 'start' AND NOT sqlc.arg(descending)::boolean THEN starts_at END ASC,
  CASE WHEN sqlc.arg(sort)::text = 'start' AND sqlc.arg(descending)::boolean THEN starts_at END DESC,
  CASE WHEN sqlc.arg(sort)::text = 'state' AND NOT sqlc.arg(descending)::boolean THEN
    array_position(ARRAY['scheduled', 'live', 'sold-out', 'ended'], voucher_state(starts_at, ends_at, used_count, total_limit)) END ASC,
  CASE WHEN sqlc.arg(sort)::text = 'state' AND sqlc.arg(descending)::boolean THEN
    array_position(ARRAY['scheduled', 'live', 'sold-out', 'ended'], voucher_state(starts_at, ends_at, used_count, total_limit)) END DESC,
  CASE WHEN sqlc.arg(sort)::text = 'usage' AND NOT sqlc.arg(descending)::boolean THEN used_count::float8 / total_limit END ASC,
  CASE WHEN sqlc.arg(sort)::text = 'usage' AND sqlc.arg(descending)::boolean THEN used_count::float8 / total_limit END DESC,
  created_at DESC, code DESC
LIMIT sqlc.arg(max_rows) OFFSET sqlc.arg(skip_rows);

-- VoucherSearchCount counts what VoucherSearch pages through.
-- name: VoucherSearchCount :one
SELECT count(*) FROM voucher
WHERE code NOT LIKE '~%' -- a campaign's voucher row: the campaign is listed instead
  AND (sqlc.arg(search)::text = '' OR lower(code) LIKE '%' || sqlc.arg(search)::text || '%')
  AND (sqlc.arg(state)::text = '' OR voucher_state(starts_at, ends_at, used_count, total_limit) = sqlc.arg(state)::text)
  AND (NOT sqlc.arg(flash_only)::boolean OR flash);

-- VoucherUpdateBeforeStart changes every term of a voucher whose window has
-- not opened by the database's clock and that holds no use; no row back
-- means it is unknown or has started.
-- name: VoucherUpdateBeforeStart :one
UPDATE voucher
SET code = sqlc.arg(new_code),
    discount_type = sqlc.arg(discount_type),
    discount_amount = sqlc.arg(discount_amount),
    discount_percent = sqlc.narg(discount_percent),
    max_discount_amount = sqlc.narg(max_discount_amount),
    currency = sqlc.arg(currency),
    budget_amount = sqlc.narg(budget_amount),
    min_order_amount = sqlc.arg(min_order_amount),
    total_limit = sqlc.arg(total_limit),
    per_user_limit = sqlc.arg(per_user_limit),
    starts_at = sqlc.arg(starts_at),
    ends_at = sqlc.arg(ends_at),
    flash = sqlc.arg(flash),
    time_zone = sqlc.arg(time_zone),
    period_limits = sqlc.arg(period_limits),
    eligible_segments = sqlc.arg(eligible_segments),
    applies_to_skus = sqlc.narg(applies_to_skus),
    applies_to_categories = sqlc.narg(applies_to_categories)
WHERE code = sqlc.arg(code) AND starts_at > now() AND used_count = 0
RETURNING *;

-- VoucherEndNow closes the window of a live voucher now; no row back means
-- it is unknown, has not started or has ended.
-- name: VoucherEndNow :one
UPDATE voucher
SET ends_at = now()
WHERE code = $1 AND starts_at < now() AND ends_at > now()
RETURNING *;

-- VoucherRedemptionPage is a page of a voucher's reservations, newest first,
-- filtered by status ('' any) and customer (0 any), after a keyset cursor
-- (created_at, order_id) when after is set: the dashboard's list and, batch
-- by batch, its CSV export (voucher_redemption_voucher_idx serves it).
-- name: VoucherRedemptionPage :many
SELECT * FROM voucher_redemption
WHERE voucher_code = sqlc.arg(voucher_code)
  AND (sqlc.arg(status)::text = '' OR status = sqlc.arg(status)::text)
  AND (sqlc.arg(customer_id)::bigint = 0 OR customer_id = sqlc.arg(customer_id)::bigint)
  AND (NOT sqlc.arg(after)::boolean
       OR (created_at, order_id) < (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_order_id)::text))
ORDER BY created_at DESC, order_id DESC
LIMIT sqlc.arg(max_rows);

-- VoucherExtend raises a voucher's total or moves its end later, while its
-- window has not closed by the database's clock: the rules are the UPDATE's
-- own condition, so two extensions, or an extension and the reserves of a
-- sale, cannot both pass on a stale read. The total never goes below what is
-- held (used_count: RESERVED + CONFIRMED), nor below the old total for a
-- flash voucher; the end never moves earlier. No row back means it is
-- unknown or one of those refused; old_* are the values it replaced.
-- name: VoucherExtend :one
WITH old AS (
  SELECT o.code, o.total_limit, o.ends_at FROM voucher o WHERE o.code = sqlc.arg(code)::text FOR UPDATE
)
UPDATE voucher v
SET total_limit = sqlc.arg(total_limit)::integer,
    ends_at = sqlc.arg(ends_at)::timestamptz
FROM old
WHERE v.code = old.code
  AND v.ends_at > now()
  AND sqlc.arg(ends_at)::timestamptz >= v.ends_at
  AND sqlc.arg(total_limit)::integer >= v.used_count
  AND (NOT v.flash OR sqlc.arg(total_limit)::integer >= v.total_limit)
RETURNING old.total_limit AS old_total_limit, old.ends_at AS old_ends_at;
