-- +goose Up

-- One row per reconciliation pass per flash voucher: the gate against the
-- database. The latest row per voucher is what driftReports shows.
CREATE TABLE drift_report (
    id                   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    voucher_code         text        NOT NULL REFERENCES voucher (code) ON UPDATE CASCADE,
    database_remaining   integer     NOT NULL,
    gate_remaining       integer,
    in_flight            integer     NOT NULL DEFAULT 0,
    drift                integer     NOT NULL,
    orders_only_in_gate  text[]      NOT NULL DEFAULT '{}',
    orders_only_in_db    text[]      NOT NULL DEFAULT '{}',
    repaired             text        NOT NULL DEFAULT '',
    alert                boolean     NOT NULL DEFAULT false,
    checked_at           timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX drift_report_latest_idx ON drift_report (voucher_code, id DESC);

-- A lease lets one instance of many run a periodic job per period
-- (reconciliation): whoever takes it first in a period runs the pass.
CREATE TABLE job_lease (
    name   text        PRIMARY KEY,
    holder text        NOT NULL,
    until  timestamptz NOT NULL
);

-- +goose Down
DROP TABLE job_lease;
DROP TABLE drift_report;
