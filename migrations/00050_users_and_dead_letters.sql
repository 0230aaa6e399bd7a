-- +goose Up

-- An admin disables a user: their sessions are deleted and sign-in is
-- refused; the row stays, so the audit log keeps naming them.
ALTER TABLE dashboard_user ADD COLUMN disabled_at timestamptz;

-- A one-time link to set a password: for a user an admin invited (no
-- password yet) or whose password an admin reset. Only the token's SHA-256
-- is stored; the link is printed once for the admin to pass on. A link is
-- used at most once (used_at) and not after expires_at; a newer link of the
-- same user replaces it.
CREATE TABLE dashboard_password_link (
    token_hash bytea       PRIMARY KEY,
    user_id    bigint      NOT NULL REFERENCES dashboard_user (id) ON DELETE CASCADE,
    created_by text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);

CREATE INDEX dashboard_password_link_user_idx ON dashboard_password_link (user_id);

-- Who changed a dashboard user, when and how. Written in the same
-- transaction as the change; the user's email is copied so the line reads
-- the same whatever happens to the row later.
CREATE TABLE dashboard_user_audit (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_email  text        NOT NULL,
    actor       text        NOT NULL,
    actor_role  text        NOT NULL,
    action      text        NOT NULL CHECK (action IN ('added', 'role-changed', 'disabled', 'password-link', 'password-set')),
    detail      text        NOT NULL DEFAULT '',
    occurred_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX dashboard_user_audit_latest_idx ON dashboard_user_audit (id DESC);

-- An operator acts on a dead letter: applied again (it is then in the
-- database) or discarded. Either closes it; a refused "apply again" leaves
-- it open with the new reason (reason is replaced, attempts counted).
ALTER TABLE dead_letter ADD COLUMN resolution text CHECK (resolution IN ('applied', 'discarded'));
ALTER TABLE dead_letter ADD COLUMN resolved_at timestamptz;
ALTER TABLE dead_letter ADD COLUMN resolved_by text NOT NULL DEFAULT '';
ALTER TABLE dead_letter ADD COLUMN retries integer NOT NULL DEFAULT 0;
ALTER TABLE dead_letter ADD CONSTRAINT dead_letter_resolved_check CHECK ((resolution IS NULL) = (resolved_at IS NULL));
CREATE INDEX dead_letter_open_idx ON dead_letter (id DESC) WHERE resolution IS NULL;

-- The operator's actions on dead letters are repairs in the voucher audit
-- log; a dead letter that names no voucher (it could not be read) has no
-- code there, as a reconciliation has none.
ALTER TABLE voucher_audit DROP CONSTRAINT voucher_audit_action_check;
ALTER TABLE voucher_audit ADD CONSTRAINT voucher_audit_action_check
    CHECK (action IN ('created', 'updated', 'ended', 'gate-rebuilt', 'reconciled',
                      'dead-letter-applied', 'dead-letter-refused', 'dead-letter-discarded'));
ALTER TABLE voucher_audit DROP CONSTRAINT voucher_audit_code_check;
ALTER TABLE voucher_audit ADD CONSTRAINT voucher_audit_code_check
    CHECK (voucher_code IS NOT NULL OR action IN ('reconciled', 'dead-letter-applied', 'dead-letter-refused', 'dead-letter-discarded'));
DROP INDEX voucher_audit_operation_idx;
CREATE INDEX voucher_audit_operation_idx ON voucher_audit (id DESC)
    WHERE action IN ('gate-rebuilt', 'reconciled', 'dead-letter-applied', 'dead-letter-refused', 'dead-letter-discarded');

-- +goose Down
DROP INDEX voucher_audit_operation_idx;
CREATE INDEX voucher_audit_operation_idx ON voucher_audit (id DESC) WHERE action IN ('gate-rebuilt', 'reconciled');
DELETE FROM voucher_audit WHERE action IN ('dead-letter-applied', 'dead-letter-refused', 'dead-letter-discarded');
ALTER TABLE voucher_audit DROP CONSTRAINT voucher_audit_code_check;
ALTER TABLE voucher_audit ADD CONSTRAINT voucher_audit_code_check CHECK (voucher_code IS NOT NULL OR action = 'reconciled');
ALTER TABLE voucher_audit DROP CONSTRAINT voucher_audit_action_check;
ALTER TABLE voucher_audit ADD CONSTRAINT voucher_audit_action_check
    CHECK (action IN ('created', 'updated', 'ended', 'gate-rebuilt', 'reconciled'));
DROP INDEX dead_letter_open_idx;
ALTER TABLE dead_letter DROP CONSTRAINT dead_letter_resolved_check;
ALTER TABLE dead_letter DROP COLUMN retries;
ALTER TABLE dead_letter DROP COLUMN resolved_by;
ALTER TABLE dead_letter DROP COLUMN resolved_at;
ALTER TABLE dead_letter DROP COLUMN resolution;
DROP TABLE dashboard_user_audit;
DROP TABLE dashboard_password_link;
ALTER TABLE dashboard_user DROP COLUMN disabled_at;
