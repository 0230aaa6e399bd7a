package app

import "runtime/debug"

// defaultGCPercent is the collector's target when GOGC is not set. The
// server's live heap is small (tens of MB) while every request allocates
// (a GraphQL reserve about 260 objects), so at Go's default of 100 the
// collector runs every few milliseconds during a sale and takes a fifth of
// the CPU. At 400 it runs about a quarter as often, for a heap a few times
// larger. make bench, the GraphQL sale, three runs each: 0.52-0.55 x the
// ceiling at 100, 0.60-0.64 x at 400 (docs/benchmarks.md). GOGC in the
// environment (and GOMEMLIMIT) still rule.
const defaultGCPercent = 400

// tuneGC sets defaultGCPercent unless the environment sets GOGC.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}
