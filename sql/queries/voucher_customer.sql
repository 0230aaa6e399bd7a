-- VoucherCustomerUsesTake counts the uses of a reserve or a batch of them:
-- uses[i] more for customer_ids[i], each customer once, unless that would
-- pass their limit; a customer at the limit gets no row back.
-- name: VoucherCustomerUsesTake :many
INSERT INTO voucher_customer AS vc (voucher_code, customer_id, used_count, use_limit)
SELECT v.code, c.customer_id, c.uses, v.per_user_limit
FROM (SELECT unnest(sqlc.arg(customer_ids)::bigint[]) AS customer_id,
             unnest(sqlc.arg(uses)::integer[]) AS uses) AS c
JOIN voucher v ON v.code = sqlc.arg(code)
WHERE c.uses <= v.per_user_limit
ORDER BY c.customer_id
ON CONFLICT (voucher_code, customer_id) DO UPDATE
SET used_count = vc.used_count + excluded.used_count
WHERE vc.used_count + excluded.used_count <= vc.use_limit
RETURNING customer_id;

-- VoucherCustomerUsesRecord counts uses the gate already took (the Kafka
-- consumer's event or batch): uses[i] more for customer_ids[i], each
-- customer once; past a customer's limit the CHECK
-- voucher_customer_within_limit fires.
-- name: VoucherCustomerUsesRecord :exec
INSERT INTO voucher_customer AS vc (voucher_code, customer_id, used_count, use_limit)
SELECT sqlc.arg(code), c.customer_id, c.uses, (SELECT per_user_limit FROM voucher WHERE code = sqlc.arg(code))
FROM (SELECT unnest(sqlc.arg(customer_ids)::bigint[]) AS customer_id,
             unnest(sqlc.arg(uses)::integer[]) AS uses) AS c
ORDER BY c.customer_id
ON CONFLICT (voucher_code, customer_id) DO UPDATE
SET used_count = vc.used_count + excluded.used_count;

-- VoucherCustomerGetUses reads how many uses a customer holds of a voucher
-- (a check); no row means none.
-- name: VoucherCustomerGetUses :one
SELECT used_count FROM voucher_customer WHERE voucher_code = $1 AND customer_id = $2;

-- VoucherCustomerLockMany locks customers' counts in (voucher, customer)
-- order, the fixed order of a batch, before VoucherCustomerUsesGiveBack
-- changes them (an UPDATE ... FROM takes its rows in no promised order).
-- name: VoucherCustomerLockMany :exec
SELECT 1 FROM voucher_customer vc
JOIN (SELECT unnest(sqlc.arg(codes)::text[]) AS voucher_code,
             unnest(sqlc.arg(customer_ids)::bigint[]) AS customer_id) AS g
  ON vc.voucher_code = g.voucher_code AND vc.customer_id = g.customer_id
ORDER BY vc.voucher_code, vc.customer_id
FOR UPDATE OF vc;

-- VoucherCustomerUsesGiveBack gives uses[i] back to customer_ids[i] of
-- codes[i], each pair once.
-- name: VoucherCustomerUsesGiveBack :exec
UPDATE voucher_customer vc
SET used_count = vc.used_count - g.uses
FROM (SELECT unnest(sqlc.arg(codes)::text[]) AS voucher_code,
             unnest(sqlc.arg(customer_ids)::bigint[]) AS customer_id,
             unnest(sqlc.arg(uses)::integer[]) AS uses) AS g
WHERE vc.voucher_code = g.voucher_code AND vc.customer_id = g.customer_id;

-- name: VoucherCustomerListHolding :many
SELECT customer_id, used_count FROM voucher_customer
WHERE voucher_code = $1 AND used_count > 0;
