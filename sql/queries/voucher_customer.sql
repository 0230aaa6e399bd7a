-- VoucherCustomerUseTake counts one more use for the customer unless they
-- already hold their limit; no row back means the limit is reached.
-- name: VoucherCustomerUseTake :one
INSERT INTO voucher_customer AS vc (voucher_code, customer_id, used_count, use_limit)
VALUES ($1, $2, 1, sqlc.arg(use_limit))
ON CONFLICT (voucher_code, customer_id) DO UPDATE
SET used_count = vc.used_count + 1
WHERE vc.used_count < vc.use_limit
RETURNING used_count;

-- name: VoucherCustomerUseGiveBack :exec
UPDATE voucher_customer
SET used_count = used_count - 1
WHERE voucher_code = $1 AND customer_id = $2;

-- name: VoucherCustomerListHolding :many
SELECT customer_id, used_count FROM voucher_customer
WHERE voucher_code = $1 AND used_count > 0;
