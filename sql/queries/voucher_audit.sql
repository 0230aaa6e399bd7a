-- name: VoucherAuditInsert :exec
INSERT INTO voucher_audit (voucher_code, actor, actor_role, action, detail)
VALUES ($1, $2, $3, $4, $5);

-- name: VoucherAuditListByVoucher :many
SELECT * FROM voucher_audit
WHERE voucher_code = $1
ORDER BY id DESC
LIMIT $2;

-- VoucherAuditListOperations lists the latest repairs (gate rebuilds and
-- reconciliations by hand) of any voucher, newest first.
-- name: VoucherAuditListOperations :many
SELECT * FROM voucher_audit
WHERE action IN ('gate-rebuilt', 'reconciled')
ORDER BY id DESC
LIMIT $1;
