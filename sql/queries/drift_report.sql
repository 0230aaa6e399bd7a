-- name: DriftReportInsert :one
INSERT INTO drift_report (voucher_code, database_remaining, gate_remaining, in_flight, drift,
                          orders_only_in_gate, orders_only_in_db, repaired, alert, codes_differing, periods_differing)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
RETURNING *;

-- name: DriftReportListLatest :many
SELECT DISTINCT ON (voucher_code) *
FROM drift_report
ORDER BY voucher_code, id DESC;

-- name: DriftReportGetLatest :one
SELECT * FROM drift_report
WHERE voucher_code = $1
ORDER BY id DESC
LIMIT 1;

-- DriftReportDeleteBefore keeps the history bounded.
-- name: DriftReportDeleteBefore :exec
DELETE FROM drift_report WHERE checked_at < $1;
