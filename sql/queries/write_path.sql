-- WritePathTakeShared takes a path's lock beside the other instances of it.
-- The write path's locks are session-level advisory locks that an instance
-- of `voucherd serve` holds on one of its connections for its life
-- (postgres.ClaimWritePath), one per FLASH_WRITE_PATH, so that the
-- instances serving one database take one write path, and an instance with
-- the in-process broker is its path's only one.
-- name: WritePathTakeShared :one
SELECT pg_try_advisory_lock_shared(hashtextextended('voucherd write path ' || sqlc.arg(path)::text, 0));

-- WritePathTakeAlone takes a path's lock only if no other instance holds it.
-- name: WritePathTakeAlone :one
SELECT pg_try_advisory_lock(hashtextextended('voucherd write path ' || sqlc.arg(path)::text, 0));

-- WritePathHeld says whether an instance holds a path's lock on this
-- database, read from pg_locks rather than by trying the lock: a try would
-- make two instances of one path that start together each see the other's.
-- A bigint advisory key shows as classid (its high 32 bits) and objid (its
-- low 32 bits), with objsubid 1.
-- name: WritePathHeld :one
SELECT EXISTS (
    SELECT 1
      FROM pg_catalog.pg_locks l,
           (SELECT hashtextextended('voucherd write path ' || sqlc.arg(path)::text, 0) AS k) key
     WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
       AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
       AND l.classid::bigint = (key.k >> 32) & 4294967295
       AND l.objid::bigint = key.k & 4294967295
);

-- WritePathGiveBack gives back every lock this session holds (the write
-- path's is its only one), at once: a closed connection's session ends, and
-- gives its locks back, a moment later.
-- name: WritePathGiveBack :exec
SELECT pg_advisory_unlock_all();

-- WritePathSession is this connection's session: its process id and start,
-- which name it among every session the server has had (a process id
-- alone may be reused after a restart).
-- name: WritePathSession :one
SELECT pid::int AS pid, backend_start::timestamptz AS started
  FROM pg_catalog.pg_stat_activity
 WHERE pid = pg_backend_pid();

-- WritePathEndSession ends an instance's former session of its lock (its
-- connection was closed, or stopped answering, and the server may not have
-- noticed yet), saying whether it was still there: in pg_stat_activity, or
-- ending (an ending session leaves pg_stat_activity before it gives back
-- its locks; its process id is not another session's before it has).
-- name: WritePathEndSession :one
SELECT (coalesce((
    SELECT pg_terminate_backend(pid)
      FROM pg_catalog.pg_stat_activity
     WHERE pid = sqlc.arg(pid)::int AND backend_start = sqlc.arg(started)::timestamptz
), false) OR EXISTS (
    SELECT 1
      FROM pg_catalog.pg_locks
     WHERE pid = sqlc.arg(pid)::int AND locktype = 'advisory' AND granted
))::bool AS there;
