-- +goose Up
-- A flash voucher's (or campaign's) reconciliation compares the counts of
-- the current periods of its period limits, gate against database (the
-- in-flight orders counted): the counts that differ, at most a sample of
-- them, for the operator who rebuilds the gate.
ALTER TABLE drift_report ADD COLUMN periods_differing text[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE drift_report DROP COLUMN periods_differing;
