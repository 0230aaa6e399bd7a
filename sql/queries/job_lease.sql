-- JobLeaseTake takes the lease for ttl unless another holder has it; no row
-- back means someone else runs the job this period.
-- name: JobLeaseTake :one
INSERT INTO job_lease AS l (name, holder, until)
VALUES ($1, $2, now() + make_interval(secs => sqlc.arg(ttl_seconds)::float8))
ON CONFLICT (name) DO UPDATE
SET holder = excluded.holder, until = excluded.until
WHERE l.until <= now() OR l.holder = excluded.holder
RETURNING holder;

-- JobLeaseRelease ends a lease its holder no longer needs (a generator that
-- stopped), so another holder may take it at once.
-- name: JobLeaseRelease :exec
UPDATE job_lease SET until = now() WHERE name = $1 AND holder = $2;
