-- WritePathTakeShared takes a path's lock beside the other instances of it.
-- The write path's locks are session-level advisory locks that an instance
-- of `voucherd serve` holds on a connection of its own for its life
-- (postgres.ClaimWritePath), one per FLASH_WRITE_PATH, so that the
-- instances serving one database take one write path, and an instance with
-- the in-process broker is its path's only one.
-- name: WritePathTakeShared :one
SELECT pg_try_advisory_lock_shared(hashtextextended('voucherd write path ' || sqlc.arg(path)::text, 0));

-- WritePathTakeAlone takes a path's lock only if no other instance holds it.
-- name: WritePathTakeAlone :one
SELECT pg_try_advisory_lock(hashtextextended('voucherd write path ' || sqlc.arg(path)::text, 0));

-- WritePathGiveBackAlone gives back a lock WritePathTakeAlone took.
-- name: WritePathGiveBackAlone :exec
SELECT pg_advisory_unlock(hashtextextended('voucherd write path ' || sqlc.arg(path)::text, 0));
