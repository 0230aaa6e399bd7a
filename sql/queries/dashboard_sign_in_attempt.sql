-- DashboardSignInAttemptLock serializes the sign-in attempts of one key (an
-- email or an address) until the transaction ends. Callers lock the email
-- before the address, one order for all, so two attempts cannot deadlock.
-- name: DashboardSignInAttemptLock :exec
SELECT pg_advisory_xact_lock(hashtextextended('dashboard sign-in ' || sqlc.arg(key)::text, 0));

-- DashboardSignInAttemptCount counts the pending and failed attempts of an
-- email and of an address within the window that no admin lifted.
-- name: DashboardSignInAttemptCount :one
SELECT
    (SELECT count(*) FROM dashboard_sign_in_attempt e
     WHERE e.email = sqlc.arg(email) AND e.lifted_at IS NULL
       AND e.started_at > now() - make_interval(secs => sqlc.arg(window_seconds)::float8)) AS email_attempts,
    (SELECT count(*) FROM dashboard_sign_in_attempt a
     WHERE a.address = sqlc.arg(address) AND a.lifted_at IS NULL
       AND a.started_at > now() - make_interval(secs => sqlc.arg(window_seconds)::float8)) AS address_attempts;

-- name: DashboardSignInAttemptInsert :one
INSERT INTO dashboard_sign_in_attempt (email, address) VALUES ($1, $2) RETURNING id;

-- name: DashboardSignInAttemptFail :exec
UPDATE dashboard_sign_in_attempt SET outcome = 'failed' WHERE id = $1;

-- DashboardSignInAttemptDelete forgets a successful attempt: it does not count.
-- name: DashboardSignInAttemptDelete :exec
DELETE FROM dashboard_sign_in_attempt WHERE id = $1;

-- DashboardSignInAttemptDeleteOld forgets an email's and an address's
-- attempts older than the window, so the table holds only what the limits
-- still count.
-- name: DashboardSignInAttemptDeleteOld :exec
DELETE FROM dashboard_sign_in_attempt
WHERE (email = sqlc.arg(email) OR address = sqlc.arg(address))
  AND started_at <= now() - make_interval(secs => sqlc.arg(window_seconds)::float8);

-- DashboardSignInAttemptLift is an admin lifting the lock of an email, of an
-- address, or both (an empty argument matches nothing).
-- name: DashboardSignInAttemptLift :execrows
UPDATE dashboard_sign_in_attempt SET lifted_at = now()
WHERE lifted_at IS NULL
  AND ((sqlc.arg(email)::text <> '' AND email = sqlc.arg(email))
    OR (sqlc.arg(address)::text <> '' AND address = sqlc.arg(address)));

-- DashboardSignInAttemptWait is how long until the oldest counted attempt of
-- an email, or of an address (an empty argument matches nothing), leaves
-- the window, in seconds: a locked key is let through again then.
-- name: DashboardSignInAttemptWait :one
SELECT coalesce(extract(epoch FROM min(started_at) + make_interval(secs => sqlc.arg(window_seconds)::float8) - now()), 0)::float8 AS wait_seconds
FROM dashboard_sign_in_attempt
WHERE lifted_at IS NULL
  AND started_at > now() - make_interval(secs => sqlc.arg(window_seconds)::float8)
  AND ((sqlc.arg(email)::text <> '' AND email = sqlc.arg(email))
    OR (sqlc.arg(address)::text <> '' AND address = sqlc.arg(address)));

-- DashboardSignInLocksList lists the emails and addresses locked now (at
-- least their limit of counted attempts within the window), each with its
-- count and when it is let through again: when its oldest attempts have
-- left the window until one fewer than the limit is left. Newest lock
-- first.
-- name: DashboardSignInLocksList :many
WITH counted AS (
    SELECT 'email'::text AS kind, email AS key, started_at FROM dashboard_sign_in_attempt
    WHERE lifted_at IS NULL AND started_at > now() - make_interval(secs => sqlc.arg(window_seconds)::float8)
    UNION ALL
    SELECT 'address'::text, address, started_at FROM dashboard_sign_in_attempt
    WHERE lifted_at IS NULL AND started_at > now() - make_interval(secs => sqlc.arg(window_seconds)::float8)
), ranked AS (
    SELECT kind, key, started_at,
           count(*) OVER (PARTITION BY kind, key) AS attempts,
           row_number() OVER (PARTITION BY kind, key ORDER BY started_at) AS nth,
           max(started_at) OVER (PARTITION BY kind, key) AS latest
    FROM counted
)
SELECT kind, key, attempts::integer AS attempts, latest::timestamptz AS latest,
       (started_at + make_interval(secs => sqlc.arg(window_seconds)::float8))::timestamptz AS until
FROM ranked
WHERE (kind = 'email' AND attempts >= sqlc.arg(max_per_email)::bigint AND nth = attempts - sqlc.arg(max_per_email)::bigint + 1)
   OR (kind = 'address' AND attempts >= sqlc.arg(max_per_address)::bigint AND nth = attempts - sqlc.arg(max_per_address)::bigint + 1)
ORDER BY latest DESC, kind, key
LIMIT sqlc.arg(max_rows)::integer;
