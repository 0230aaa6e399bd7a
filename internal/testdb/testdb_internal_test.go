package testdb

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"voucherd/internal/testenv"
)

// Test processes that start together build a missing template once and
// each gets its name only when it is whole: a clone of it has every
// migration applied, and no half-built database is left behind.
func TestTemplate_CallersStartingTogetherGetOneWholeMigratedTemplate(t *testing.T) {
	base := testenv.DatabaseURL()
	name := uniqueName("voucher_tmpl_test_")
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		_ = admin.Close(ctx)
	})

	var wg sync.WaitGroup
	got := make([]string, 4)
	for i := range got {
		wg.Go(func() { got[i] = template(t, base, name) })
	}
	wg.Wait()
	for i, g := range got {
		if g != name {
			t.Fatalf("caller %d got template %q, want %q", i, g, name)
		}
	}
	var left int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name+"_building").Scan(&left); err != nil || left != 0 {
		t.Errorf("databases named %s_building after the build: %d (%v), want none", name, left, err)
	}

	conn, err := pgx.Connect(ctx, own(t, base, name))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var applied int64
	if err := conn.QueryRow(ctx, "SELECT max(version_id) FROM goose_db_version WHERE is_applied").Scan(&applied); err != nil {
		t.Fatalf("the clone has no migrations applied: %v", err)
	}
	if want := latestMigration(t); applied != want {
		t.Errorf("the clone is migrated to %d, want %d", applied, want)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM voucher").Scan(&n); err != nil || n != 0 {
		t.Errorf("the clone's voucher table: %d rows (%v), want an empty table", n, err)
	}
}

// latestMigration is the highest version among the migration files.
func latestMigration(t *testing.T) int64 {
	t.Helper()
	files, err := filepath.Glob("../../migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migration files: %v", err)
	}
	var latest int64
	for _, f := range files {
		v, err := strconv.ParseInt(strings.SplitN(filepath.Base(f), "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
		latest = max(latest, v)
	}
	return latest
}

// Two clones start their campaign ids at points of their own, as two
// databases migrated apart do: a campaign's id names its gate in Redis,
// which the tests' databases share.
func TestOwnMigrated_ClonesNumberTheirCampaignsApart(t *testing.T) {
	base := testenv.DatabaseURL()
	ctx := context.Background()
	next := func() int64 {
		conn, err := pgx.Connect(ctx, OwnMigrated(t, base))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(ctx) }()
		var id int64
		if err := conn.QueryRow(ctx, "SELECT nextval(pg_get_serial_sequence('campaign', 'id'))").Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	if a, b := next(), next(); a == b {
		t.Errorf("two clones both number their first campaign %d", a)
	}
}
