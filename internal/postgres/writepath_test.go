package postgres

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"voucherd/internal/testdb"
	"voucherd/internal/testenv"
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
	pools := make([]*pgxpool.Pool, instances)
	for i := range pools {
		p, err := pgxpool.New(ctx, testenv.WithQuery(url, "pool_max_conns=2"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		pools[i] = p
	}
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
