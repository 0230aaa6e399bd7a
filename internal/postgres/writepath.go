package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"voucherd/sql/db"
)

// WritePath is an instance's hold on its write path's lock (ClaimWritePath),
// kept on one of its pool's connections until Release, and taken again by
// Hold when that connection is lost.
type WritePath struct {
	pool   *pgxpool.Pool
	path   string
	others []string
	alone  bool

	mu   sync.Mutex
	conn *pgxpool.Conn // nil while the lock is lost and not yet taken again
	// session is conn's session; former, the one of a connection lost
	// since the lock was last taken (zero: none).
	session, former db.WritePathSessionRow
}

// ErrWritePathTaken matches (errors.Is) a refusal of the lock: an instance
// of the other write path, or one this instance may not serve beside (an
// in-process broker), holds it. ClaimWritePath refuses so at the start;
// Hold returns it when such an instance took the lock while it was lost.
var ErrWritePathTaken = errors.New("another instance holds the write path's lock")

// refusal is a refusal of the lock, saying why; it is ErrWritePathTaken.
type refusal struct{ why string }

func (r refusal) Error() string        { return r.why }
func (r refusal) Is(target error) bool { return target == ErrWritePathTaken }

// ClaimWritePath takes, for the life of an instance, the database's lock of
// its flash write path (FLASH_WRITE_PATH), and checks that no instance holds
// the lock of another path. alone: the instance must be its path's only one
// (kafka mode with the in-process broker, whose events no other instance
// reaches).
//
// Why: kafka mode reloads a gate from the database at a recovery marker,
// after every event before it in the voucher's partition, so the snapshot
// holds every decision the gate answered. An instance on another broker
// reloads at markers of its own, which order none of this broker's events:
// its snapshot can lack a reservation answered 201 whose event is still on
// its way, and the gate it installs sells that use again (two test servers
// with brokers of their own on one database sold 4 uses of 3; the CHECK
// refused the fourth's event after its 201). A sync-mode instance decides on
// the same gates with no events at all. So a database is served on one
// write path, through one broker. The lock holds one of pool's connections
// for the instance's life (not one more: the tests' many servers share
// PostgreSQL's 100), so the pool needs two. A lock lost with its connection
// (a restart of PostgreSQL, a terminated session) is taken again by Hold.
func ClaimWritePath(ctx context.Context, pool *pgxpool.Pool, path string, others []string, alone bool) (*WritePath, error) {
	if pool.Config().MaxConns < 2 {
		return nil, errors.New("pool_max_conns must be at least 2: one connection holds the write path's lock")
	}
	w := &WritePath{pool: pool, path: path, others: others, alone: alone}
	if err := w.take(ctx); err != nil {
		return nil, fmt.Errorf("the write path's lock: %w", err)
	}
	return w, nil
}

// take acquires a connection and takes the lock on it, checking the other
// paths' locks after; with the lock held it keeps the connection (w.conn).
// A refusal is ErrWritePathTaken (errors.Is) and says why.
func (w *WritePath) take(ctx context.Context) error {
	c, err := w.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		closeLockConn(c)
		return err
	}
	q := db.New(c)
	take := q.WritePathTakeShared
	if w.alone {
		take = q.WritePathTakeAlone
	}
	ok, err := take(ctx, w.path)
	if err != nil {
		return fail(err)
	}
	switch {
	case !ok && w.alone:
		return fail(refusal{fmt.Sprintf("another instance serves this database on the %s write path, and this one's in-process broker (KAFKA_BROKERS empty) would hold events the other cannot see: give every instance one broker (KAFKA_BROKERS; make broker)", w.path)})
	case !ok:
		return fail(refusal{fmt.Sprintf("an instance with the in-process broker serves this database on the %s write path, and its events are out of this one's reach: stop it, or give every instance one broker (KAFKA_BROKERS; make broker)", w.path)})
	}
	// After this path's lock is taken: of two instances of different paths
	// starting together, the later check sees the other's lock.
	for _, other := range w.others {
		held, err := q.WritePathHeld(ctx, other)
		if err != nil {
			return fail(err)
		}
		if held {
			return fail(refusal{fmt.Sprintf("instances with FLASH_WRITE_PATH=%s serve this database: a database is served on one write path (stop them all before switching)", other)})
		}
	}
	session, err := q.WritePathSession(ctx)
	if err != nil {
		return fail(err)
	}
	w.conn, w.session, w.former = c, session, db.WritePathSessionRow{}
	return nil
}

// Hold keeps the lock until ctx ends: every interval it checks the lock's
// connection, and when that connection is gone (the session ended, and its
// lock with it) takes the lock again on another. While PostgreSQL does not
// answer it keeps trying. It returns an error wrapping ErrWritePathTaken
// when an instance it may not serve beside took the lock meanwhile (one
// started while PostgreSQL was restarting found no lock to stop it): the
// caller stops serving, as that instance would have at its start.
func (w *WritePath) Hold(ctx context.Context, interval time.Duration) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := w.check(ctx); errors.Is(err, ErrWritePathTaken) {
			return fmt.Errorf("the write path's lock was lost, and another instance took it: %w", err)
		}
	}
}

// check pings the lock's connection, and takes the lock again when it is
// lost (see Hold).
func (w *WritePath) check(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn != nil {
		pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := w.conn.Ping(pingCtx)
		cancel()
		if err == nil {
			return nil
		}
		closeLockConn(w.conn)
		w.conn, w.former = nil, w.session
	}
	takeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := w.take(takeCtx)
	if !errors.Is(err, ErrWritePathTaken) || w.former.Pid == 0 {
		return err
	}
	// The refusal may be this instance's own former session, which kept
	// the lock (a connection closed while PostgreSQL did not answer, or a
	// session it has not yet seen end): ended, the lock is taken again at
	// the next check. It may also have ended between the refusal and this
	// look: once it is known gone, a refusal of another try stands.
	there, endErr := db.New(w.pool).WritePathEndSession(takeCtx, db.WritePathEndSessionParams{Pid: w.former.Pid, Started: w.former.Started})
	switch {
	case endErr != nil:
		return endErr
	case there:
		return errors.New("the write path's lock is still held by this instance's former session, ended now")
	}
	w.former = db.WritePathSessionRow{}
	return w.take(takeCtx)
}

// Release gives the lock back, then closes the connection (which would
// give it back too, as the session ends, but a moment later) and the pool,
// finding it closed, drops it. Hold must have returned.
func (w *WritePath) Release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn != nil {
		closeLockConn(w.conn)
		w.conn = nil
	}
}

// closeLockConn gives the lock back and closes c: a session that answers
// late would otherwise keep the lock beside the one taken again.
func closeLockConn(c *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = db.New(c).WritePathGiveBack(ctx)
	_ = c.Conn().Close(ctx)
	c.Release()
}
