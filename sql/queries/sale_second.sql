-- SaleSecondsAdd adds one flush of an instance's reserve counts, in one
-- statement: row i is (codes[i], seconds[i], outcomes[i], counts[i]). A
-- code that is no voucher (a campaign code, or one renamed since) is left
-- out by the join; another instance's rows of the same second add up.
-- name: SaleSecondsAdd :exec
INSERT INTO sale_second (voucher_code, second, outcome, count)
SELECT v.code, c.second, c.outcome, sum(c.count)::bigint
FROM (SELECT unnest(@codes::text[])            AS code,
             unnest(@seconds::timestamptz[])     AS second,
             unnest(@outcomes::text[])           AS outcome,
             unnest(@counts::bigint[])           AS count) c
JOIN voucher v ON v.code = c.code
GROUP BY v.code, c.second, c.outcome
ORDER BY v.code, c.second, c.outcome
ON CONFLICT (voucher_code, second, outcome)
    DO UPDATE SET count = sale_second.count + EXCLUDED.count;

-- SaleSecondsOf is a voucher's counted answers, per second and outcome.
-- name: SaleSecondsOf :many
SELECT second, outcome, count
FROM sale_second
WHERE voucher_code = $1
ORDER BY second, outcome;

-- SaleAdmittedOf is a voucher's reservations of every status (a use
-- admitted and released later was still admitted), per second of their
-- creation.
-- name: SaleAdmittedOf :many
SELECT date_trunc('second', created_at)::timestamptz AS second, count(*) AS count
FROM voucher_redemption
WHERE voucher_code = $1
GROUP BY 1
ORDER BY 1;

-- SaleFirstUseOf is the creation of a voucher's first reservation (of any
-- status); no row before one. (:many, so that none is no row, not an error.)
-- name: SaleFirstUseOf :many
SELECT created_at FROM voucher_redemption
WHERE voucher_code = $1
ORDER BY created_at
LIMIT 1;

-- SaleSoldOutOf is when a voucher with no use left last reached its limit:
-- the creation of its latest live reservation; no row while uses remain.
-- name: SaleSoldOutOf :many
SELECT r.created_at
FROM voucher v
JOIN voucher_redemption r ON r.voucher_code = v.code AND r.status IN ('RESERVED', 'CONFIRMED')
WHERE v.code = $1 AND v.used_count >= v.total_limit
ORDER BY r.created_at DESC
LIMIT 1;
