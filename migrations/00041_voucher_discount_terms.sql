-- +goose Up

-- Discounts as marketers run them: FIXED (discount_amount off, at most the
-- order) or PERCENT (discount_percent of the order, rounded down, at most
-- max_discount_amount), in a currency. The CHECK allows only the valid
-- combinations, whatever the application sends. Existing vouchers are FIXED
-- and in USD (the DEFAULT_CURRENCY default).
ALTER TABLE voucher
    ADD COLUMN discount_type       text    NOT NULL DEFAULT 'FIXED',
    ADD COLUMN discount_percent    integer,
    ADD COLUMN max_discount_amount bigint,
    ADD COLUMN currency            text    NOT NULL DEFAULT 'USD';
ALTER TABLE voucher ALTER COLUMN currency DROP DEFAULT;

ALTER TABLE voucher DROP CONSTRAINT voucher_discount_amount_check;
ALTER TABLE voucher ADD CONSTRAINT voucher_discount_terms CHECK (
    (discount_type = 'FIXED' AND discount_amount > 0 AND discount_percent IS NULL AND max_discount_amount IS NULL)
    OR (discount_type = 'PERCENT' AND discount_amount = 0 AND discount_percent BETWEEN 1 AND 100
        AND (max_discount_amount IS NULL OR max_discount_amount > 0)));
ALTER TABLE voucher ADD CONSTRAINT voucher_currency_iso CHECK (currency ~ '^[A-Z]{3}$');

-- A reservation holds the discount it got, which may now be 0 (1 % of 99)
-- and is never more than its order. Rows from before the cap are not
-- rechecked (NOT VALID): a FIXED discount used to exceed a smaller order.
ALTER TABLE voucher_redemption DROP CONSTRAINT voucher_redemption_discount_amount_check;
ALTER TABLE voucher_redemption ADD CONSTRAINT voucher_redemption_discount_amount_check
    CHECK (discount_amount >= 0 AND discount_amount <= order_amount) NOT VALID;

-- +goose Down
ALTER TABLE voucher_redemption DROP CONSTRAINT voucher_redemption_discount_amount_check;
ALTER TABLE voucher_redemption ADD CONSTRAINT voucher_redemption_discount_amount_check CHECK (discount_amount > 0) NOT VALID;
ALTER TABLE voucher DROP CONSTRAINT voucher_currency_iso;
ALTER TABLE voucher DROP CONSTRAINT voucher_discount_terms;
ALTER TABLE voucher ADD CONSTRAINT voucher_discount_amount_check CHECK (discount_amount > 0) NOT VALID;
ALTER TABLE voucher
    DROP COLUMN currency,
    DROP COLUMN max_discount_amount,
    DROP COLUMN discount_percent,
    DROP COLUMN discount_type;
