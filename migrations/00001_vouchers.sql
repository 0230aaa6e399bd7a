-- +goose Up

-- A voucher and its live counters. used_count is the number of uses held
-- (RESERVED) or sold (CONFIRMED); the CHECKs are the last line of defence
-- against overselling whatever the application does.
CREATE TABLE voucher (
    code             text        PRIMARY KEY CHECK (code ~ '^[A-Za-z0-9_-]{1,32}$'),
    discount_amount  bigint      NOT NULL CHECK (discount_amount > 0),
    min_order_amount bigint      NOT NULL DEFAULT 0 CHECK (min_order_amount >= 0),
    total_limit      integer     NOT NULL CHECK (total_limit >= 1),
    per_user_limit   integer     NOT NULL DEFAULT 1 CHECK (per_user_limit >= 1),
    used_count       integer     NOT NULL DEFAULT 0,
    reserved_count   integer     NOT NULL DEFAULT 0 CHECK (reserved_count >= 0),
    confirmed_count  integer     NOT NULL DEFAULT 0 CHECK (confirmed_count >= 0),
    starts_at        timestamptz NOT NULL,
    ends_at          timestamptz NOT NULL,
    flash            boolean     NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT voucher_used_within_limit CHECK (used_count >= 0 AND used_count <= total_limit),
    CONSTRAINT voucher_used_is_held_plus_sold CHECK (used_count = reserved_count + confirmed_count),
    CONSTRAINT voucher_window_ordered CHECK (starts_at < ends_at)
);

-- Newest first, with code as the tie-breaker of the pagination cursor.
CREATE INDEX voucher_created_idx ON voucher (created_at DESC, code DESC);

-- How many uses (RESERVED + CONFIRMED) one customer holds of one voucher.
-- use_limit is copied from the voucher's per_user_limit so the bound is a
-- CHECK the database enforces under any concurrency, for any perUserLimit.
-- (A UNIQUE (voucher_code, customer_id) on redemptions would allow only one
-- use per customer, ever, even after a release.)
CREATE TABLE voucher_customer (
    voucher_code text    NOT NULL REFERENCES voucher (code) ON UPDATE CASCADE,
    customer_id  bigint  NOT NULL CHECK (customer_id > 0),
    used_count   integer NOT NULL CHECK (used_count >= 0),
    use_limit    integer NOT NULL CHECK (use_limit >= 1),
    PRIMARY KEY (voucher_code, customer_id),
    CONSTRAINT voucher_customer_within_limit CHECK (used_count <= use_limit)
);

-- One row per orderId, ever: the order service's idempotency key.
CREATE TABLE voucher_redemption (
    order_id        text        PRIMARY KEY CHECK (length(order_id) BETWEEN 1 AND 64),
    voucher_code    text        NOT NULL REFERENCES voucher (code) ON UPDATE CASCADE,
    customer_id     bigint      NOT NULL CHECK (customer_id > 0),
    order_amount    bigint      NOT NULL CHECK (order_amount >= 0),
    discount_amount bigint      NOT NULL CHECK (discount_amount > 0),
    status          text        NOT NULL CHECK (status IN ('RESERVED', 'CONFIRMED', 'RELEASED')),
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    confirmed_at    timestamptz,
    released_at     timestamptz,
    CONSTRAINT voucher_redemption_expires_after_creation CHECK (expires_at > created_at)
);

-- The expiry sweep reads only live reservations, oldest deadline first.
CREATE INDEX voucher_redemption_due_idx ON voucher_redemption (expires_at) WHERE status = 'RESERVED';
CREATE INDEX voucher_redemption_voucher_idx ON voucher_redemption (voucher_code, created_at DESC);

-- Append-only audit trail of every state change, written in the same
-- transaction as the change.
CREATE TABLE reservation_event (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id     text        NOT NULL,
    voucher_code text        NOT NULL,
    customer_id  bigint      NOT NULL,
    kind         text        NOT NULL CHECK (kind IN ('reserved', 'confirmed', 'released', 'expired')),
    path         text        NOT NULL,
    occurred_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX reservation_event_voucher_idx ON reservation_event (voucher_code, id DESC);

-- +goose StatementBegin
CREATE FUNCTION reservation_event_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'reservation_event is append-only';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER reservation_event_no_change
    BEFORE UPDATE OR DELETE ON reservation_event
    FOR EACH ROW EXECUTE FUNCTION reservation_event_append_only();

-- +goose Down
DROP TABLE reservation_event;
DROP FUNCTION reservation_event_append_only();
DROP TABLE voucher_redemption;
DROP TABLE voucher_customer;
DROP TABLE voucher;
