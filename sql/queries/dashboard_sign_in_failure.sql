-- name: DashboardSignInFailureInsert :exec
INSERT INTO dashboard_sign_in_failure (address) VALUES ($1);

-- DashboardSignInFailureCount counts an address's failures within the window.
-- name: DashboardSignInFailureCount :one
SELECT count(*) FROM dashboard_sign_in_failure
WHERE address = $1 AND failed_at > now() - make_interval(secs => sqlc.arg(window_seconds)::float8);

-- DashboardSignInFailureDeleteOld forgets an address's failures older than
-- the window, so the table holds only what the limit still counts.
-- name: DashboardSignInFailureDeleteOld :exec
DELETE FROM dashboard_sign_in_failure
WHERE address = $1 AND failed_at <= now() - make_interval(secs => sqlc.arg(window_seconds)::float8);
