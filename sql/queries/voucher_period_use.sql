-- VoucherPeriodUsesTake takes uses in the current periods of a voucher's
-- period limits for a reserve (or a batch) the database decides, in the
-- caller's transaction: one row per limit and period (and customer, for a
-- CUSTOMER limit; customer_id 0 for a VOUCHER one), made at its first use.
-- The conditional upsert decides under the row's lock, so concurrent
-- reserves never take more than max_uses in a period; a row that would pass
-- it is not returned (the caller rolls back). The limit is the voucher's
-- now (a scheduled voucher's may have changed since a row was made). The
-- rows are taken in key order, the order of every writer of several period
-- rows.
-- name: VoucherPeriodUsesTake :many
INSERT INTO voucher_period_use AS p (voucher_code, scope, period, period_start, customer_id, period_end, used_count, max_uses)
SELECT sqlc.arg(code)::text, t.scope, t.period, t.period_start, t.customer_id, t.period_end, t.uses, t.max_uses
FROM (SELECT unnest(sqlc.arg(scopes)::text[]) AS scope,
             unnest(sqlc.arg(periods)::text[]) AS period,
             unnest(sqlc.arg(period_starts)::timestamptz[]) AS period_start,
             unnest(sqlc.arg(customer_ids)::bigint[]) AS customer_id,
             unnest(sqlc.arg(period_ends)::timestamptz[]) AS period_end,
             unnest(sqlc.arg(uses)::integer[]) AS uses,
             unnest(sqlc.arg(max_uses)::integer[]) AS max_uses) AS t
WHERE t.uses <= t.max_uses
ORDER BY t.scope, t.period, t.period_start, t.customer_id
ON CONFLICT (voucher_code, scope, period, period_start, customer_id) DO UPDATE
SET used_count = p.used_count + excluded.used_count, max_uses = excluded.max_uses
WHERE p.used_count + excluded.used_count <= excluded.max_uses
RETURNING p.scope, p.period, p.period_start, p.customer_id;

-- VoucherPeriodUsesGiveBack gives released, expired or rolled-back uses
-- back to the periods they were taken in: the periods of their
-- reservations' created_at, not the current ones. Each reservation of a
-- voucher with period limits took one use in every row of its voucher whose
-- period holds its created_at and whose customer is 0 or its own; the rows
-- are locked in key order first.
-- name: VoucherPeriodUsesGiveBack :exec
WITH released AS (
    SELECT p.voucher_code, p.scope, p.period, p.period_start, p.customer_id, count(*)::integer AS n
    FROM (SELECT unnest(sqlc.arg(codes)::text[]) AS code,
                 unnest(sqlc.arg(customer_ids)::bigint[]) AS customer_id,
                 unnest(sqlc.arg(created_ats)::timestamptz[]) AS created_at) AS r
    JOIN voucher_period_use p
      ON p.voucher_code = r.code AND p.customer_id IN (0, r.customer_id)
     AND r.created_at >= p.period_start AND r.created_at < p.period_end
    GROUP BY p.voucher_code, p.scope, p.period, p.period_start, p.customer_id
), locked AS (
    SELECT p.voucher_code, p.scope, p.period, p.period_start, p.customer_id, released.n
    FROM voucher_period_use p
    JOIN released USING (voucher_code, scope, period, period_start, customer_id)
    ORDER BY p.voucher_code, p.scope, p.period, p.period_start, p.customer_id
    FOR UPDATE OF p
)
UPDATE voucher_period_use p
SET used_count = p.used_count - locked.n
FROM locked
WHERE p.voucher_code = locked.voucher_code AND p.scope = locked.scope AND p.period = locked.period
  AND p.period_start = locked.period_start AND p.customer_id = locked.customer_id;

-- VoucherPeriodUsesAt reads the uses held in the periods that hold at: all
-- customers' (customer_id 0) and one customer's, for a check.
-- name: VoucherPeriodUsesAt :many
SELECT scope, period, used_count
FROM voucher_period_use
WHERE voucher_code = sqlc.arg(code) AND customer_id IN (0, sqlc.arg(customer_id)::bigint)
  AND period_start <= sqlc.arg(at)::timestamptz AND sqlc.arg(at)::timestamptz < period_end
  AND (scope = 'VOUCHER') = (customer_id = 0);

-- VoucherPeriodUsesList lists a voucher's period counts that hold uses,
-- latest period first, for the dashboard.
-- name: VoucherPeriodUsesList :many
SELECT scope, period, period_start, period_end, customer_id, used_count, max_uses
FROM voucher_period_use
WHERE voucher_code = $1 AND used_count > 0
ORDER BY period_start DESC, scope DESC, period, customer_id
LIMIT $2;

-- VoucherPeriodUsesBetween reads a voucher's period counts of the periods
-- that overlap [from, to], for a flash gate's load (the current periods
-- and their neighbours) and reconciliation.
-- name: VoucherPeriodUsesBetween :many
SELECT scope, period, period_start, period_end, customer_id, used_count, max_uses
FROM voucher_period_use
WHERE voucher_code = sqlc.arg(code) AND period_end > sqlc.arg(from_at)::timestamptz
  AND period_start <= sqlc.arg(to_at)::timestamptz AND used_count > 0;
