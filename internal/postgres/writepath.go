package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"voucherd/sql/db"
)

// WritePath is an instance's hold on its write path's lock (ClaimWritePath),
// kept on one of its pool's connections until Release.
type WritePath struct{ conn *pgxpool.Conn }

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
// write path, through one broker. Checked at the start: a lock lost with its
// connection (a restart of PostgreSQL) is not taken again. The lock holds
// one of pool's connections for the instance's life (not one more: the
// tests' many servers share PostgreSQL's 100), so the pool needs two.
func ClaimWritePath(ctx context.Context, pool *pgxpool.Pool, path string, others []string, alone bool) (*WritePath, error) {
	if pool.Config().MaxConns < 2 {
		return nil, errors.New("pool_max_conns must be at least 2: one connection holds the write path's lock")
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("the write path's lock: %w", err)
	}
	w := &WritePath{conn: c}
	fail := func(err error) (*WritePath, error) {
		w.Release()
		return nil, fmt.Errorf("the write path's lock: %w", err)
	}
	q := db.New(c)
	take := q.WritePathTakeShared
	if alone {
		take = q.WritePathTakeAlone
	}
	ok, err := take(ctx, path)
	if err != nil {
		return fail(err)
	}
	switch {
	case !ok && alone:
		return fail(fmt.Errorf("another instance serves this database on the %s write path, and this one's in-process broker (KAFKA_BROKERS empty) would hold events the other cannot see: give every instance one broker (KAFKA_BROKERS; make broker)", path))
	case !ok:
		return fail(fmt.Errorf("an instance with the in-process broker serves this database on the %s write path, and its events are out of this one's reach: stop it, or give every instance one broker (KAFKA_BROKERS; make broker)", path))
	}
	// After this path's lock is taken: of two instances of different paths
	// starting together, the later check sees the other's lock.
	for _, other := range others {
		held, err := q.WritePathHeld(ctx, other)
		if err != nil {
			return fail(err)
		}
		if held {
			return fail(fmt.Errorf("instances with FLASH_WRITE_PATH=%s serve this database: a database is served on one write path (stop them all before switching)", other))
		}
	}
	return w, nil
}

// Release gives the lock back, then closes the connection (which would
// give it back too, as the session ends, but a moment later) and the pool,
// finding it closed, drops it.
func (w *WritePath) Release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = db.New(w.conn).WritePathGiveBack(ctx)
	_ = w.conn.Conn().Close(ctx)
	w.conn.Release()
}
