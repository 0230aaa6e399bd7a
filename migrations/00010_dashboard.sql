-- +goose Up

-- People who sign in to the dashboard at /admin. The role maps to
-- voucher.Role; the password is a bcrypt hash, never the password.
CREATE TABLE dashboard_user (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email         text        NOT NULL CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 254),
    name          text        NOT NULL DEFAULT '',
    role          text        NOT NULL CHECK (role IN ('marketer', 'operator', 'admin')),
    password_hash text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT dashboard_user_email_key UNIQUE (email)
);

-- A signed-in browser. The cookie carries a random token; only its SHA-256
-- is stored, so a read of this table signs nobody in. The CSRF token is
-- per session and goes into every form.
CREATE TABLE dashboard_session (
    token_hash bytea       PRIMARY KEY,
    user_id    bigint      NOT NULL REFERENCES dashboard_user (id) ON DELETE CASCADE,
    csrf_token text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at timestamptz NOT NULL
);

CREATE INDEX dashboard_session_expires_idx ON dashboard_session (expires_at);

-- Failed sign-ins per client address, to refuse an address that keeps
-- guessing. Rows older than the window are deleted as new ones come in.
CREATE TABLE dashboard_sign_in_failure (
    id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    address   text        NOT NULL,
    failed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX dashboard_sign_in_failure_address_idx ON dashboard_sign_in_failure (address, failed_at);

-- Who changed a voucher, when and how: created, updated (before it started)
-- or ended early. Written in the same transaction as the change.
CREATE TABLE voucher_audit (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    voucher_code text        NOT NULL REFERENCES voucher (code) ON UPDATE CASCADE,
    actor        text        NOT NULL,
    actor_role   text        NOT NULL,
    action       text        NOT NULL CHECK (action IN ('created', 'updated', 'ended')),
    detail       text        NOT NULL DEFAULT '',
    occurred_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX voucher_audit_voucher_idx ON voucher_audit (voucher_code, id DESC);

-- A voucher's counters sampled every few seconds while its window is open,
-- only when they changed: the dashboard's chart of remaining uses reads a
-- bounded number of these instead of scanning reservations.
CREATE TABLE voucher_sample (
    voucher_code text        NOT NULL REFERENCES voucher (code) ON UPDATE CASCADE ON DELETE CASCADE,
    sampled_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    remaining    integer     NOT NULL,
    reserved     integer     NOT NULL,
    confirmed    integer     NOT NULL,
    PRIMARY KEY (voucher_code, sampled_at)
);

-- +goose Down
DROP TABLE voucher_sample;
DROP TABLE voucher_audit;
DROP TABLE dashboard_sign_in_failure;
DROP TABLE dashboard_session;
DROP TABLE dashboard_user;
