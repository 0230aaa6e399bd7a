-- +goose Up

-- voucher_state is voucher.Voucher.State in SQL (keep the two in step): the
-- dashboard's list filters and sorts by it, and counts its matches.
-- +goose StatementBegin
CREATE FUNCTION voucher_state(starts_at timestamptz, ends_at timestamptz, used_count integer, total_limit integer)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN now() > ends_at THEN 'ended'
                WHEN used_count >= total_limit THEN 'sold-out'
                WHEN now() < starts_at THEN 'scheduled'
                ELSE 'live' END
$$;
-- +goose StatementEnd

-- The audit log also records an operator's repairs: a gate rebuilt (of one
-- voucher) and a reconciliation run by hand (of every flash voucher, so of
-- no one voucher: its code is null).
ALTER TABLE voucher_audit ALTER COLUMN voucher_code DROP NOT NULL;
ALTER TABLE voucher_audit DROP CONSTRAINT voucher_audit_action_check;
ALTER TABLE voucher_audit ADD CONSTRAINT voucher_audit_action_check
    CHECK (action IN ('created', 'updated', 'ended', 'gate-rebuilt', 'reconciled'));
ALTER TABLE voucher_audit ADD CONSTRAINT voucher_audit_code_check
    CHECK (voucher_code IS NOT NULL OR action = 'reconciled');
CREATE INDEX voucher_audit_operation_idx ON voucher_audit (id DESC) WHERE action IN ('gate-rebuilt', 'reconciled');

-- +goose Down
DROP INDEX voucher_audit_operation_idx;
DELETE FROM voucher_audit WHERE action IN ('gate-rebuilt', 'reconciled');
ALTER TABLE voucher_audit DROP CONSTRAINT voucher_audit_code_check;
ALTER TABLE voucher_audit DROP CONSTRAINT voucher_audit_action_check;
ALTER TABLE voucher_audit ADD CONSTRAINT voucher_audit_action_check CHECK (action IN ('created', 'updated', 'ended'));
ALTER TABLE voucher_audit ALTER COLUMN voucher_code SET NOT NULL;
DROP FUNCTION voucher_state(timestamptz, timestamptz, integer, integer);
