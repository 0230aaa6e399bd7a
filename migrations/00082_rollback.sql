-- +goose Up
-- Rollback of a confirmed use (a refund, an order cancelled after it was
-- paid): CONFIRMED -> ROLLED_BACK gives the use back to the voucher, the
-- customer, the campaign code and the budget. A rolled-back row holds no
-- use, so used_count = reserved_count + confirmed_count still holds; the
-- voucher's (and a campaign code's) rolled_back_count counts them.
ALTER TABLE voucher_redemption DROP CONSTRAINT voucher_redemption_status_check;
ALTER TABLE voucher_redemption ADD CONSTRAINT voucher_redemption_status_check
    CHECK (status IN ('RESERVED', 'CONFIRMED', 'RELEASED', 'ROLLED_BACK'));
ALTER TABLE voucher_redemption
    ADD COLUMN rolled_back_at timestamptz,
    ADD COLUMN rollback_reason text CHECK (length(rollback_reason) BETWEEN 1 AND 200),
    ADD CONSTRAINT voucher_redemption_rolled_back_when CHECK ((status = 'ROLLED_BACK') = (rolled_back_at IS NOT NULL));

ALTER TABLE voucher ADD COLUMN rolled_back_count integer NOT NULL DEFAULT 0 CHECK (rolled_back_count >= 0);
ALTER TABLE voucher_code ADD COLUMN rolled_back_count integer NOT NULL DEFAULT 0 CHECK (rolled_back_count >= 0);

ALTER TABLE reservation_event DROP CONSTRAINT reservation_event_kind_check;
ALTER TABLE reservation_event ADD CONSTRAINT reservation_event_kind_check
    CHECK (kind IN ('reserved', 'confirmed', 'released', 'expired', 'rolled_back'));

-- A rollback is audited with its reason and who asked, as an admin's
-- change of a voucher is.
ALTER TABLE voucher_audit DROP CONSTRAINT voucher_audit_action_check;
ALTER TABLE voucher_audit ADD CONSTRAINT voucher_audit_action_check
    CHECK (action IN ('created', 'updated', 'ended', 'gate-rebuilt', 'reconciled',
                      'dead-letter-applied', 'dead-letter-refused', 'dead-letter-discarded',
                      'extended', 'duplicated', 'gates-warmed', 'rolled-back'));

-- +goose Down
DELETE FROM voucher_audit WHERE action = 'rolled-back';
ALTER TABLE voucher_audit DROP CONSTRAINT voucher_audit_action_check;
ALTER TABLE voucher_audit ADD CONSTRAINT voucher_audit_action_check
    CHECK (action IN ('created', 'updated', 'ended', 'gate-rebuilt', 'reconciled',
                      'dead-letter-applied', 'dead-letter-refused', 'dead-letter-discarded',
                      'extended', 'duplicated', 'gates-warmed'));
ALTER TABLE reservation_event DISABLE TRIGGER reservation_event_no_change;
DELETE FROM reservation_event WHERE kind = 'rolled_back';
ALTER TABLE reservation_event ENABLE TRIGGER reservation_event_no_change;
ALTER TABLE reservation_event DROP CONSTRAINT reservation_event_kind_check;
ALTER TABLE reservation_event ADD CONSTRAINT reservation_event_kind_check
    CHECK (kind IN ('reserved', 'confirmed', 'released', 'expired'));
ALTER TABLE voucher_code DROP COLUMN rolled_back_count;
ALTER TABLE voucher DROP COLUMN rolled_back_count;
ALTER TABLE voucher_redemption DROP CONSTRAINT voucher_redemption_rolled_back_when;
ALTER TABLE voucher_redemption DROP COLUMN rollback_reason, DROP COLUMN rolled_back_at;
-- A rolled-back use is as good as released to the schema before it.
UPDATE voucher_redemption SET status = 'RELEASED', released_at = coalesce(released_at, now()) WHERE status = 'ROLLED_BACK';
ALTER TABLE voucher_redemption DROP CONSTRAINT voucher_redemption_status_check;
ALTER TABLE voucher_redemption ADD CONSTRAINT voucher_redemption_status_check
    CHECK (status IN ('RESERVED', 'CONFIRMED', 'RELEASED'));
