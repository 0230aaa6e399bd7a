-- +goose Up
-- A flash campaign's reconciliation compares the uses of each of its codes,
-- gate against database (the in-flight orders counted): the codes that
-- differ, at most a sample of them, for the operator who rebuilds the gate.
ALTER TABLE drift_report ADD COLUMN codes_differing text[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE drift_report DROP COLUMN codes_differing;
