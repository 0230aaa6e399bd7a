-- VoucherSampleTakeOpen samples the counters of every voucher whose window is
-- open (or closed less than grace ago) and whose counters changed since its
-- last sample. It reads the voucher rows only, never reservations.
-- name: VoucherSampleTakeOpen :execrows
INSERT INTO voucher_sample (voucher_code, remaining, reserved, confirmed)
SELECT v.code, v.total_limit - v.used_count, v.reserved_count, v.confirmed_count
FROM voucher v
LEFT JOIN LATERAL (
    SELECT s.remaining, s.reserved, s.confirmed
    FROM voucher_sample s
    WHERE s.voucher_code = v.code
    ORDER BY s.sampled_at DESC
    LIMIT 1
) AS last ON true
WHERE now() >= v.starts_at
  AND now() <= v.ends_at + make_interval(secs => sqlc.arg(grace_seconds)::float8)
  AND (last.remaining IS NULL
       OR last.remaining <> v.total_limit - v.used_count
       OR last.reserved <> v.reserved_count
       OR last.confirmed <> v.confirmed_count)
ON CONFLICT DO NOTHING;

-- VoucherSampleListRecent reads a voucher's latest samples, newest first.
-- name: VoucherSampleListRecent :many
SELECT * FROM voucher_sample
WHERE voucher_code = $1
ORDER BY sampled_at DESC
LIMIT $2;
