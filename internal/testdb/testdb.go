// Package testdb gives a test a PostgreSQL database of its own on the test
// server, for what must not share the test database: the expiry sweep and
// reconciliation act on every row of their database, so a test of them
// would also act on the rows of every test running beside it.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"voucherd/migrations"
)

// Own creates an empty database on the server of baseURL (a postgres://
// URL whose user may create databases), drops it when the test ends, and
// returns its URL: baseURL with the database's name in place of the path.
// The caller migrates it (voucherd serve does on start).
func Own(t testing.TB, baseURL string) string {
	t.Helper()
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("testdb: %q is not a postgres:// URL", baseURL)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "voucher_own_" + hex.EncodeToString(b)

	ctx := context.Background()
	admin, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	defer func() { _ = admin.Close(ctx) }()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
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

// Migrated is Own's database with the migrations applied, as a pool that
// is closed before the database is dropped: for a test that uses the store
// without a server (voucherd serve migrates its database itself).
func Migrated(t testing.TB, baseURL string) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, Own(t, baseURL))
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	t.Cleanup(pool.Close) // registered after Own's drop, so it runs first
	if _, err := migrations.Up(ctx, stdlib.OpenDBFromPool(pool)); err != nil {
		t.Fatalf("testdb: migrations: %v", err)
	}
	return pool
}
