package migrations

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"voucherd/internal/testenv"
)

// freshDatabase creates an empty database for one test, dropped at its end.
func freshDatabase(t *testing.T) *sql.DB {
	t.Helper()
	url := testenv.DatabaseURL()
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	name := "voucher_migrations_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	own := strings.Replace(url, "/"+cfg.ConnConfig.Database+"?", "/"+name+"?", 1)
	pool, err := pgxpool.New(ctx, own)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() {
		_ = db.Close()
		pool.Close()
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return db
}

// migrateTo applies the migrations up to version.
func migrateTo(t *testing.T, db *sql.DB, version int64) {
	t.Helper()
	p, err := goose.NewProvider(goose.DialectPostgres, db, files)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), version); err != nil {
		t.Fatalf("migrate to %d: %v", version, err)
	}
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func TestUpperCaseCodes_ExistingCodesMoveToCapitalsWithEverythingNamingThem(t *testing.T) {
	db := freshDatabase(t)
	migrateTo(t, db, 35)
	mustExec(t, db, `INSERT INTO voucher (code, discount_amount, total_limit, used_count, reserved_count, starts_at, ends_at)
		VALUES ('winter25', 500, 10, 1, 1, now() - interval '1 hour', now() + interval '1 day')`)
	mustExec(t, db, `INSERT INTO voucher_customer (voucher_code, customer_id, used_count, use_limit) VALUES ('winter25', 7, 1, 1)`)
	mustExec(t, db, `INSERT INTO voucher_redemption (order_id, voucher_code, customer_id, order_amount, discount_amount, status, created_at, expires_at)
		VALUES ('o-1', 'winter25', 7, 1000, 500, 'RESERVED', now(), now() + interval '15 minutes')`)
	mustExec(t, db, `INSERT INTO reservation_event (order_id, voucher_code, customer_id, kind, path) VALUES ('o-1', 'winter25', 7, 'reserved', 'database')`)

	if _, err := Up(context.Background(), db); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	for _, q := range []string{
		`SELECT code FROM voucher`,
		`SELECT voucher_code FROM voucher_customer`,
		`SELECT voucher_code FROM voucher_redemption`,
		`SELECT voucher_code FROM reservation_event`,
	} {
		var code string
		if err := db.QueryRow(q).Scan(&code); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if code != "WINTER25" {
			t.Errorf("%s = %q, want WINTER25", q, code)
		}
	}
	// From now on the database itself keeps codes in capitals.
	if _, err := db.Exec(`INSERT INTO voucher (code, discount_amount, total_limit, starts_at, ends_at)
		VALUES ('spring', 500, 10, now(), now() + interval '1 day')`); err == nil {
		t.Error("a lower-case code was stored after the migration")
	}
}

func TestUpperCaseCodes_TwoCodesDifferingOnlyInCaseStopTheMigrationWithTheirNames(t *testing.T) {
	db := freshDatabase(t)
	migrateTo(t, db, 35)
	for _, code := range []string{"winter25", "WINTER25", "Spring", "spring", "other"} {
		mustExec(t, db, `INSERT INTO voucher (code, discount_amount, total_limit, starts_at, ends_at)
			VALUES ($1, 500, 10, now(), now() + interval '1 day')`, code)
	}
	_, err := Up(context.Background(), db)
	if err == nil {
		t.Fatal("the migration went ahead with codes that differ only in case")
	}
	for _, want := range []string{"differ only in case", "WINTER25, winter25", "Spring, spring", "Rename"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	// Nothing moved: the migration is one transaction.
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM voucher WHERE code <> upper(code)`).Scan(&n); err != nil || n != 4 {
		t.Errorf("lower-case codes after the refused migration = %d (%v), want 4 (winter25, Spring, spring, other)", n, err)
	}
}

// The reservations made before positions were kept are numbered in the
// order they were made, per voucher row, and each voucher's count of them
// continues from there.
func TestReservationPosition_ExistingReservationsAreNumberedInTheirOrder(t *testing.T) {
	db := freshDatabase(t)
	migrateTo(t, db, 74)
	for _, code := range []string{"A", "B"} {
		mustExec(t, db, `INSERT INTO voucher (code, discount_amount, currency, total_limit, used_count, reserved_count, starts_at, ends_at)
			VALUES ($1, 500, 'USD', 10, 0, 0, now() - interval '1 hour', now() + interval '1 day')`, code)
	}
	for i, o := range []struct{ id, code, status string }{
		{"o-3", "A", "RELEASED"}, {"o-1", "A", "RESERVED"}, {"o-9", "B", "CONFIRMED"}, {"o-2", "A", "RESERVED"},
	} {
		mustExec(t, db, `INSERT INTO voucher_redemption (order_id, voucher_code, customer_id, order_amount, discount_amount, status, created_at, expires_at)
			VALUES ($1, $2, 7, 1000, 500, $3, now() + $4 * interval '1 second', now() + interval '15 minutes')`, o.id, o.code, o.status, i)
	}
	if _, err := Up(context.Background(), db); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	want := map[string]int{"o-3": 1, "o-1": 2, "o-9": 1, "o-2": 3}
	for id, p := range want {
		var got int
		if err := db.QueryRow(`SELECT position FROM voucher_redemption WHERE order_id = $1`, id).Scan(&got); err != nil || got != p {
			t.Errorf("order %s: position %d (%v), want %d", id, got, err, p)
		}
	}
	for code, n := range map[string]int{"A": 3, "B": 1} {
		var got int
		if err := db.QueryRow(`SELECT admitted_count FROM voucher WHERE code = $1`, code).Scan(&got); err != nil || got != n {
			t.Errorf("voucher %s: admitted_count %d (%v), want %d", code, got, err, n)
		}
	}
}

// TestPerDatabaseUp_MovesACopysCampaignIDsToAStartOfItsOwn: what a copy of a
// migrated database runs again (PerDatabaseUp) is migration 00071's Up, and
// it gives the copy a start of campaign ids other than the original's.
func TestPerDatabaseUp_MovesACopysCampaignIDsToAStartOfItsOwn(t *testing.T) {
	t.Parallel()
	db := freshDatabase(t)
	migrateTo(t, db, 71)
	next := func() int64 {
		t.Helper()
		var v int64
		if err := db.QueryRow(`SELECT last_value FROM campaign_id_seq`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := next()
	up, err := PerDatabaseUp()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(up, "setval(pg_get_serial_sequence('campaign', 'id')") || strings.Contains(up, "+goose") {
		t.Errorf("PerDatabaseUp is not 00071's Up section alone:\n%s", up)
	}
	mustExec(t, db, up)
	if after := next(); after == before || after < 1 || after > 1e12+1 {
		t.Errorf("campaign ids start at %d after PerDatabaseUp, %d before: want another start in [1, 1e12]", after, before)
	}
}
