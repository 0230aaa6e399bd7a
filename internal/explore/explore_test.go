package explore

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"voucherd/internal/testenv"
)

var (
	seedsFlag = flag.Int("explore.seeds", 0, "how many seeds to run (from -explore.first); 0: the few of `make test`")
	firstFlag = flag.Uint64("explore.first", 1, "the first seed of -explore.seeds")
	seedFlag  = flag.String("explore.seed", "", "run exactly these seeds (comma-separated), e.g. the one a failure names")
	shortFlag = flag.Bool("explore.short", false, "the smaller plans of make test's seeds")
	dirFlag   = flag.String("explore.dir", filepath.Join(os.TempDir(), "voucherd-explore"), "where each seed's logs and history go (a directory seed-N per seed)")
)

// makeTestSeeds are the seeds `make test` runs, smaller than an
// exploration's (about half a minute each on two cores).
var makeTestSeeds = []uint64{3, 11}

// knownOpen are the kinds of violation today's tree is known to have, each
// with where it is reported. In `make test` its seeds log these ("KNOWN
// OPEN") instead of failing, so the suite stays green while they are open
// and still fails on any other kind; `make explore` fails on every kind.
// Only wrong refusal codes are here: no kind that undoes an answered
// success, oversells or leaks. Delete a line when its fix lands.
var knownOpen = map[string]string{}

// TestExplore runs seeds of the fault explorer; `make explore SEEDS=N`
// runs N of them, `make explore SEED=s` one again. Each failing seed names
// the command that runs it again and the directory of its logs.
func TestExplore(t *testing.T) {
	if testing.Short() {
		t.Skip("the explorer runs real processes for a minute; not in -short")
	}
	seeds, short := makeTestSeeds, true
	switch {
	case *seedFlag != "":
		seeds, short = nil, *shortFlag
		for _, s := range strings.Split(*seedFlag, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			if err != nil {
				t.Fatalf("-explore.seed %q: %v", s, err)
			}
			seeds = append(seeds, n)
		}
	case *seedsFlag > 0:
		seeds, short = nil, *shortFlag
		for i := range *seedsFlag {
			seeds = append(seeds, *firstFlag+uint64(i))
		}
	}
	dbURL := testenv.DatabaseURL()
	var summary []string
	began := time.Now()
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			dir := filepath.Join(*dirFlag, fmt.Sprintf("seed-%d", seed))
			_ = os.RemoveAll(dir)
			res := Run(t, seed, short, dir, dbURL)
			for _, n := range res.Notes {
				t.Logf("note: %s", n)
			}
			line := fmt.Sprintf("seed %d: %d violation(s) [%s], %s, %d calls, logs in %s", seed, len(res.Violations), res.KindSummary(), res.Took.Round(time.Second), res.Calls, dir)
			summary = append(summary, line)
			failing := res.Violations
			if short && *seedFlag == "" && *seedsFlag == 0 {
				failing = nil
				known := map[string]int{}
				for _, v := range res.Violations {
					if _, ok := knownOpen[v.Kind]; ok {
						known[v.Kind]++
						continue
					}
					failing = append(failing, v)
				}
				for k, n := range known {
					t.Logf("KNOWN OPEN, not failing make test (%s): %d x %s; all in %s", knownOpen[k], n, k, dir)
				}
			}
			if len(failing) > 0 {
				var shown []string
				for _, v := range failing[:min(len(failing), 8)] {
					shown = append(shown, v.Text)
				}
				t.Errorf("seed %d broke the contract %d time(s) [%s], e.g.:\n%s\nrun it again: %s\nlogs, history and every violation: %s",
					seed, len(failing), res.KindSummary(), strings.Join(shown, "\n"), Rerun(seed, short), dir)
			}
		})
	}
	t.Logf("explored %d seed(s) in %s:\n%s", len(seeds), time.Since(began).Round(time.Second), strings.Join(summary, "\n"))
}
