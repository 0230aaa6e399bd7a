// Package testdb gives a test a PostgreSQL database of its own on the test
// server, for what must not share the test database: the expiry sweep and
// reconciliation act on every row of their database, so a test of them
// would also act on the rows of every test running beside it.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"voucherd/internal/testenv"
	"voucherd/migrations"
)

// Own creates an empty database on the server of baseURL (a postgres://
// URL whose user may create databases), drops it when the test ends, and
// returns its URL: baseURL with the database's name in place of the path.
// The caller migrates it (voucherd serve does on start).
func Own(t testing.TB, baseURL string) string {
	t.Helper()
	return own(t, baseURL, "")
}

// OwnMigrated is Own's database with the migrations already applied: a
// copy of a template database migrated once per set of migrations on the
// server (see template), which costs about a fifth of migrating an empty
// database, for the many tests that start a server on a database of their
// own. voucherd serve, started on it, finds nothing to apply.
func OwnMigrated(t testing.TB, baseURL string) string {
	t.Helper()
	url := own(t, baseURL, template(t, baseURL, "voucher_tmpl_"+migrations.Checksum()[:16]))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	// A clone would share its template's random state (where campaign ids
	// start: two tests' campaigns named one gate in the shared Redis, a CI
	// rehearsal failed on it); it runs the migrations that make it again.
	perDatabase, err := migrations.PerDatabaseUp()
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	if _, err := conn.Exec(ctx, perDatabase); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	return url
}

// Migrated is OwnMigrated's database as a pool that is closed before the
// database is dropped: for a test that uses the store without a server.
func Migrated(t testing.TB, baseURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), OwnMigrated(t, baseURL))
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	t.Cleanup(pool.Close) // registered after the drop, so it runs first
	return pool
}

func own(t testing.TB, baseURL, template string) string {
	t.Helper()
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("testdb: %q is not a postgres:// URL", baseURL)
	}
	name := uniqueName("voucher_own_")

	ctx := context.Background()
	admin, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	defer func() { _ = admin.Close(ctx) }()
	create := "CREATE DATABASE " + name
	if template != "" {
		create += " TEMPLATE " + template
	}
	if _, err := admin.Exec(ctx, create); err != nil {
		t.Fatalf("testdb: create database: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, baseURL)
		if err != nil {
			t.Logf("testdb: database %s not dropped: %v", name, err)
			return
		}
		defer func() { _ = conn.Close(ctx) }()
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("testdb: database %s not dropped: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// uniqueName is prefix and 12 random hex digits: a database name no other
// test takes.
func uniqueName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// templateLock is the advisory lock (on baseURL's database) under which a
// template is built, so that test processes starting together build it
// once: the others wait, then find it.
const templateLock = 7_235_110_031

// template returns name, a database on baseURL's server migrated to this
// module's migrations (OwnMigrated's is voucher_tmpl_ and their checksum's
// first 16 hex digits), built when missing. It is built under another name and renamed
// when complete, so a database of that name is always whole, and nothing
// stays connected to it (CREATE DATABASE ... TEMPLATE needs that). It is
// kept for the next test and the next run; a changed migration makes
// another (they are small; drop voucher_tmpl_* to clear them).
func template(t testing.TB, baseURL, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	exists := func() bool {
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
			t.Fatalf("testdb: %v", err)
		}
		return n == 1
	}
	if exists() {
		return name
	}
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLock); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	defer func() { _, _ = admin.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", templateLock) }()
	if exists() {
		return name
	}
	building := name + "_building"
	// One left by a test process killed while it built.
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		t.Fatalf("testdb: create the template database: %v", err)
	}
	u, _ := url.Parse(baseURL)
	u.Path = "/" + building
	cfg, err := pgx.ParseConfig(u.String())
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	db := stdlib.OpenDB(*cfg)
	_, err = migrations.Up(ctx, db)
	_ = db.Close() // the rename needs the database without connections
	if err != nil {
		t.Fatalf("testdb: migrating the template database: %v", err)
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+name); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	return name
}

// EndLockSessions ends every session that holds an advisory lock on the
// database of url (as a restart of PostgreSQL would, for those sessions
// alone), waits until they are gone, and returns how many it ended: for
// the tests of a lock an instance keeps for its life (the write path's).
func EndLockSessions(t testing.TB, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	const holders = `SELECT DISTINCT pid FROM pg_catalog.pg_locks
	  WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
	    AND database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())`
	var ended int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM (`+holders+`) h`).Scan(&ended); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	testenv.EventuallyWithin(t, 30*time.Second, "testdb: the ended sessions gone with their advisory locks", func() (bool, string) {
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM (`+holders+`) h`).Scan(&left); err != nil {
			t.Fatalf("testdb: sessions holding advisory locks: %v", err)
		}
		return left == 0, fmt.Sprintf("%d still hold one", left)
	})
	return ended
}
