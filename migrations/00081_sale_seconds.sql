-- +goose Up
-- The sale as it happened (issue 29): every instance counts the reserve
-- answers it gave, per voucher, per second and per outcome, in memory, and
-- adds them here once a second (internal/voucher/sale.go). outcome is
-- SUCCEEDED (a reservation answered, an idempotent replay included) or the
-- refusal's code. Admitted uses are not counted here: they are read,
-- exactly, from voucher_redemption.
CREATE TABLE sale_second (
    voucher_code text        NOT NULL REFERENCES voucher (code) ON UPDATE CASCADE,
    second       timestamptz NOT NULL CHECK (date_trunc('second', second) = second),
    outcome      text        NOT NULL CHECK (outcome ~ '^[A-Z_]{1,40}$'),
    count        bigint      NOT NULL CHECK (count > 0),
    PRIMARY KEY (voucher_code, second, outcome)
);

-- +goose Down
DROP TABLE sale_second;
