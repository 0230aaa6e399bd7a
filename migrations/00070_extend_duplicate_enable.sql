-- +goose Up

-- A voucher's total raised (or lowered to what is held) or its end moved
-- later while live (extendVoucher), and a voucher created as a duplicate of
-- another, are recorded in its audit log like every other change.
ALTER TABLE voucher_audit DROP CONSTRAINT voucher_audit_action_check;
ALTER TABLE voucher_audit ADD CONSTRAINT voucher_audit_action_check
    CHECK (action IN ('created', 'updated', 'ended', 'gate-rebuilt', 'reconciled',
                      'dead-letter-applied', 'dead-letter-refused', 'dead-letter-discarded',
                      'extended', 'duplicated'));

-- An admin enables a disabled user again.
ALTER TABLE dashboard_user_audit DROP CONSTRAINT dashboard_user_audit_action_check;
ALTER TABLE dashboard_user_audit ADD CONSTRAINT dashboard_user_audit_action_check
    CHECK (action IN ('added', 'role-changed', 'disabled', 'enabled', 'password-link', 'password-set'));

-- +goose Down
DELETE FROM dashboard_user_audit WHERE action = 'enabled';
ALTER TABLE dashboard_user_audit DROP CONSTRAINT dashboard_user_audit_action_check;
ALTER TABLE dashboard_user_audit ADD CONSTRAINT dashboard_user_audit_action_check
    CHECK (action IN ('added', 'role-changed', 'disabled', 'password-link', 'password-set'));
DELETE FROM voucher_audit WHERE action IN ('extended', 'duplicated');
ALTER TABLE voucher_audit DROP CONSTRAINT voucher_audit_action_check;
ALTER TABLE voucher_audit ADD CONSTRAINT voucher_audit_action_check
    CHECK (action IN ('created', 'updated', 'ended', 'gate-rebuilt', 'reconciled',
                      'dead-letter-applied', 'dead-letter-refused', 'dead-letter-discarded'));
