-- +goose Up
-- Period limits, customer segments and line items (README "Period limits,
-- segments and line items"). A voucher's terms, fixed at its creation:
-- period_limits holds 'SCOPE:PERIOD:MAX' entries (VOUCHER or CUSTOMER; DAY,
-- WEEK or MONTH), calendar periods in time_zone (an IANA name); a reserve
-- must name one of eligible_segments when any are listed; applies_to_skus
-- and applies_to_categories (NULL both: the whole order) choose the items
-- the discount is taken on.
ALTER TABLE voucher
    ADD COLUMN time_zone text NOT NULL DEFAULT 'UTC' CHECK (length(time_zone) BETWEEN 1 AND 64),
    ADD COLUMN period_limits text[] NOT NULL DEFAULT '{}' CHECK (cardinality(period_limits) <= 5),
    ADD COLUMN eligible_segments text[] NOT NULL DEFAULT '{}',
    ADD COLUMN applies_to_skus text[],
    ADD COLUMN applies_to_categories text[];

-- voucher_period_use counts the uses held (RESERVED + CONFIRMED) in one
-- calendar period of one of a voucher's period limits: all customers
-- together (customer_id 0, scope VOUCHER) or one customer's (scope
-- CUSTOMER). A use counts in the period of its reservation's created_at
-- ([period_start, period_end) in the voucher's time zone); a release,
-- expiry or rollback gives it back to that row, whatever the period is
-- now. The take is one INSERT ... ON CONFLICT DO UPDATE whose WHERE keeps
-- used_count within max_uses under the row's lock; the CHECK is its twin.
CREATE TABLE voucher_period_use (
    voucher_code text        NOT NULL REFERENCES voucher (code) ON UPDATE CASCADE,
    scope        text        NOT NULL CHECK (scope IN ('VOUCHER', 'CUSTOMER')),
    period       text        NOT NULL CHECK (period IN ('DAY', 'WEEK', 'MONTH')),
    period_start timestamptz NOT NULL,
    customer_id  bigint      NOT NULL CHECK (customer_id >= 0),
    period_end   timestamptz NOT NULL,
    used_count   integer     NOT NULL CHECK (used_count >= 0),
    max_uses     integer     NOT NULL CHECK (max_uses >= 1),
    PRIMARY KEY (voucher_code, scope, period, period_start, customer_id),
    CONSTRAINT voucher_period_use_scope_customer CHECK ((scope = 'VOUCHER') = (customer_id = 0)),
    CONSTRAINT voucher_period_use_within_limit CHECK (used_count <= max_uses),
    CONSTRAINT voucher_period_use_period_order CHECK (period_start < period_end)
);

-- +goose Down
DROP TABLE voucher_period_use;
ALTER TABLE voucher
    DROP COLUMN applies_to_categories,
    DROP COLUMN applies_to_skus,
    DROP COLUMN eligible_segments,
    DROP COLUMN period_limits,
    DROP COLUMN time_zone;
