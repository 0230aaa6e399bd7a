package job_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"voucherd/internal/job"
	"voucherd/internal/postgres"
	"voucherd/internal/testdb"
	"voucherd/internal/testenv"
)

// ownStore is a store on a database of the test's own: the job's lease is
// named, and every server on the shared test database takes it too.
func ownStore(t *testing.T) *postgres.Store {
	t.Helper()
	return postgres.New(testdb.Migrated(t, testenv.DatabaseURL()))
}

// Three instances on one database sample its open vouchers once an
// interval between them, not once each: a pass reads every open voucher,
// whoever runs it, and writes the database's figures. The holder keeps
// sampling each interval; when its lease lapses (it stopped), another
// instance takes the passes over.
func TestSampleCounters_OneInstanceOfManySamplesEachInterval(t *testing.T) {
	store := ownStore(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	const interval = 2 * time.Second
	var passes [3]atomic.Int32
	jobs := make([]*job.Periodic, len(passes))
	for i := range jobs {
		sample := func(context.Context) (int, error) { passes[i].Add(1); return 0, nil }
		jobs[i] = job.SampleCounters(sample, store, "instance-"+string(rune('a'+i)), interval, quiet)
	}
	ctx := context.Background()
	for round := range 3 {
		for _, j := range jobs {
			if err := j.RunOnce(ctx); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	if a, b, c := passes[0].Load(), passes[1].Load(), passes[2].Load(); a != 3 || b != 0 || c != 0 {
		t.Fatalf("three rounds of three instances sampled %d, %d and %d times; want 3, 0, 0 (the first holds the lease)", a, b, c)
	}

	// The holder stops; once its lease (9/10 of the interval) lapses, the
	// next instance to try samples, and only it.
	testenv.Eventually(t, "another instance sampling after the holder stopped", func() (bool, string) {
		for _, j := range jobs[1:] {
			if err := j.RunOnce(ctx); err != nil {
				return false, err.Error()
			}
		}
		b, c := passes[1].Load(), passes[2].Load()
		return b+c > 0, "no pass yet"
	})
	if b, c := passes[1].Load(), passes[2].Load(); b+c != 1 {
		t.Fatalf("after the holder stopped the other two sampled %d and %d times in one round; want one pass between them", b, c)
	}
}
