-- name: VoucherAuditInsert :exec
INSERT INTO voucher_audit (voucher_code, actor, actor_role, action, detail)
VALUES ($1, $2, $3, $4, $5);

-- name: VoucherAuditListByVoucher :many
SELECT * FROM voucher_audit
WHERE voucher_code = $1
ORDER BY id DESC
LIMIT $2;
