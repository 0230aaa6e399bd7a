package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"voucherd/internal/testdb"
	"voucherd/internal/testenv"
	"voucherd/internal/testpg"
	"voucherd/sql/db"
)

// TestClaimWritePath_InstancesOfOnePathStartingTogetherAllStart: sixteen
// instances of one write path claim it at the same moment, five times over,
// and every claim succeeds; only an instance of the other path stops one.
// (A first version tried the other path's lock to see whether it was held:
// two instances of one path checking together each found the other's try,
// and a CI rehearsal refused a sync-mode server "instances with
// FLASH_WRITE_PATH=kafka serve this database".)
func TestClaimWritePath_InstancesOfOnePathStartingTogetherAllStart(t *testing.T) {
	t.Parallel()
	url := testdb.Own(t, testenv.DatabaseURL())
	ctx := context.Background()
	const instances = 16
	pools := lockPools(t, url, instances)
	claimAll := func(path, other string) []*WritePath {
		t.Helper()
		claims := make([]*WritePath, instances)
		errs := make([]error, instances)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range pools {
			wg.Go(func() {
				<-start
				claims[i], errs[i] = ClaimWritePath(ctx, pools[i], path, []string{other}, false)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("instance %d of %s starting with the others: %v", i, path, err)
			}
		}
		return claims
	}
	release := func(claims []*WritePath) {
		for _, c := range claims {
			if c != nil {
				c.Release()
			}
		}
	}
	for range 5 {
		release(claimAll("sync", "kafka"))
	}

	// An instance of the other path stops a claim, and only while it runs.
	kafka, err := ClaimWritePath(ctx, pools[0], "kafka", []string{"sync"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := ClaimWritePath(ctx, pools[1], "sync", []string{"kafka"}, false); err == nil || !strings.Contains(err.Error(), "FLASH_WRITE_PATH=kafka serve this database") {
		t.Errorf("a sync claim beside a kafka instance: %v, want a refusal", err)
		if c != nil {
			c.Release()
		}
	}
	kafka.Release()
	release(claimAll("sync", "kafka"))
}

// lockPools are n pools of two connections (the least ClaimWritePath
// takes) on url, closed when the test ends.
func lockPools(t *testing.T, url string, n int) []*pgxpool.Pool {
	t.Helper()
	pools := make([]*pgxpool.Pool, n)
	for i := range pools {
		p, err := pgxpool.New(context.Background(), testenv.WithQuery(url, "pool_max_conns=2"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		pools[i] = p
	}
	return pools
}

// holding runs w.Hold, checking every 50 ms, until the test ends; its
// result arrives on the channel.
func holding(t *testing.T, w *WritePath) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	held, done := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(done)
		held <- w.Hold(ctx, 50*time.Millisecond)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("Hold did not return 30 s after its context ended")
		}
	})
	return held
}

// TestWritePath_ALockLostInARestartOfPostgreSQLIsTakenAgain: the lock is a
// session's, so a restart of PostgreSQL ends it with the session. Before
// Hold, nothing took it again, and an instance of the other write path,
// starting then, found no lock to stop it. Now the lock is taken again on
// a new connection, and that instance is refused as at any other time.
func TestWritePath_ALockLostInARestartOfPostgreSQLIsTakenAgain(t *testing.T) {
	t.Parallel()
	cluster := testpg.Start(t)
	pools := lockPools(t, cluster.URL, 2)
	ctx := context.Background()
	syncPath, err := ClaimWritePath(ctx, pools[0], "sync", []string{"kafka"}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(syncPath.Release)
	held := holding(t, syncPath)

	cluster.Stop(t)
	cluster.Start(t)
	testenv.EventuallyWithin(t, time.Minute, "the sync path's lock held again after the restart", func() (bool, string) {
		held, err := db.New(pools[1]).WritePathHeld(ctx, "sync")
		return err == nil && held, fmt.Sprintf("held %t, err %v", held, err)
	})
	if k, err := ClaimWritePath(ctx, pools[1], "kafka", []string{"sync"}, false); !errors.Is(err, ErrWritePathTaken) {
		t.Errorf("a kafka claim after the restart: %v, want a refusal (the sync instance serves the database)", err)
		if k != nil {
			k.Release()
		}
	}
	select {
	case err := <-held:
		t.Errorf("Hold returned %v while its lock was taken again", err)
	default:
	}
}

// TestWritePath_AnInstanceThatTookTheLostLockStopsTheOne: an instance of
// the other write path that started while the lock was lost (its session
// ended) holds it now: Hold says so (ErrWritePathTaken), and serve stops
// on it, as it would have refused to start beside that instance.
func TestWritePath_AnInstanceThatTookTheLostLockStopsTheOne(t *testing.T) {
	t.Parallel()
	url := testdb.Own(t, testenv.DatabaseURL())
	pools := lockPools(t, url, 2)
	ctx := context.Background()
	syncPath, err := ClaimWritePath(ctx, pools[0], "sync", []string{"kafka"}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(syncPath.Release)
	if n := testdb.EndLockSessions(t, url); n != 1 {
		t.Fatalf("ended %d sessions holding the lock, want the sync instance's one", n)
	}
	kafka, err := ClaimWritePath(ctx, pools[1], "kafka", []string{"sync"}, false)
	if err != nil {
		t.Fatalf("a kafka claim while the sync instance's lock is lost: %v (the window Hold closes)", err)
	}
	t.Cleanup(kafka.Release)
	select {
	case err := <-holding(t, syncPath):
		if !errors.Is(err, ErrWritePathTaken) || !strings.Contains(err.Error(), "FLASH_WRITE_PATH=kafka serve this database") {
			t.Errorf("Hold beside the kafka instance: %v, want ErrWritePathTaken naming it", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Hold did not return within a minute beside a kafka instance holding the lock")
	}
}

// TestWritePath_ItsOwnFormerSessionIsNotTakenForAnotherInstance: a
// connection given up (it did not answer a ping) may leave its session
// behind for a while, still holding the lock; an instance alone on its path
// is then refused its own lock. That session is ended and the lock taken
// again, where taking the refusal as another instance's would have stopped
// the instance with nobody beside it. Twenty times: the session may end
// between a refusal and the look at it (a first version took that refusal
// for another instance's about one time in thirty).
func TestWritePath_ItsOwnFormerSessionIsNotTakenForAnotherInstance(t *testing.T) {
	t.Parallel()
	pool := lockPools(t, testdb.Own(t, testenv.DatabaseURL()), 1)[0]
	for round := range 20 {
		lockLostWithItsSessionLeft(t, round, pool)
	}
}

// lockLostWithItsSessionLeft is one round of the test above.
func lockLostWithItsSessionLeft(t *testing.T, round int, pool *pgxpool.Pool) {
	ctx := context.Background()
	alone, err := ClaimWritePath(ctx, pool, "kafka", []string{"sync"}, true)
	if err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	// The connection given up with its session left standing: what check
	// does after a failed ping, without the close that ends it.
	left, first := alone.conn, alone.session
	defer func() { // (after a Fatalf too: the pool's Close waits for left)
		_ = left.Conn().Close(ctx) // its session was ended: not back to the pool
		left.Release()
		alone.Release()
	}()
	alone.mu.Lock()
	alone.conn, alone.former = nil, alone.session
	alone.mu.Unlock()

	if err := alone.check(ctx); err == nil || errors.Is(err, ErrWritePathTaken) {
		t.Errorf("round %d: the first check with the former session holding the lock: %v, want it ended and no refusal", round, err)
	}
	testenv.Eventually(t, "the lock taken again once the former session is gone", func() (bool, string) {
		err := alone.check(ctx)
		if errors.Is(err, ErrWritePathTaken) {
			t.Fatalf("round %d: a check after the former session was ended: %v, want the lock taken again", round, err)
		}
		return err == nil, fmt.Sprint(err)
	})
	if alone.conn == nil || alone.session == first {
		t.Errorf("round %d: the lock is on session %+v, want a new one (the first was %+v)", round, alone.session, first)
	}
}
