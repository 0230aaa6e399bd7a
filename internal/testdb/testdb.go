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
