-- +goose Up

-- A budget bounds the sum of the discounts a voucher's RESERVED and
-- CONFIRMED reservations hold, as total_limit bounds their count:
-- budget_used moves in the same statement as used_count (take, give back,
-- the consumer's record), and the CHECK is the last line of defence. It is
-- kept for every voucher (budgetUsed), bounded only where budget_amount is set.
ALTER TABLE voucher
    ADD COLUMN budget_amount bigint CHECK (budget_amount > 0),
    ADD COLUMN budget_used   bigint NOT NULL DEFAULT 0;

UPDATE voucher v SET budget_used = h.held
FROM (SELECT voucher_code, sum(discount_amount) AS held FROM voucher_redemption
      WHERE status IN ('RESERVED', 'CONFIRMED') GROUP BY voucher_code) AS h
WHERE h.voucher_code = v.code;

ALTER TABLE voucher ADD CONSTRAINT voucher_budget_within CHECK (budget_used >= 0 AND budget_used <= budget_amount);

-- +goose Down
ALTER TABLE voucher DROP CONSTRAINT voucher_budget_within;
ALTER TABLE voucher DROP COLUMN budget_used, DROP COLUMN budget_amount;
