-- +goose Up
-- API keys that admins manage (issue 27): only the key's SHA-256 is kept;
-- prefix is the key's first characters, for people to recognise it.
CREATE TABLE api_key (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    role            text        NOT NULL CHECK (role IN ('storefront', 'admin')),
    prefix          text        NOT NULL,
    secret_hash     bytea       NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at      timestamptz,
    revoked_at      timestamptz,
    last_used_at    timestamptz,
    rate_per_second integer     CHECK (rate_per_second >= 1),
    burst           integer     CHECK (burst >= 1),
    created_by      text        NOT NULL,
    CHECK (burst IS NULL OR rate_per_second IS NOT NULL)
);

-- The keys every server holds in memory: those not revoked.
CREATE INDEX api_key_usable_idx ON api_key (id) WHERE revoked_at IS NULL;

-- Who created or revoked a key, when. Written in the same transaction as
-- the change; the name is copied so the line reads the same later.
CREATE TABLE api_key_audit (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key_id      bigint      NOT NULL REFERENCES api_key (id),
    key_name    text        NOT NULL,
    actor       text        NOT NULL,
    actor_role  text        NOT NULL,
    action      text        NOT NULL CHECK (action IN ('created', 'revoked')),
    detail      text        NOT NULL DEFAULT '',
    occurred_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX api_key_audit_latest_idx ON api_key_audit (id DESC);

-- +goose Down
DROP TABLE api_key_audit;
DROP TABLE api_key;
