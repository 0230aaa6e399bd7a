-- +goose Up
-- warmGates over the API (an operator's script) is a repair in the voucher
-- audit log, like Reconcile now; it names no voucher.
ALTER TABLE voucher_audit DROP CONSTRAINT voucher_audit_action_check;
ALTER TABLE voucher_audit ADD CONSTRAINT voucher_audit_action_check
    CHECK (action IN ('created', 'updated', 'ended', 'gate-rebuilt', 'reconciled',
                      'dead-letter-applied', 'dead-letter-refused', 'dead-letter-discarded',
                      'extended', 'duplicated', 'gates-warmed'));
ALTER TABLE voucher_audit DROP CONSTRAINT voucher_audit_code_check;
ALTER TABLE voucher_audit ADD CONSTRAINT voucher_audit_code_check
    CHECK (voucher_code IS NOT NULL OR action IN ('reconciled', 'dead-letter-applied', 'dead-letter-refused', 'dead-letter-discarded', 'gates-warmed'));
DROP INDEX voucher_audit_operation_idx;
CREATE INDEX voucher_audit_operation_idx ON voucher_audit (id DESC)
    WHERE action IN ('gate-rebuilt', 'reconciled', 'gates-warmed', 'dead-letter-applied', 'dead-letter-refused', 'dead-letter-discarded');

-- +goose Down
DELETE FROM voucher_audit WHERE action = 'gates-warmed';
DROP INDEX voucher_audit_operation_idx;
CREATE INDEX voucher_audit_operation_idx ON voucher_audit (id DESC)
    WHERE action IN ('gate-rebuilt', 'reconciled', 'dead-letter-applied', 'dead-letter-refused', 'dead-letter-discarded');
ALTER TABLE voucher_audit DROP CONSTRAINT voucher_audit_code_check;
ALTER TABLE voucher_audit ADD CONSTRAINT voucher_audit_code_check
    CHECK (voucher_code IS NOT NULL OR action IN ('reconciled', 'dead-letter-applied', 'dead-letter-refused', 'dead-letter-discarded'));
ALTER TABLE voucher_audit DROP CONSTRAINT voucher_audit_action_check;
ALTER TABLE voucher_audit ADD CONSTRAINT voucher_audit_action_check
    CHECK (action IN ('created', 'updated', 'ended', 'gate-rebuilt', 'reconciled',
                      'dead-letter-applied', 'dead-letter-refused', 'dead-letter-discarded',
                      'extended', 'duplicated'));
