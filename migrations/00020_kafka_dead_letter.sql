-- +goose Up

-- Events of the Kafka write path that the database refused (a CHECK fired:
-- the gate was wrong, or a reservation's state contradicts the event), or
-- that could not be read. Each is also on the dead-letter topic; this table
-- lets the dashboard and operators see them. Replaying a topic stores a
-- refused event once (its topic position and id).
CREATE TABLE dead_letter (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id     text        NOT NULL,
    topic        text        NOT NULL,
    "partition"  integer     NOT NULL,
    "offset"     bigint      NOT NULL,
    voucher_code text        NOT NULL DEFAULT '',
    order_id     text        NOT NULL DEFAULT '',
    kind         text        NOT NULL DEFAULT '',
    reason       text        NOT NULL,
    payload      text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT dead_letter_once UNIQUE (topic, "partition", "offset", event_id)
);

CREATE INDEX dead_letter_latest_idx ON dead_letter (id DESC);

-- +goose Down
DROP TABLE dead_letter;
