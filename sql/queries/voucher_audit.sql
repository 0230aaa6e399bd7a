-- name: VoucherAuditInsert :exec
INSERT INTO voucher_audit (voucher_code, actor, actor_role, action, detail)
VALUES ($1, $2, $3, $4, $5);

-- name: VoucherAuditListByVoucher :many
SELECT * FROM voucher_audit
WHERE voucher_code = $1
ORDER BY id DESC
LIMIT $2;

-- VoucherAuditListOperations lists the latest repairs (gate rebuilds,
-- reconciliations by hand, actions on dead letters) of any voucher, newest
-- first.
-- name: VoucherAuditListOperations :many
SELECT * FROM voucher_audit
WHERE action IN ('gate-rebuilt', 'reconciled', 'gates-warmed', 'dead-letter-applied', 'dead-letter-refused', 'dead-letter-discarded')
ORDER BY id DESC
LIMIT $1;

-- VoucherAuditInsertRepair records a repair that may name no voucher (or a
-- code no voucher has: a dead letter's event can name anything), so the
-- code is kept only when a voucher has it.
-- name: VoucherAuditInsertRepair :exec
INSERT INTO voucher_audit (voucher_code, actor, actor_role, action, detail)
VALUES ((SELECT code FROM voucher WHERE code = sqlc.arg(voucher_code)::text), sqlc.arg(actor), sqlc.arg(actor_role), sqlc.arg(action), sqlc.arg(detail));
