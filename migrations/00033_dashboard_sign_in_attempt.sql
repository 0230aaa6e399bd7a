-- +goose Up

-- Password checks of the dashboard's sign-in, counted per email and per
-- client address. A check takes its row before the password is looked at
-- ('pending', under advisory locks of its email and address, so attempts at
-- the same moment cannot all pass the count), then becomes 'failed' or, on
-- success, is deleted. Pending and failed rows within the window count
-- against the limits; lifted_at is an admin's `voucherd user unlock`.
-- Replaces dashboard_sign_in_failure (per address only; its recent failures
-- are forgotten by the upgrade).
DROP TABLE dashboard_sign_in_failure;

CREATE TABLE dashboard_sign_in_attempt (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email      text        NOT NULL,
    address    text        NOT NULL,
    outcome    text        NOT NULL DEFAULT 'pending' CHECK (outcome IN ('pending', 'failed')),
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    lifted_at  timestamptz
);

CREATE INDEX dashboard_sign_in_attempt_email_idx ON dashboard_sign_in_attempt (email, started_at);
CREATE INDEX dashboard_sign_in_attempt_address_idx ON dashboard_sign_in_attempt (address, started_at);

-- +goose Down
DROP TABLE dashboard_sign_in_attempt;

CREATE TABLE dashboard_sign_in_failure (
    id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    address   text        NOT NULL,
    failed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX dashboard_sign_in_failure_address_idx ON dashboard_sign_in_failure (address, failed_at);
