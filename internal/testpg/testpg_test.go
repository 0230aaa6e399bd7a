package testpg_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"voucherd/internal/testenv"
	"voucherd/internal/testpg"
)

// TestCluster_StopsAndStartsOnItsPortWithItsData: the voucher role owns the
// voucher database; a stopped cluster refuses connections; started again it
// answers on the same URL with what was committed before.
func TestCluster_StopsAndStartsOnItsPortWithItsData(t *testing.T) {
	t.Parallel()
	c := testpg.Start(t)
	if c.Port == 5432 {
		t.Fatal("the throwaway cluster took the shared cluster's port")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	exec := func(q string) error {
		conn, err := pgx.Connect(ctx, c.URL)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, q)
		return err
	}
	if err := exec(`CREATE TABLE kept (n int); INSERT INTO kept VALUES (42)`); err != nil {
		t.Fatalf("as voucher in its database: %v", err)
	}

	c.Stop(t)
	if c.Running() {
		t.Error("Running after Stop")
	}
	if err := exec(`SELECT 1`); err == nil {
		t.Fatal("a stopped cluster answered")
	}

	c.Start(t)
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		t.Fatalf("after Start: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT n FROM kept`).Scan(&n); err != nil || n != 42 {
		t.Fatalf("data after a restart: %d, %v", n, err)
	}
	var user string
	if err := conn.QueryRow(ctx, `SELECT current_user`).Scan(&user); err != nil || user != "voucher" {
		t.Fatalf("current_user = %q, %v", user, err)
	}
}

// TestCluster_IsRemovedWhenItsTestEnds: after the test that started it, the
// cluster no longer answers and its directory is gone.
func TestCluster_IsRemovedWhenItsTestEnds(t *testing.T) {
	testenv.SkipShort(t) // its subtest's Start would skip, leaving no cluster to look at
	t.Parallel()
	var c *testpg.Cluster
	var dirs []string
	t.Run("uses", func(t *testing.T) {
		c = testpg.Start(t)
		dirs = c.Dirs()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, c.URL); err == nil {
		conn.Close(ctx)
		t.Error("the cluster still answers after its test ended")
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", d, err)
		}
	}
}
