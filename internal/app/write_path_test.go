package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"

	"voucherd/internal/postgres"
	"voucherd/internal/testdb"
	"voucherd/internal/testenv"
	"voucherd/sql/db"
)

// TestServe_ADatabaseIsServedOnOneWritePathThroughOneBroker: a kafka-mode
// gate reloaded at a recovery marker of another broker, or decided on by a
// sync-mode instance, can sell a use answered already (postgres.ClaimWritePath).
// So an instance with the in-process broker is its database's only one, and
// instances of the two write paths never serve one database; instances
// sharing a broker do, and the lock goes with the instance that held it.
func TestServe_ADatabaseIsServedOnOneWritePathThroughOneBroker(t *testing.T) {
	t.Parallel()
	dbURL := testdb.OwnMigrated(t, testenv.DatabaseURL())
	settings := func(extra map[string]string) func(string) string {
		m := map[string]string{
			"HTTP_ADDR": "127.0.0.1:0", "DATABASE_URL": dbURL, "REDIS_URL": testenv.RedisURL(),
			"STOREFRONT_TOKENS": "write-path-storefront-token-0123", "ADMIN_TOKENS": "write-path-admin-token-0123456789",
			"LOG_LEVEL": "error", "WARMUP_INTERVAL": "1h", "RECONCILE_INTERVAL": "1h", "EXPIRY_INTERVAL": "1h",
		}
		for k, v := range extra {
			m[k] = v
		}
		return func(k string) string { return m[k] }
	}
	inProcess := map[string]string{"FLASH_WRITE_PATH": "kafka"}
	sync := map[string]string{"FLASH_WRITE_PATH": "sync"}
	refused := func(what string, extra map[string]string, want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := Run(ctx, []string{"serve"}, settings(extra), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a refusal naming %q", what, err, want)
		}
	}

	// The lock holds one of the pool's connections: a pool of one is refused.
	refused("a pool of one connection", map[string]string{"FLASH_WRITE_PATH": "sync", "DATABASE_URL": testenv.WithQuery(dbURL, "pool_max_conns=1")}, "pool_max_conns must be at least 2")

	first := startServe(t, settings(inProcess))
	refused("a second instance with an in-process broker", inProcess, "another instance serves this database on the kafka write path")
	refused("a sync-mode instance", sync, "FLASH_WRITE_PATH=kafka serve this database")
	first.stop(t)

	// Its lock went with it: a sync-mode instance serves the database now.
	s1 := startServe(t, settings(sync))
	s2 := startServe(t, settings(sync))
	refused("a kafka-mode instance beside sync-mode ones", inProcess, "FLASH_WRITE_PATH=sync serve this database")
	s1.stop(t)
	s2.stop(t)

	// Instances sharing one broker serve one database together.
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	shared := map[string]string{"FLASH_WRITE_PATH": "kafka", "KAFKA_BROKERS": strings.Join(c.ListenAddrs(), ",")}
	k1 := startServe(t, settings(shared))
	k2 := startServe(t, settings(shared))
	refused("an instance with an in-process broker beside them", inProcess, "another instance serves this database on the kafka write path")
	k1.stop(t)
	k2.stop(t)
}

// TestServe_AWritePathLockLostWithItsSessionIsTakenAgainOrServeStops: the
// lock of the test above ends with its session (a restart of PostgreSQL).
// serve takes it again, so an instance it may not serve beside is refused
// after as before; and when such an instance took it first, serve stops,
// saying why, where it would have refused to start.
func TestServe_AWritePathLockLostWithItsSessionIsTakenAgainOrServeStops(t *testing.T) {
	t.Parallel()
	dbURL := testdb.OwnMigrated(t, testenv.DatabaseURL())
	settings := map[string]string{
		"HTTP_ADDR": "127.0.0.1:0", "DATABASE_URL": dbURL, "REDIS_URL": testenv.RedisURL(),
		"STOREFRONT_TOKENS": "write-path-storefront-token-0123", "ADMIN_TOKENS": "write-path-admin-token-0123456789",
		"LOG_LEVEL": "error", "WARMUP_INTERVAL": "1h", "RECONCILE_INTERVAL": "1h", "EXPIRY_INTERVAL": "1h",
		"FLASH_WRITE_PATH": "kafka", // with the in-process broker: alone on its database
	}
	pool, err := pgxpool.New(context.Background(), testenv.WithQuery(dbURL, "pool_max_conns=2"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// What a second instance with an in-process broker claims.
	second := func() (*postgres.WritePath, error) {
		return postgres.ClaimWritePath(context.Background(), pool, "kafka", []string{"sync"}, true)
	}

	s := startServe(t, func(k string) string { return settings[k] })
	if n := testdb.EndLockSessions(t, dbURL); n != 1 {
		t.Fatalf("ended %d sessions holding a lock, want serve's one", n)
	}
	// Read, not claimed: a claim in the window would be the instance that
	// stops serve.
	testenv.EventuallyWithin(t, time.Minute, "serve's lock taken again", func() (bool, string) {
		held, err := db.New(pool).WritePathHeld(context.Background(), "kafka")
		return err == nil && held, fmt.Sprintf("held %t, err %v", held, err)
	})
	if w, err := second(); !errors.Is(err, postgres.ErrWritePathTaken) {
		t.Errorf("a second instance's claim once serve took its lock again: %v, want a refusal", err)
		if w != nil {
			w.Release()
		}
	}

	if n := testdb.EndLockSessions(t, dbURL); n != 1 {
		t.Fatalf("ended %d sessions holding a lock, want serve's one", n)
	}
	w, err := second()
	if err != nil {
		t.Fatalf("a second instance's claim while serve's lock is lost: %v", err)
	}
	t.Cleanup(w.Release)
	select {
	case err := <-s.done:
		s.cancel()
		s.cancel = nil // stopped already
		if !errors.Is(err, postgres.ErrWritePathTaken) || !strings.Contains(err.Error(), "another instance serves this database on the kafka write path") {
			t.Errorf("serve stopped with %v, want ErrWritePathTaken naming the other instance", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve went on serving for a minute beside another instance with an in-process broker")
	}
}

// running is a `voucherd serve` run by Run in this process.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

// startServe runs serve until it listens (its stop is also a cleanup).
func startServe(t *testing.T, getenv func(string) string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := Run(ctx, []string{"serve"}, getenv, pw, io.Discard)
		_ = pw.CloseWithError(io.EOF)
		r.done <- err
	}()
	t.Cleanup(func() { r.stop(t) })
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "voucherd listening on ") {
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			return r
		}
	}
	cancel()
	t.Fatalf("serve did not start: %v", <-r.done)
	return nil
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("serve stopped: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("serve did not stop within 30 s")
	}
}
